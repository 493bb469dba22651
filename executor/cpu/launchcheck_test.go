// Tests that executor.CheckLaunch, which `mscclgo check --size` and `run`
// call before allocating anything, rejects exactly the plans whose
// launches this backend rejects.
package cpu

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// lcPlan is a one-rank "test" plan whose thread block 0 runs ops.
type lcPlan struct {
	align            int
	protocol         string
	double, reuse    bool
	in, out, scratch int
	ops              []any
}

func (p lcPlan) load(t *testing.T) *plan.Plan {
	t.Helper()
	proto := p.protocol
	if proto == "" {
		proto = "Simple"
	}
	align := p.align
	if align == 0 {
		align = 16
	}
	data, err := json.Marshal(map[string]any{
		"name": "lc", "collective": "test", "protocol": proto, "inplace": false,
		"reuse_resources": p.reuse, "use_double_scratch_buffer": p.double, "buffer_alignment": align,
		"gpus": []any{map[string]any{
			"id": 0, "input_chunks": p.in, "output_chunks": p.out, "scratch_chunks": p.scratch,
			"channels": []any{}, "remote_buffers": []any{}, "semaphores": []any{},
			"threadblocks": []any{map[string]any{"id": 0, "channels": []any{}, "remote_buffer_refs": []any{}, "ops": p.ops}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Load(data)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return pl
}

// opd is a local operand of one chunk.
func opd(buf string, index int) []any {
	return []any{map[string]any{"type": buf, "index": index, "size": 1}}
}

func pipeline(unit int, body ...any) map[string]any {
	return map[string]any{"name": "pipeline", "iter_context": map[string]any{"unit_size": unit, "num_chunks": 1}, "ops": body}
}

// reduceOp sums input and output chunk 0 into output chunk 0.
func reduceOp() map[string]any {
	return map[string]any{"name": "re",
		"src_buff": []any{map[string]any{"type": "i", "index": 0, "size": 1}, map[string]any{"type": "o", "index": 0, "size": 1}},
		"dst_buff": opd("o", 0)}
}

func TestCheckLaunchAgreesWithLaunch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan lcPlan
		size uint64
		dt   executor.ElemType
		bad  bool
	}{
		{name: "pipelined reduce, unit 1", plan: lcPlan{in: 1, out: 1, ops: []any{pipeline(1, reduceOp())}}, size: 64, dt: executor.Float16, bad: true},
		{name: "pipelined reduce, unit 7", plan: lcPlan{in: 1, out: 1, ops: []any{pipeline(7, reduceOp())}}, size: 64, dt: executor.Float16, bad: true},
		{name: "pipelined reduce, unit 2", plan: lcPlan{in: 1, out: 1, ops: []any{pipeline(2, reduceOp())}}, size: 64, dt: executor.Float16},
		{name: "pipelined reduce, unit 2, float32", plan: lcPlan{in: 1, out: 1, ops: []any{pipeline(2, reduceOp())}}, size: 64, dt: executor.Float32, bad: true},
		{name: "pipelined reduce, unit 4, float32", plan: lcPlan{in: 1, out: 1, ops: []any{pipeline(4, reduceOp())}}, size: 64, dt: executor.Float32},
		{name: "pipelined reduce, short last iteration", plan: lcPlan{align: 4, in: 1, out: 1, ops: []any{pipeline(24, reduceOp())}}, size: 36, dt: executor.Float32},
		{name: "pipelined reduce, partial element in the last iteration", plan: lcPlan{align: 2, in: 2, out: 2, ops: []any{pipeline(4, reduceOp())}}, size: 12, dt: executor.Float32, bad: true},
		{name: "reduce of 6-byte chunks, float32", plan: lcPlan{align: 2, in: 2, out: 2, ops: []any{reduceOp()}}, size: 12, dt: executor.Float32, bad: true},
		{name: "reduce of 6-byte chunks, float16", plan: lcPlan{align: 2, in: 2, out: 2, ops: []any{reduceOp()}}, size: 12, dt: executor.Float16},
		{name: "packets at data offset 10", plan: lcPlan{align: 2, in: 4, out: 4, scratch: 4,
			ops: []any{map[string]any{"name": "cpkt", "src_buff": opd("i", 1), "dst_buff": opd("s", 1)}}}, size: 40, dt: executor.Float16, bad: true},
		{name: "packets at data offset 12", plan: lcPlan{align: 4, in: 4, out: 4, scratch: 4,
			ops: []any{map[string]any{"name": "cpkt", "src_buff": opd("i", 1), "dst_buff": opd("s", 1)}}}, size: 48, dt: executor.Float16},
		{name: "packets in an upper scratch half at 20", plan: lcPlan{align: 2, protocol: "LL", double: true, in: 1, out: 1, scratch: 1,
			ops: []any{map[string]any{"name": "cpkt", "src_buff": opd("i", 0), "dst_buff": opd("s", 0)}}}, size: 10, dt: executor.Float16, bad: true},
		{name: "packets in an upper scratch half at 32", plan: lcPlan{align: 16, protocol: "LL", double: true, in: 1, out: 1, scratch: 1,
			ops: []any{map[string]any{"name": "cpkt", "src_buff": opd("i", 0), "dst_buff": opd("s", 0)}}}, size: 16, dt: executor.Float16},
		{name: "reuse ring beyond scratch", plan: lcPlan{reuse: true, in: 1, out: 1, scratch: 64,
			ops: []any{pipeline(1536<<10, map[string]any{"name": "copy", "src_buff": opd("i", 0), "dst_buff": opd("s", 63)})}}, size: 1536 << 10, dt: executor.Float16, bad: true},
		{name: "reuse ring inside scratch", plan: lcPlan{reuse: true, in: 1, out: 1, scratch: 64,
			ops: []any{pipeline(1<<20, map[string]any{"name": "copy", "src_buff": opd("i", 0), "dst_buff": opd("s", 63)})}}, size: 1536 << 10, dt: executor.Float16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := tt.plan.load(t)
			l, err := executor.PlanLayout(plan, tt.size, tt.dt, plan.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := executor.Instantiate(plan, l.Sizes)
			if err != nil {
				t.Fatal(err)
			}
			checkErr := executor.CheckLaunch(inst, l, false)
			sess, err := New().Open(inst, executor.Options{DType: tt.dt})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			bufs := l.Alloc()
			var runErr error
			// Two launches: the second uses the upper scratch half.
			for i := 0; i < 2 && runErr == nil; i++ {
				runErr = sess.Launch(context.Background(), bufs)
			}
			type outcome struct{ Check, Launch bool }
			if d := cmp.Diff(outcome{tt.bad, tt.bad}, outcome{checkErr != nil, runErr != nil}); d != "" {
				t.Errorf("rejected (-want +got):\n%s\nCheckLaunch: %v\nLaunch: %v", d, checkErr, runErr)
			}
		})
	}
}
