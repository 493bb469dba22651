//go:build cgo

package emu

// alltoallv_test.go checks the GPU backend's variable-size plans on the
// emulated device: a session keeps its device tables and launch
// arguments across calls with different counts (only the per-call table
// and the caller's buffers are written), pipelines take their iteration
// counts from each call's sizes, and calls the session cannot serve are
// named errors.

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// stagedVar stages every block through a scratch inbox in a pipeline of
// 32-byte units, so that the iteration count follows each call's counts.
const stagedVar = `
n = 2
CollectiveProgram("staged", AllToAllV(n, 1), n)
inbox = [Buffer(r, n) for r in range(n)]
for r in range(n):
    p = 1 - r
    ch = MemoryChannel(p, r)
    ch.signal(tb = 0, data_sync = SyncType.none)
    ch.wait(tb = 0, data_sync = SyncType.after)
    for _ in Loop.iteration(unit = 32, num_chunks = 1):
        ch.put(inbox[p][r:r + 1], Rank(r).get_input_buffer()[p:p + 1], tb = 0)
    ch.signal(tb = 0, data_sync = SyncType.before)
    ch.wait(tb = 0, data_sync = SyncType.after)
    Rank(r).copy(Rank(r).get_output_buffer()[p:p + 1], inbox[r][p:p + 1], tb = 0)
    Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[r:r + 1], tb = 0)
`

// varPlan evaluates a bundled algorithm (src empty) or src.
func varPlan(t *testing.T, name, src string, defines map[string]string) *plan.Plan {
	t.Helper()
	source := starlib.FSSource(algorithms.FS, "algorithms")
	if src != "" {
		source = starlib.FSSource(fstest.MapFS{name + ".star": {Data: []byte(src)}}, "")
	}
	res, err := starlib.Eval(source, name+".star", starlib.Options{Defines: defines})
	if err != nil {
		t.Fatal(err)
	}
	text, err := res.Programs[0].Plan()
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Load(text)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is a driver that records where the host writes device memory.
type recorder struct {
	gpu.Driver
	mu     sync.Mutex
	writes []write
}

type write struct {
	at   gpu.DevPtr
	data []byte
}

func (r *recorder) HtoD(dst gpu.DevPtr, src []byte) error {
	r.mu.Lock()
	r.writes = append(r.writes, write{dst, append([]byte(nil), src...)})
	r.mu.Unlock()
	return r.Driver.HtoD(dst, src)
}

// Enqueue records the host memory's bytes as the copy will read them (a
// session stages them just before).
func (r *recorder) Enqueue(dst gpu.DevPtr, h gpu.HostMem, off, n uint64) error {
	data := make([]byte, n)
	for i := uint64(0); i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], h.Load(off+i))
	}
	r.mu.Lock()
	r.writes = append(r.writes, write{dst, data})
	r.mu.Unlock()
	return r.Driver.Enqueue(dst, h, off, n)
}

// take returns the writes since the last take.
func (r *recorder) take() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

// TestAllToAllVSameTables runs one session over calls with different
// counts and checks that no launch rewrites what Open wrote (op records,
// regions, ids, operand terms, channel state), that every launch writes
// the same addresses, and that the launch arguments differ only in the
// LL flag: what a captured CUDA graph holds stays valid. The results are
// checked byte for byte, so each call's regions and pipeline iterations
// did come from its table.
func TestAllToAllVSameTables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		defines   map[string]string
	}{
		{"alltoallv_port", "", map[string]string{"world_size": "4", "ranks_per_node": "2"}},
		{"staged", stagedVar, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan := varPlan(t, tc.name, tc.src, tc.defines)
			n := len(plan.GPUs)
			vp, err := executor.NewVarPlan(plan)
			if err != nil {
				t.Fatal(err)
			}
			// The largest call first: the session's scratch fits every
			// later one. Every call has buffers of the same size, as a
			// caller replaying a graph has.
			var calls []*executor.Counts
			for _, m := range [][][]int64{executor.UniformMatrix(n, 1000), executor.RandomMatrix(n, 2, 300, 0),
				executor.UniformMatrix(n, 0), executor.RandomMatrix(n, 9, 999, 1)} {
				c := executor.MatrixCounts(m)
				c.SendSize, c.RecvSize = make([]int64, n), make([]int64, n)
				for r := range n {
					c.SendSize[r], c.RecvSize[r] = int64(n)*1000, int64(n)*1000
				}
				calls = append(calls, c)
			}
			inst, err := vp.Bind(calls[0], 4)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			cfg := gpu.Config{Name: "gpu-emu", Threads: 2, Open: func() (gpu.Driver, error) {
				d, err := Open()
				rec.Driver = d
				return rec, err
			}}
			sess, err := gpu.New(cfg).Open(inst, executor.Options{DType: executor.Float32})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			static := map[gpu.DevPtr]bool{}
			for _, w := range rec.take() {
				static[w.at] = true
			}
			var firstAddrs []gpu.DevPtr
			var firstArgs []byte
			for i, c := range calls {
				if _, err := vp.Bind(c, 4); err != nil {
					t.Fatal(err)
				}
				bufs := harness.VarBuffers(c, 4)
				harness.FillVar(bufs, i)
				if err := sess.Launch(context.Background(), bufs); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if _, err := harness.CheckVar(bufs, c, 4, i); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				var addrs []gpu.DevPtr
				var args []byte
				for _, w := range rec.take() {
					if static[w.at] {
						t.Errorf("call %d rewrites %d bytes at %#x, which Open wrote", i, len(w.data), w.at)
					}
					addrs = append(addrs, w.at)
					if len(w.data) == 128 { // mg_args
						args = w.data
						binary.LittleEndian.PutUint32(args[72:], 0) // the LL flag of this launch
					}
				}
				if args == nil {
					t.Fatalf("call %d: no launch arguments written", i)
				}
				// Call 0 also writes the rank table (the buffers are placed
				// then); the later calls write the same addresses as call 1.
				switch i {
				case 0:
					firstArgs = args
					continue
				case 1:
					firstAddrs = addrs
				default:
					if d := cmp.Diff(firstAddrs, addrs); d != "" {
						t.Errorf("call %d writes other addresses than call 1 (-1 +%d):\n%s", i, i, d)
					}
				}
				if d := cmp.Diff(firstArgs, args); d != "" {
					t.Errorf("call %d: launch arguments differ from call 0 beyond the LL flag:\n%s", i, d)
				}
			}
		})
	}
}

// TestAllToAllVRefusals: calls a session cannot serve are errors before
// the launch, named.
func TestAllToAllVRefusals(t *testing.T) {
	t.Parallel()
	plan := varPlan(t, "staged", stagedVar, nil)
	vp, err := executor.NewVarPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	small := executor.MatrixCounts(executor.UniformMatrix(2, 8))
	inst, err := vp.Bind(small, 4)
	if err != nil {
		t.Fatal(err)
	}
	f32 := executor.Options{DType: executor.Float32}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"instance without a VarPlan", func() error {
			_, err := gpu.New(emuConfig).Open(&executor.Instance{Plan: plan, Ranks: inst.Ranks}, f32)
			return err
		}, "comes from no executor.VarPlan"},
		{"element size", func() error {
			_, err := gpu.New(emuConfig).Open(inst, executor.Options{DType: executor.Float16})
			return err
		}, "bound for 4-byte elements"},
		{"buffers smaller than the counts", func() error {
			sess, err := gpu.New(emuConfig).Open(inst, f32)
			if err != nil {
				return err
			}
			defer sess.Close()
			bufs := harness.VarBuffers(small, 4)
			if err := sess.Launch(context.Background(), bufs); err != nil {
				return err
			}
			// The same blocks further into rank 1's input, the same
			// buffers: the shapes are unchanged, the counts address more.
			moved := executor.MatrixCounts(executor.UniformMatrix(2, 8))
			for p := range 2 {
				moved.SendDispls[1][p] += 100
			}
			if _, err := vp.Bind(moved, 4); err != nil {
				return err
			}
			return sess.Launch(context.Background(), bufs)
		}, "rank 1: input of 64 and output of 64 bytes, the counts address 464 and 64"},
		{"scratch grew", func() error {
			if _, err := vp.Bind(small, 4); err != nil {
				return err
			}
			sess, err := gpu.New(emuConfig).Open(inst, f32)
			if err != nil {
				return err
			}
			defer sess.Close()
			big := executor.MatrixCounts(executor.UniformMatrix(2, 4096))
			if _, err := vp.Bind(big, 4); err != nil {
				return err
			}
			return sess.Launch(context.Background(), harness.VarBuffers(big, 4))
		}, "open a new session"},
	} {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
