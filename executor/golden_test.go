package executor

// golden_test.go: the plan loader, instantiation and launch checks on the
// golden plans and fuzzed inputs, and LoadFile.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/plan"
)

func TestLoadFile(t *testing.T) {
	t.Parallel()
	p, err := LoadFile(filepath.Join("testdata", "pipeline_test.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.Op{{Type: plan.OpPipeline, UnitSize: 1 << 20, NumChunks: 1, Ops: []plan.Op{{Type: plan.OpCopy,
		Src: []plan.Operand{{Kind: plan.LocalOperand, Type: plan.Input, Index: 0, Size: 1}},
		Dst: []plan.Operand{{Kind: plan.LocalOperand, Type: plan.Output, Index: 0, Size: 1}}}}}}
	if diff := cmp.Diff(want, p.GPUs[0].ThreadBlocks[0].Ops); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := LoadFile(filepath.Join("testdata", "absent.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile(absent) = %v", err)
	}
}

// goldenDir holds the plans made by the MSCCL++ DSL.
const goldenDir = "../../shared/golden"

// TestGoldenPlans loads every golden plan: each loads, or is rejected
// only for the documented reason (glre, which MSCCL++ rejects too), and
// instantiates at three sizes of its range, or, when a rank has no input
// or output chunks, is refused with ErrSize.
func TestGoldenPlans(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no golden plans in %s", goldenDir)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			for _, e := range plan.Check(data) {
				if !plan.IsWarning(e) {
					errs = append(errs, e)
				}
			}
			if strings.HasPrefix(name, "switch_reduce_test") {
				if len(errs) == 0 {
					t.Fatal("a plan with glre loaded")
				}
				for _, e := range errs {
					if !errors.Is(e, plan.ErrUnknownOp) || !strings.Contains(e.Error(), `"glre"`) {
						t.Errorf("unexpected problem: %v", e)
					}
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("problems:\n%s", joinErrs(errs))
			}
			p, err := plan.Load(data)
			if err != nil {
				t.Fatal(err)
			}
			noChunks := false
			for _, g := range p.GPUs {
				noChunks = noChunks || g.InputChunks == 0 && g.OutputChunks == 0
			}
			for _, size := range goldenSizes(p) {
				layout, err := PlanLayout(p, size, Float16, false)
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				inst, err := Instantiate(p, layout.Sizes)
				if noChunks {
					// Zero-byte chunks: the plan only synchronises.
					if err != nil || inst.ChunkBytes != 0 {
						t.Errorf("size %d: Instantiate = %v, want zero-byte chunks", size, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("size %d (%+v): %v", size, layout.Sizes, err)
				}
				checkInstance(t, p, inst)
			}
		})
	}
}

// goldenSizes picks three message sizes in p's range that every rank's
// chunking divides: the smallest, one near 1 MiB, and the largest up to
// 16 MiB.
func goldenSizes(p *plan.Plan) []uint64 {
	unit := p.BufferAlignment * uint64(len(p.GPUs))
	l := uint64(1)
	for _, g := range p.GPUs {
		for _, c := range []int{g.InputChunks, g.OutputChunks} {
			if c > 0 {
				l = lcmU64(l, uint64(c))
			}
		}
	}
	unit *= l
	lo := max(p.MinMessageSize, unit)
	lo = (lo + unit - 1) / unit * unit
	hi := min(p.MaxMessageSize, 16<<20) / unit * unit
	mid := max(lo, min(hi, (1<<20+unit-1)/unit*unit))
	var out []uint64
	for _, s := range []uint64{lo, mid, hi} {
		if s >= p.MinMessageSize && s <= p.MaxMessageSize && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
	}
	return out
}

func lcmU64(a, b uint64) uint64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// checkInstance checks invariants of an instance against its plan.
func checkInstance(t *testing.T, p *plan.Plan, inst *Instance) {
	t.Helper()
	if len(inst.Ranks) != len(p.GPUs) {
		t.Fatalf("%d ranks, want %d", len(inst.Ranks), len(p.GPUs))
	}
	for r, ri := range inst.Ranks {
		g := &p.GPUs[r]
		if len(ri.TBs) != len(g.ThreadBlocks) {
			t.Errorf("rank %d: %d TBs, want %d", r, len(ri.TBs), len(g.ThreadBlocks))
		}
		for _, end := range concatEnds(ri.MemoryChannels, ri.PortChannels) {
			if end.PeerIndex >= 0 && (end.Peer < 0 || end.Peer >= len(p.GPUs)) {
				t.Errorf("rank %d: channel end %+v", r, end)
			}
		}
		for ti, tb := range ri.TBs {
			for k, oi := range tb.Ops {
				if oi.Index != k || oi.Path != fmt.Sprintf("op %d", k) || oi.Type != g.ThreadBlocks[ti].Ops[k].Type {
					t.Errorf("rank %d tb %d op %d: %+v", r, ti, k, oi)
				}
				if oi.Type == plan.OpPipeline && oi.Iterations < 1 {
					t.Errorf("rank %d tb %d %s: %d iterations", r, ti, oi.Path, oi.Iterations)
				}
			}
		}
	}
}

func concatEnds(a, b []ChannelEnd) []ChannelEnd { return append(append([]ChannelEnd{}, a...), b...) }

// FuzzLoad checks that no input makes Load, Check or Instantiate panic,
// and that Load fails exactly when Check reports an error.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(1<<20))
	}
	f.Add([]byte(basePlan), uint64(4096))
	f.Add([]byte(`{"gpus": [{}]}`), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, size uint64) {
		errs := plan.Check(data)
		hard := false
		for _, e := range errs {
			if !plan.IsWarning(e) {
				hard = true
			}
		}
		p, err := plan.Load(data)
		if (err != nil) != hard {
			t.Fatalf("Load error %v, but Check found %v", err, errs)
		}
		if p == nil {
			return
		}
		// A size likely to be valid, and the raw one.
		unit := p.BufferAlignment
		for _, g := range p.GPUs {
			for _, c := range []int{g.InputChunks, g.OutputChunks} {
				if c > 0 && unit < 1<<40 {
					unit = lcmU64(unit, uint64(c)*p.BufferAlignment)
				}
			}
		}
		for _, s := range []Sizes{{size, size}, {unit * (size%8 + 1), unit * (size%8 + 1)}, {size, unit}} {
			inst, err := Instantiate(p, s)
			if err == nil {
				_ = inst.ScratchSlot(0)
			} else if !errors.Is(err, plan.ErrSize) && !errors.Is(err, plan.ErrLimit) {
				t.Fatalf("Instantiate(%+v) = %v, want ErrSize or ErrLimit", s, err)
			}
		}
		// The launch checks of a run (harness's FuzzEstimateMemory adds
		// the memory estimate).
		if l, err := PlanLayout(p, unit*(size%8+1), Float16, p.Inplace); err == nil {
			if inst, err := Instantiate(p, l.Sizes); err == nil {
				if err := CheckLaunch(inst, l, size%2 == 1); err != nil && !errors.Is(err, plan.ErrSize) {
					t.Fatalf("CheckLaunch = %v, want ErrSize", err)
				}
			}
		}
	})
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}

// The base plan of plan's load tests (load_test.go), for the fuzz seed
// and the instantiation tests.

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
