package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// baseGPU is a valid rank of the two-rank base plan: TB 0 puts a chunk to
// the peer's scratch, signals, waits and reduces; TB 1 releases a
// semaphore; both meet at barrier 0.
func baseGPU(r int) string {
	peer := 1 - r
	return fmt.Sprintf(`{
  "id": %[1]d, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 2,
  "threadblocks": [
    {"id": 0,
     "ops": [
      {"name": "put", "src_buff": [{"type": "i", "index": %[1]d, "size": 1}], "dst_buff": [{"buffer_id": 0, "index": %[1]d, "size": 1}], "channel_type": "memory"},
      {"name": "nop"},
      {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
      {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
      {"name": "nop"},
      {"name": "re", "src_buff": [{"type": "i", "index": %[2]d, "size": 1}, {"type": "s", "index": %[2]d, "size": 1}], "dst_buff": [{"type": "o", "index": %[2]d, "size": 1}], "reduce_op": "sum"},
      {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2}
     ],
     "channels": [{"channel_type": "memory", "channel_ids": [0]}],
     "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}]},
    {"id": 1,
     "ops": [
      {"name": "sem_release", "semaphore_ids": [0]},
      {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2}
     ],
     "channels": [],
     "remote_buffer_refs": []}
  ],
  "channels": [{"channel_type": "memory", "connected_to": [%[2]d]}],
  "remote_buffers": [{"rank": %[2]d, "type": "s", "access_channel_types": ["memory"]}],
  "semaphores": [{"init_value": 0}]
}`, r, peer)
}

var basePlan = `{
  "name": "base", "collective": "allreduce", "protocol": "Simple", "inplace": true, "reuse_resources": false,
  "gpus": [` + baseGPU(0) + `,` + baseGPU(1) + `],
  "num_threads_per_block": 1024, "use_double_scratch_buffer": false, "buffer_alignment": 16,
  "min_message_size": 0, "max_message_size": 18446744073709551615
}`

// decodeTree decodes JSON keeping numbers exact.
func decodeTree(t *testing.T, data string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m
}

// at walks a decoded tree by keys and indices.
func treeAt(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func treeObj(v any, path ...any) map[string]any { return treeAt(v, path...).(map[string]any) }

func jnum(n uint64) json.Number { return json.Number(fmt.Sprint(n)) }

// op returns gpus[r].threadblocks[tb].ops[k].
func planOp(m map[string]any, r, tb, k int) map[string]any {
	return treeObj(m, "gpus", r, "threadblocks", tb, "ops", k)
}

func planGPU(m map[string]any, r int) map[string]any { return treeObj(m, "gpus", r) }

func mutatedPlan(t *testing.T, mutate func(m map[string]any)) []byte {
	t.Helper()
	m := decodeTree(t, basePlan)
	if mutate != nil {
		mutate(m)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBasePlanIsClean(t *testing.T) {
	t.Parallel()
	if errs := Check([]byte(basePlan)); len(errs) != 0 {
		t.Fatalf("Check(base) = %v", errs)
	}
	p, err := Load([]byte(basePlan))
	if err != nil {
		t.Fatal(err)
	}
	want := ThreadBlock{
		ID: 0,
		Ops: []Op{
			{Type: OpPut, ChannelType: Memory,
				Src: []Operand{{Kind: LocalOperand, Type: Input, Index: 1, Size: 1}},
				Dst: []Operand{{Kind: RemoteOperand, BufferID: 0, Index: 1, Size: 1}}},
			{Type: OpNop},
			{Type: OpSignal, ChannelType: Memory, ChannelIDs: []int{0}},
			{Type: OpWait, ChannelType: Memory, ChannelIDs: []int{0}},
			{Type: OpNop},
			{Type: OpReduce,
				Src:      []Operand{{Kind: LocalOperand, Type: Input, Index: 0, Size: 1}, {Kind: LocalOperand, Type: Scratch, Index: 0, Size: 1}},
				Dst:      []Operand{{Kind: LocalOperand, Type: Output, Index: 0, Size: 1}},
				ReduceOp: "sum"},
			{Type: OpBarrier, BarrierID: 0, NumThreadBlocks: 2},
		},
		Channels:       map[ChannelType][]int{Memory: {0}},
		RemoteRefs:     map[ChannelType][]int{Memory: {0}},
		ChannelOrder:   []ChannelType{Memory},
		RemoteRefOrder: []ChannelType{Memory},
	}
	if diff := cmp.Diff(want, p.GPUs[1].ThreadBlocks[0]); diff != "" {
		t.Errorf("gpus[1].threadblocks[0] (-want +got):\n%s", diff)
	}
	wantGPU := GPU{ID: 1, InputChunks: 2, OutputChunks: 2, ScratchChunks: 2,
		Channels:      []ChannelDecl{{Type: Memory, ConnectedTo: []int{0}}},
		RemoteBuffers: []RemoteBuffer{{Rank: 0, Type: Scratch, Access: []ChannelType{Memory}}},
		Semaphores:    []int64{0},
	}
	got := p.GPUs[1]
	got.ThreadBlocks = nil
	if diff := cmp.Diff(wantGPU, got); diff != "" {
		t.Errorf("gpus[1] (-want +got):\n%s", diff)
	}
	if p.MaxMessageSize != math.MaxUint64 || p.BufferAlignment != 16 || p.NumThreadsPerBlock != 1024 || !p.Inplace {
		t.Errorf("top level: %+v", p)
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	data := mutatedPlan(t, func(m map[string]any) {
		for _, k := range []string{"reuse_resources", "num_threads_per_block", "use_double_scratch_buffer", "buffer_alignment", "min_message_size", "max_message_size"} {
			delete(m, k)
		}
		m["future_key"] = []any{"ignored"}
		delete(planGPU(m, 0), "semaphores")
		planOp(m, 0, 1, 0)["name"] = "nop"
		delete(planOp(m, 0, 1, 0), "semaphore_ids")
		delete(treeObj(m, "gpus", 0, "threadblocks", 1), "remote_buffer_refs")
		treeObj(m, "gpus", 1, "threadblocks", 1)["ops"] = []any{map[string]any{"name": "barrier", "barrier_id": jnum(0), "num_threadblocks": jnum(2)}}
	})
	p, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{Name: "base", Collective: "allreduce", Protocol: "Simple", Inplace: true,
		NumThreadsPerBlock: 1024, BufferAlignment: 16, MaxMessageSize: math.MaxUint64}
	got := *p
	got.GPUs = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s := p.GPUs[0].Semaphores; s == nil || len(s) != 0 {
		t.Errorf("absent semaphores = %#v, want empty", s)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	type mut = func(m map[string]any)
	setOp := func(r, tb, k int, key string, v any) mut {
		return func(m map[string]any) { planOp(m, r, tb, k)[key] = v }
	}
	replaceOp := func(r, tb, k int, text string) mut {
		return func(m map[string]any) {
			treeAt(m, "gpus", r, "threadblocks", tb, "ops").([]any)[k] = decodeTree(t, text)
		}
	}
	nops := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"name": "nop"}
		}
		return out
	}
	tests := []struct {
		name   string
		raw    string // used instead of the base plan when set
		mutate mut
		class  error
		msg    string // substring of Error()
	}{
		{name: "syntax", raw: "{\n  \"name\": ,", class: ErrSyntax, msg: "line 2, column 11"},
		{name: "truncated", raw: `{"name": "x"`, class: ErrSyntax, msg: "unexpected end of input"},
		{name: "empty", raw: ``, class: ErrSyntax, msg: "empty input"},
		{name: "trailing data", raw: basePlan + " {}", class: ErrSyntax, msg: "data after the plan"},
		{name: "not an object", raw: `[1]`, class: ErrType, msg: "got an array, want an object"},
		{name: "missing name", mutate: func(m map[string]any) { delete(m, "name") }, class: ErrMissing, msg: `missing required key "name"`},
		{name: "missing gpus", mutate: func(m map[string]any) { delete(m, "gpus") }, class: ErrMissing, msg: `missing required key "gpus"`},
		{name: "inplace not bool", mutate: func(m map[string]any) { m["inplace"] = "yes" }, class: ErrType, msg: `inplace: got "yes", want true or false`},
		{name: "protocol", mutate: func(m map[string]any) { m["protocol"] = "ll" }, class: ErrValue, msg: `protocol = "ll": want "Simple" or "LL"`},
		{name: "threads", mutate: func(m map[string]any) { m["num_threads_per_block"] = jnum(2048) }, class: ErrLimit, msg: "num_threads_per_block = 2048: a thread block has at most 1024 threads"},
		{name: "too many ranks", mutate: func(m map[string]any) { m["gpus"] = make([]any, MaxRanks+1) }, class: ErrLimit, msg: "gpus: 65537 ranks: a plan has at most 65536"},
		{name: "too many thread blocks", mutate: func(m map[string]any) { planGPU(m, 0)["threadblocks"] = make([]any, MaxThreadBlocks+1) }, class: ErrLimit, msg: "gpus[0].threadblocks: 8193 thread blocks: a rank has at most 8192 (more cannot all be resident on a GPU)"},
		{name: "alignment zero", mutate: func(m map[string]any) { m["buffer_alignment"] = jnum(0) }, class: ErrOutOfRange, msg: "buffer_alignment = 0"},
		{name: "max beyond 64 bits", mutate: func(m map[string]any) { m["max_message_size"] = json.Number("18446744073709551616") }, class: ErrOutOfRange, msg: "max_message_size: 18446744073709551616 does not fit in 64 bits"},
		{name: "size as float", mutate: func(m map[string]any) { m["max_message_size"] = json.Number("1.8446744073709552e19") }, class: ErrType, msg: "want a non-negative integer"},
		{name: "min above max", mutate: func(m map[string]any) { m["min_message_size"] = jnum(10); m["max_message_size"] = jnum(5) }, class: ErrOutOfRange, msg: "min_message_size 10 > max_message_size 5"},
		{name: "no gpus", mutate: func(m map[string]any) { m["gpus"] = []any{} }, class: ErrStructure, msg: "gpus: empty"},
		{name: "gpu id", mutate: func(m map[string]any) { planGPU(m, 1)["id"] = jnum(0) }, class: ErrStructure, msg: "gpus[1]: id = 0: gpus must be listed in rank order"},
		{name: "negative chunks", mutate: func(m map[string]any) { planGPU(m, 0)["input_chunks"] = json.Number("-1") }, class: ErrType, msg: "gpus[0]: input_chunks: got -1, want a non-negative integer"},
		{name: "chunks beyond 32 bits", mutate: func(m map[string]any) { planGPU(m, 0)["scratch_chunks"] = jnum(1 << 32) }, class: ErrLimit, msg: "scratch_chunks: 4294967296 exceeds 4294967295"},
		{name: "missing remote_buffers", mutate: func(m map[string]any) { delete(planGPU(m, 1), "remote_buffers") }, class: ErrMissing, msg: `gpus[1]: missing required key "remote_buffers"`},
		{name: "channel type", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "channels", 0)["channel_type"] = "nvlink" }, class: ErrValue, msg: `gpus[0].channels[0]: channel_type = "nvlink"`},
		{name: "connected_to", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "channels", 0)["connected_to"] = []any{jnum(5)} }, class: ErrOutOfRange, msg: "gpus[0].channels[0]: connected_to[0] = 5 out of range: the plan has 2 ranks"},
		{name: "remote rank", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "remote_buffers", 0)["rank"] = jnum(7) }, class: ErrOutOfRange, msg: "gpus[0].remote_buffers[0]: rank = 7 out of range"},
		{name: "remote buffer type", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "remote_buffers", 0)["type"] = "x" }, class: ErrValue, msg: `type = "x": want "i", "o" or "s"`},
		{name: "access type", mutate: func(m map[string]any) {
			treeObj(m, "gpus", 0, "remote_buffers", 0)["access_channel_types"] = []any{"switch"}
		}, class: ErrValue, msg: `access_channel_types[0] = "switch": want "memory" or "port"`},
		{name: "semaphore value", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "semaphores", 0)["init_value"] = "x" }, class: ErrType, msg: "init_value: got \"x\", want an integer"},
		{name: "semaphore beyond int32", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "semaphores", 0)["init_value"] = jnum(1 << 40) }, class: ErrLimit, msg: "a device semaphore holds a 32-bit int"},
		{name: "tb ids", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "threadblocks", 1)["id"] = jnum(2) }, class: ErrStructure, msg: "gpus[0].threadblocks[1]: id = 2: thread block ids must be 0..n-1"},
		{name: "tb channel beyond rank", mutate: func(m map[string]any) {
			treeObj(m, "gpus", 0, "threadblocks", 0, "channels", 0)["channel_ids"] = []any{jnum(3)}
		}, class: ErrOutOfRange, msg: "gpus[0].threadblocks[0].channels[0]: channel_ids[0] = 3 out of range: the rank has 1 memory channels"},
		{name: "tb remote ref", mutate: func(m map[string]any) {
			treeObj(m, "gpus", 0, "threadblocks", 0, "remote_buffer_refs", 0)["remote_buffer_ids"] = []any{jnum(4)}
		}, class: ErrOutOfRange, msg: "remote_buffer_ids[0] = 4 out of range: the rank has 1 remote buffers"},
		{name: "tb remote ref access", mutate: func(m map[string]any) {
			treeObj(m, "gpus", 0, "threadblocks", 0, "remote_buffer_refs", 0)["access_channel_type"] = "port"
		}, class: ErrOutOfRange, msg: "remote buffer 0 is not accessible through port channels"},
		{name: "unknown op", mutate: setOp(0, 0, 1, "name", "bogus"), class: ErrUnknownOp, msg: `gpus[0].threadblocks[0].ops[1]: name = "bogus": invalid operation type`},
		{name: "glre", mutate: setOp(0, 0, 1, "name", "glre"), class: ErrUnknownOp, msg: `name = "glre": invalid operation type (glre is DSL-internal`},
		{name: "start", mutate: setOp(0, 0, 1, "name", "start"), class: ErrUnknownOp, msg: `name = "start": invalid operation type`},
		{name: "op name type", mutate: setOp(0, 0, 1, "name", jnum(3)), class: ErrType, msg: "name: got 3, want a string"},
		{name: "channel id", mutate: setOp(1, 0, 2, "channel_ids", []any{jnum(5)}), class: ErrOutOfRange,
			msg: "gpus[1].threadblocks[0].ops[2]: channel_ids[0] = 5 out of range: the thread block has 1 memory channels"},
		{name: "signal without channel_type", mutate: func(m map[string]any) { delete(planOp(m, 0, 0, 2), "channel_type") }, class: ErrMissing, msg: `missing required key "channel_type" (signal works on memory or port channels)`},
		{name: "signal without ids", mutate: func(m map[string]any) { delete(planOp(m, 0, 0, 2), "channel_ids") }, class: ErrMissing, msg: `missing required key "channel_ids"`},
		{name: "signal empty ids", mutate: setOp(0, 0, 2, "channel_ids", []any{}), class: ErrOperand, msg: "channel_ids: empty"},
		{name: "signal on switch", mutate: setOp(0, 0, 2, "channel_type", "switch"), class: ErrOperand, msg: `channel_type = "switch": signal works on memory or port channels`},
		{name: "flush on memory", mutate: setOp(0, 0, 2, "name", "flush"), class: ErrOperand, msg: `channel_type = "memory": flush works on port channels`},
		{name: "too many channel ids", mutate: setOp(0, 0, 2, "channel_ids", []any{jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0)}), class: ErrLimit, msg: "channel_ids: 9 ids: an op holds at most 8"},
		{name: "ids without channel type", mutate: setOp(0, 0, 5, "channel_ids", []any{jnum(0)}), class: ErrOperand, msg: "channel_ids given without a memory, port or switch channel_type"},
		{name: "remote buffer id", mutate: func(m map[string]any) { treeObj(planOp(m, 0, 0, 0)["dst_buff"], 0)["buffer_id"] = jnum(3) }, class: ErrOutOfRange,
			msg: "gpus[0].threadblocks[0].ops[0]: dst_buff[0]: buffer_id = 3 out of range: the thread block has 1 remote buffers accessed through memory channels"},
		{name: "remote without channel type", mutate: func(m map[string]any) { delete(planOp(m, 0, 0, 0), "channel_type") }, class: ErrOperand,
			msg: `dst_buff[0] is remote: put reaches remote buffers through memory or port channels, but channel_type is "none"`},
		{name: "put to local", mutate: func(m map[string]any) {
			planOp(m, 0, 0, 0)["dst_buff"] = []any{map[string]any{"type": "o", "index": jnum(0), "size": jnum(1)}}
		}, class: ErrOperand,
			msg: "dst_buff[0]: put takes a remote operand (buffer_id) here, got a local operand"},
		{name: "reduce remote src", mutate: func(m map[string]any) {
			treeObj(planOp(m, 0, 0, 5)["src_buff"], 1)["buffer_id"] = jnum(0)
			delete(treeObj(planOp(m, 0, 0, 5)["src_buff"], 1), "type")
		}, class: ErrOperand, msg: "src_buff[1]: re takes a local operand (type) here, got a remote operand"},
		{name: "operand kind missing", mutate: func(m map[string]any) { delete(treeObj(planOp(m, 0, 0, 0)["src_buff"], 0), "type") }, class: ErrOperand,
			msg: "gpus[0].threadblocks[0].ops[0].src_buff[0]: operand has none of type, buffer_id and switch_channel_id"},
		{name: "operand kind twice", mutate: func(m map[string]any) { treeObj(planOp(m, 0, 0, 0)["src_buff"], 0)["buffer_id"] = jnum(0) }, class: ErrOperand, msg: "more than one of type, buffer_id and switch_channel_id"},
		{name: "operand index missing", mutate: func(m map[string]any) { delete(treeObj(planOp(m, 0, 0, 0)["src_buff"], 0), "index") }, class: ErrMissing, msg: `src_buff[0]: missing required key "index"`},
		{name: "operand type", mutate: func(m map[string]any) { treeObj(planOp(m, 0, 0, 0)["src_buff"], 0)["type"] = "q" }, class: ErrValue, msg: `type = "q"`},
		{name: "operand beyond buffer", mutate: func(m map[string]any) { treeObj(planOp(m, 0, 0, 0)["src_buff"], 0)["index"] = jnum(2) }, class: ErrOutOfRange,
			msg: "src_buff[0]: chunks [2, 3) beyond rank 0's input buffer (input_chunks = 2)"},
		{name: "remote operand beyond owner's buffer", mutate: func(m map[string]any) { treeObj(planOp(m, 0, 0, 0)["dst_buff"], 0)["size"] = jnum(3) }, class: ErrOutOfRange,
			msg: "dst_buff[0]: chunks [0, 3) beyond rank 1's scratch buffer (scratch_chunks = 2)"},
		{name: "operand sizes differ", mutate: func(m map[string]any) {
			treeObj(planOp(m, 0, 0, 0)["dst_buff"], 0)["size"] = jnum(2)
			treeObj(planOp(m, 0, 0, 0)["dst_buff"], 0)["index"] = jnum(0)
		}, class: ErrOperand, msg: "dst_buff[0] has size 2 but src_buff[0] has size 1"},
		{name: "semaphore id", mutate: setOp(0, 1, 0, "semaphore_ids", []any{jnum(3)}), class: ErrOutOfRange, msg: "gpus[0].threadblocks[1].ops[0]: semaphore_ids[0] = 3 out of range: the rank has 1 semaphores"},
		{name: "semaphore ids limit", mutate: setOp(0, 1, 0, "semaphore_ids", []any{jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0), jnum(0)}), class: ErrLimit, msg: "semaphore_ids: 17 ids: an op holds at most 16"},
		{name: "semaphore ids missing", mutate: func(m map[string]any) { delete(planOp(m, 0, 1, 0), "semaphore_ids") }, class: ErrMissing, msg: `missing required key "semaphore_ids"`},
		{name: "barrier id", mutate: func(m map[string]any) {
			planOp(m, 0, 0, 6)["barrier_id"] = jnum(16)
			planOp(m, 0, 1, 1)["barrier_id"] = jnum(16)
		}, class: ErrLimit, msg: "barrier_id = 16: the executor has barriers 0..15"},
		{name: "barrier count", mutate: func(m map[string]any) {
			planOp(m, 0, 0, 6)["num_threadblocks"] = jnum(3)
			planOp(m, 0, 1, 1)["num_threadblocks"] = jnum(3)
		}, class: ErrOutOfRange, msg: "num_threadblocks = 3 out of range: the rank has 2 thread blocks"},
		{name: "barrier disagree", mutate: setOp(0, 1, 1, "num_threadblocks", jnum(1)), class: ErrStructure, msg: "gpus[0]: barrier_id 0: thread blocks disagree on num_threadblocks ([1 2])"},
		{name: "barrier alone", mutate: func(m map[string]any) { planOp(m, 0, 1, 1)["barrier_id"] = jnum(1) }, class: ErrStructure, msg: "gpus[0]: barrier_id 0: num_threadblocks = 2 but 1 thread block(s) [0] use it"},
		{name: "barrier id missing", mutate: func(m map[string]any) { delete(planOp(m, 0, 1, 1), "barrier_id") }, class: ErrMissing, msg: `missing required key "barrier_id"`},
		{name: "pipeline nested", mutate: replaceOp(0, 1, 0, `{"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 1}, "ops": [
			{"name": "pipeline", "iter_context": {"unit_size": 1024, "num_chunks": 1}, "ops": []}]}`), class: ErrStructure,
			msg: "gpus[0].threadblocks[1].ops[0].ops[0]: pipeline inside a pipeline"},
		{name: "pipeline unit", mutate: replaceOp(0, 1, 0, `{"name": "pipeline", "iter_context": {"unit_size": 0, "num_chunks": 1}, "ops": []}`), class: ErrOutOfRange,
			msg: "gpus[0].threadblocks[1].ops[0].iter_context: unit_size = 0"},
		{name: "pipeline context", mutate: replaceOp(0, 1, 0, `{"name": "pipeline", "ops": []}`), class: ErrMissing, msg: `missing required key "iter_context"`},
		{name: "pipeline body", mutate: replaceOp(0, 1, 0, `{"name": "pipeline", "iter_context": {"unit_size": 1, "num_chunks": 1}}`), class: ErrMissing, msg: `missing required key "ops"`},
		{name: "pipeline body op", mutate: replaceOp(0, 1, 0, `{"name": "pipeline", "iter_context": {"unit_size": 1, "num_chunks": 1}, "ops": [{"name": "sem_release", "semaphore_ids": [9]}]}`),
			class: ErrOutOfRange, msg: "gpus[0].threadblocks[1].ops[0].ops[0]: semaphore_ids[0] = 9 out of range"},
		{name: "too many ops", mutate: func(m map[string]any) { treeObj(m, "gpus", 1, "threadblocks", 1)["ops"] = nops(65) }, class: ErrLimit,
			msg: "gpus[1].threadblocks[1]: ops: 65 ops, counting pipeline bodies: a thread block holds at most 64"},
		{name: "too many ops with pipeline", mutate: func(m map[string]any) {
			treeObj(m, "gpus", 1, "threadblocks", 1)["ops"] = append(nops(1), map[string]any{"name": "pipeline", "iter_context": map[string]any{"unit_size": jnum(1), "num_chunks": jnum(1)}, "ops": nops(63)})
		}, class: ErrLimit, msg: "65 ops, counting pipeline bodies"},
		{name: "channels per tb", mutate: func(m map[string]any) {
			peers := make([]any, 17)
			ids := make([]any, 17)
			for i := range peers {
				peers[i], ids[i] = jnum(1), jnum(uint64(i))
			}
			treeObj(m, "gpus", 0, "channels", 0)["connected_to"] = peers
			treeObj(m, "gpus", 0, "threadblocks", 0, "channels", 0)["channel_ids"] = ids
		}, class: ErrLimit, msg: "gpus[0].threadblocks[0]: channels: 17 memory channels: a thread block holds at most 16"},
		{name: "operands per side", mutate: func(m map[string]any) {
			srcs := make([]any, 11)
			for i := range srcs {
				srcs[i] = map[string]any{"type": "i", "index": jnum(0), "size": jnum(1)}
			}
			planOp(m, 0, 0, 5)["src_buff"] = srcs
		}, class: ErrLimit, msg: "src_buff: 11 operands: an op holds at most 10 per side"},
		{name: "pairing", mutate: func(m map[string]any) { treeObj(m, "gpus", 1, "channels", 0)["connected_to"] = []any{jnum(1)} }, class: ErrPairing,
			msg: "gpus[0]: memory channel 0 (to rank 1) is unpaired: rank 0 declares 1 memory channel(s) to rank 1, rank 1 declares 0 back; gpus[0].threadblocks[0].ops[2] signals or waits on it"},
		{name: "switch groups", mutate: func(m map[string]any) {
			planGPU(m, 0)["channels"] = append(planGPU(m, 0)["channels"].([]any), decodeTree(t, `{"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 2, "ranks": [0, 1]}]}`))
		}, class: ErrPairing, msg: "gpus[0]: switch channels shared with rank 1 do not match rank 1's: rank 0 declares groups [[0 1]], rank 1 declares []"},
		{name: "switch group without self", mutate: func(m map[string]any) {
			planGPU(m, 0)["channels"] = append(planGPU(m, 0)["channels"].([]any), decodeTree(t, `{"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 1, "ranks": [1]}]}`))
		}, class: ErrStructure, msg: "gpus[0].channels[1].rank_groups[0]: ranks [1] do not include rank 0"},
		{name: "switch group size", mutate: func(m map[string]any) {
			planGPU(m, 0)["channels"] = append(planGPU(m, 0)["channels"].([]any), decodeTree(t, `{"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 3, "ranks": [0]}]}`))
		}, class: ErrStructure, msg: "size = 3 but ranks lists 1 ranks"},
		{name: "packets to remote output", mutate: func(m map[string]any) {
			planOp(m, 0, 0, 0)["name"] = "ppkt"
			treeObj(m, "gpus", 0, "remote_buffers", 0)["type"] = "o"
		}, class: ErrOperand, msg: `dst_buff[0]: remote buffer 0 is rank 1's "o" buffer: ppkt writes LL packets to remote scratch only`},
		{name: "upkt from input", mutate: replaceOp(0, 0, 5, `{"name": "upkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`),
			class: ErrOperand, msg: `src_buff[0]: type "i": upkt reads LL packets from local scratch here, want type "s"`},
		{name: "packets beyond simple scratch", mutate: replaceOp(0, 0, 5, `{"name": "cpkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "s", "index": 1, "size": 1}]}`),
			class: ErrOutOfRange, msg: "dst_buff[0]: chunks [1, 2) (LL packets take twice the space: 4 chunks) beyond rank 0's scratch buffer (scratch_chunks = 2)"},
		{name: "copy two sources", mutate: replaceOp(0, 0, 5, `{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}, {"type": "i", "index": 1, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`),
			class: ErrOperand, msg: "src_buff: 2 operands: copy takes 1"},
		{name: "copy no source", mutate: replaceOp(0, 0, 5, `{"name": "copy", "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`), class: ErrMissing, msg: `missing required key "src_buff"`},
		{name: "put pairwise", mutate: func(m map[string]any) {
			o := planOp(m, 0, 0, 0)
			o["src_buff"] = append(o["src_buff"].([]any), map[string]any{"type": "i", "index": jnum(1), "size": jnum(1)})
		}, class: ErrOperand, msg: "2 src_buff and 1 dst_buff operands: put takes one source per destination"},
		{name: "port put ids", mutate: func(m map[string]any) {
			for r := 0; r < 2; r++ {
				treeObj(m, "gpus", r, "channels", 0)["channel_type"] = "port"
				treeObj(m, "gpus", r, "threadblocks", 0, "channels", 0)["channel_type"] = "port"
				treeObj(m, "gpus", r, "threadblocks", 0, "remote_buffer_refs", 0)["access_channel_type"] = "port"
				treeObj(m, "gpus", r, "remote_buffers", 0)["access_channel_types"] = []any{"port"}
				for _, k := range []int{0, 2, 3} {
					planOp(m, r, 0, k)["channel_type"] = "port"
				}
			}
		}, class: ErrOperand, msg: "gpus[0].threadblocks[0].ops[0]: channel_ids: 0 ids for 1 destinations: put over port channels takes one channel per destination"},
		{name: "tbg id", mutate: setOp(0, 0, 5, "tbg_info", map[string]any{"tb_id": jnum(2), "tbg_size": jnum(2)}), class: ErrOutOfRange, msg: "ops[5].tbg_info: tb_id = 2 out of range: the group has 2 thread blocks"},
		{name: "tbg size", mutate: setOp(0, 0, 5, "tbg_info", map[string]any{"tb_id": jnum(0), "tbg_size": jnum(0)}), class: ErrOutOfRange, msg: "tbg_size = 0"},
		{name: "tbg missing key", mutate: setOp(0, 0, 5, "tbg_info", map[string]any{"tb_id": jnum(0)}), class: ErrMissing, msg: `tbg_info: missing required key "tbg_size"`},
		{name: "gstore channel type", mutate: replaceOp(0, 0, 5, `{"name": "gstore", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"switch_channel_id": 0, "index": 0, "size": 1}], "channel_type": "memory"}`),
			class: ErrOperand, msg: `channel_type = "memory": gstore works on switch channels`},
		{name: "switch id", mutate: replaceOp(0, 0, 5, `{"name": "gstore", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"switch_channel_id": 0, "index": 0, "size": 1}], "channel_type": "switch"}`),
			class: ErrOutOfRange, msg: "dst_buff[0]: switch_channel_id = 0 out of range: the thread block has 0 switch channels"},
		{name: "glres local", mutate: replaceOp(0, 0, 5, `{"name": "glres", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"switch_channel_id": 0, "index": 0, "size": 1}], "channel_type": "switch"}`),
			class: ErrOperand, msg: "src_buff[0]: glres takes a switch operand (switch_channel_id) here, got a local operand"},
		{name: "signal with operands", mutate: setOp(0, 0, 2, "src_buff", []any{map[string]any{"type": "i", "index": jnum(0), "size": jnum(1)}}), class: ErrOperand, msg: "src_buff: signal takes no operands"},
		{name: "get on port", mutate: replaceOp(0, 0, 0, `{"name": "get", "src_buff": [{"buffer_id": 0, "index": 0, "size": 1}], "dst_buff": [{"type": "i", "index": 0, "size": 1}], "channel_type": "port"}`),
			class: ErrOperand, msg: `src_buff[0] is remote: get reaches remote buffers through memory channels, but channel_type is "port"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := []byte(tt.raw)
			if tt.raw == "" && tt.name != "empty" {
				data = mutatedPlan(t, tt.mutate)
			}
			errs := Check(data)
			var found bool
			for _, err := range errs {
				var pe *PlanError
				if !errors.As(err, &pe) {
					t.Errorf("Check returned %T %v, want a *PlanError", err, err)
				}
				if errors.Is(err, tt.class) && strings.Contains(err.Error(), tt.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("Check found no %v containing %q; got:\n%s", tt.class, tt.msg, joinErrs(errs))
			}
			if _, err := Load(data); err == nil {
				t.Errorf("Load succeeded")
			} else if IsWarning(err) {
				t.Errorf("Load failed with a warning: %v", err)
			}
		})
	}
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		class  error
		msg    string
	}{
		{name: "unpaired unused", mutate: func(m map[string]any) { treeObj(m, "gpus", 0, "channels", 0)["connected_to"] = []any{jnum(1), jnum(1)} }, class: ErrUnpairedUnused,
			msg: "gpus[0]: memory channel 1 (to rank 1) is unpaired: rank 0 declares 2 memory channel(s) to rank 1, rank 1 declares 1 back; no op signals or waits on it"},
		{name: "double scratch remote put", mutate: func(m map[string]any) { m["use_double_scratch_buffer"] = true }, class: ErrQuirk,
			msg: "gpus[0].threadblocks[0].ops[0]: dst_buff[0]: put accesses rank 1's scratch without packets in a double-scratch plan"},
		{name: "get offsets", mutate: func(m map[string]any) {
			treeAt(m, "gpus", 0, "threadblocks", 0, "ops").([]any)[0] = decodeTree(t, `{"name": "get", "src_buff": [{"buffer_id": 0, "index": 1, "size": 1}], "dst_buff": [{"type": "i", "index": 0, "size": 1}], "channel_type": "memory"}`)
		}, class: ErrQuirk, msg: "src_buff[0].index 1 != dst_buff[0].index 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := mutatedPlan(t, tt.mutate)
			errs := Check(data)
			found := false
			for _, e := range errs {
				if !IsWarning(e) || !errors.Is(e, tt.class) {
					t.Errorf("unexpected problem: %v", e)
				}
				found = found || strings.Contains(e.Error(), tt.msg)
			}
			if !found {
				t.Errorf("Check found no %v warning containing %q; got:\n%s", tt.class, tt.msg, joinErrs(errs))
			}
			if _, err := Load(data); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

// TestCheckCollectsAll checks that Check goes on after each problem.
func TestCheckCollectsAll(t *testing.T) {
	t.Parallel()
	data := mutatedPlan(t, func(m map[string]any) {
		m["protocol"] = "Fast"
		planOp(m, 0, 0, 1)["name"] = "glre"
		planOp(m, 1, 0, 2)["channel_ids"] = []any{jnum(5)}
		treeObj(m, "gpus", 1, "semaphores", 0)["init_value"] = true
	})
	var got []string
	for _, err := range Check(data) {
		got = append(got, err.Error())
	}
	want := []string{
		`protocol = "Fast": want "Simple" or "LL" (MSCCL++ treats any other value as Simple)`,
		`gpus[1].semaphores[0]: init_value: got true, want an integer`,
		`gpus[0].threadblocks[0].ops[1]: name = "glre": invalid operation type (glre is DSL-internal: MSCCL++ loads only its fusion with gstore, glres)`,
		`gpus[1].threadblocks[0].ops[2]: channel_ids[0] = 5 out of range: the thread block has 1 memory channels`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	_, err := Load(data)
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Path != "" || !errors.Is(err, ErrValue) {
		t.Errorf("Load error = %#v, want the first problem", err)
	}
}

// TestLoadChecked: one walk gives Load's plan and Check's problems.
func TestLoadChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		data   []byte
		noPlan bool
	}{
		{"clean", []byte(basePlan), false},
		{"a warning", mutatedPlan(t, func(m map[string]any) { m["use_double_scratch_buffer"] = true }), false},
		{"an error", mutatedPlan(t, func(m map[string]any) { planOp(m, 1, 0, 2)["channel_ids"] = []any{jnum(5)} }), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, errs := LoadChecked(tt.data)
			var got, want []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			for _, e := range Check(tt.data) {
				want = append(want, e.Error())
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problems (-Check +LoadChecked):\n%s", diff)
			}
			if (len(errs) == 0) != (tt.name == "clean") {
				t.Errorf("%d problems: %v", len(errs), errs)
			}
			if (p == nil) != tt.noPlan {
				t.Errorf("plan = %v, want nil: %v", p != nil, tt.noPlan)
			}
			if lp, err := Load(tt.data); err == nil && !cmp.Equal(lp, p) {
				t.Error("the plan differs from Load's")
			}
		})
	}
}

// TestPlanErrorFormat checks the error form and unwrapping.
func TestPlanErrorFormat(t *testing.T) {
	t.Parallel()
	e := &PlanError{Path: "gpus[1].threadblocks[3].ops[7]", Err: ErrOutOfRange, Msg: "channel_ids[0] = 5 out of range: the thread block has 2 memory channels"}
	if got, want := e.Error(), "gpus[1].threadblocks[3].ops[7]: channel_ids[0] = 5 out of range: the thread block has 2 memory channels"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", e), ErrOutOfRange) {
		t.Error("errors.Is through PlanError failed")
	}
	if (&PlanError{Err: ErrSyntax, Msg: "m"}).Error() != "m" {
		t.Error("top-level error has a path prefix")
	}
	if !bytes.Contains([]byte(basePlan), []byte("18446744073709551615")) {
		t.Error("base plan lost its max_message_size")
	}
}
