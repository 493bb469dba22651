// Tests of CheckLaunch's messages and of its iteration arithmetic; that
// it agrees with the CPU backend's launches is tested in executor/cpu.
package executor

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/plan"
)

// rankPlanJSON is a one-rank test plan with the given top-level fields and
// rank-0 thread block ops (JSON text).
func rankPlanJSON(fields string, in, out, scratch int, ops string) string {
	if !strings.Contains(fields, `"protocol"`) {
		fields += ` "protocol": "Simple",`
	}
	return fmt.Sprintf(`{"name": "one", "collective": "test", "inplace": false, %s
  "gpus": [{"id": 0, "input_chunks": %d, "output_chunks": %d, "scratch_chunks": %d,
    "channels": [], "remote_buffers": [], "semaphores": [],
    "threadblocks": [{"id": 0, "channels": [], "remote_buffer_refs": [], "ops": [%s]}]}]}`, fields, in, out, scratch, ops)
}

const reJSON = `{"name": "re", "src_buff": [{"type": "i", "index": 0, "size": 1}, {"type": "o", "index": 0, "size": 1}], "dst_buff": [{"type": "o", "index": 0, "size": 1}]}`

func pipeJSON(unit int, body string) string {
	return fmt.Sprintf(`{"name": "pipeline", "iter_context": {"unit_size": %d, "num_chunks": 1}, "ops": [%s]}`, unit, body)
}

func TestCheckLaunchMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan string
		size uint64
		dt   ElemType
		ll8  bool
		want planProblem // zero: no problem
	}{
		{name: "unit 1", plan: rankPlanJSON("", 1, 1, 0, pipeJSON(1, reJSON)), size: 2 << 20, dt: Float16,
			want: planProblem{"gpus[0].threadblocks[0].ops[0].ops[0]", plan.ErrSize.Error(), "re: 1 bytes is not a whole number of 2-byte half elements (pipeline unit_size 1, iteration 0)"}},
		{name: "unit 7", plan: rankPlanJSON("", 1, 1, 0, pipeJSON(7, reJSON)), size: 2 << 20, dt: Float16,
			want: planProblem{"gpus[0].threadblocks[0].ops[0].ops[0]", plan.ErrSize.Error(), "re: 7 bytes is not a whole number of 2-byte half elements (pipeline unit_size 7, iteration 0)"}},
		{name: "unit 6, bfloat16", plan: rankPlanJSON("", 1, 1, 0, pipeJSON(6, reJSON)), size: 2 << 20, dt: BFloat16},
		{name: "last iteration", plan: rankPlanJSON(`"buffer_alignment": 2,`, 2, 2, 0, pipeJSON(4, reJSON)), size: 12, dt: Float32,
			want: planProblem{"gpus[0].threadblocks[0].ops[0].ops[0]", plan.ErrSize.Error(), "re: 2 bytes is not a whole number of 4-byte float elements (pipeline unit_size 4, iteration 1)"}},
		{name: "no pipeline", plan: rankPlanJSON(`"buffer_alignment": 2,`, 2, 2, 0, reJSON), size: 12, dt: Float32,
			want: planProblem{"gpus[0].threadblocks[0].ops[0]", plan.ErrSize.Error(), "re: 6 bytes is not a whole number of 4-byte float elements"}},
		{name: "packets", plan: rankPlanJSON(`"buffer_alignment": 2,`, 4, 4, 4,
			`{"name": "cpkt", "src_buff": [{"type": "i", "index": 1, "size": 1}], "dst_buff": [{"type": "s", "index": 1, "size": 1}]}`), size: 40, dt: Float16,
			want: planProblem{"gpus[0].threadblocks[0].ops[0]", plan.ErrSize.Error(), "dst_buff[0]: LL packets at byte 20 of rank 0's scratch are not 8-byte aligned (twice the data offset 10): a packet word is accessed atomically"}},
		{name: "fewer bytes than a packet", plan: rankPlanJSON(`"buffer_alignment": 2,`, 4, 4, 4,
			`{"name": "cpkt", "src_buff": [{"type": "i", "index": 1, "size": 1}], "dst_buff": [{"type": "s", "index": 1, "size": 1}]}`), size: 24, dt: Float16},
		{name: "fewer bytes than an LL16 packet, LL8", plan: rankPlanJSON(`"buffer_alignment": 2,`, 4, 4, 4,
			`{"name": "cpkt", "src_buff": [{"type": "i", "index": 1, "size": 1}], "dst_buff": [{"type": "s", "index": 1, "size": 1}]}`), size: 24, dt: Float16, ll8: true,
			want: planProblem{"gpus[0].threadblocks[0].ops[0]", plan.ErrSize.Error(), "dst_buff[0]: LL packets at byte 12 of rank 0's scratch are not 8-byte aligned (twice the data offset 6): a packet word is accessed atomically"}},
		{name: "upper scratch half", plan: rankPlanJSON(`"buffer_alignment": 2, "use_double_scratch_buffer": true, "protocol": "LL",`, 1, 1, 1,
			`{"name": "cpkt", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "s", "index": 0, "size": 1}]}`), size: 10, dt: Float16,
			want: planProblem{"gpus[0].threadblocks[0].ops[0]", plan.ErrSize.Error(), "dst_buff[0]: LL packets at byte 20 of rank 0's scratch are not 8-byte aligned (twice the data offset 0, plus the double-buffer half 20 (every second launch)): a packet word is accessed atomically"}},
		{name: "reuse ring", plan: rankPlanJSON(`"reuse_resources": true,`, 1, 1, 64,
			pipeJSON(1536<<10, `{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}], "dst_buff": [{"type": "s", "index": 63, "size": 1}]}`)), size: 1536 << 10, dt: Float16,
			want: planProblem{"gpus[0].threadblocks[0].ops[0].ops[0]", plan.ErrSize.Error(), "dst_buff[0]: pipeline iteration 0 accesses bytes [66060288, 67633152), beyond rank 0's scratch of 67108864 bytes (in a reuse_resources pipeline, scratch offsets wrap in slots of 1048576 bytes and an iteration takes up to unit_size 1572864 bytes from there)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := plan.Load([]byte(tt.plan))
			if err != nil {
				t.Fatal(err)
			}
			l, err := PlanLayout(p, tt.size, tt.dt, p.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := Instantiate(p, l.Sizes)
			if err != nil {
				t.Fatal(err)
			}
			var got planProblem
			if err := CheckLaunch(inst, l, tt.ll8); err != nil {
				got = problemOf(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("CheckLaunch (-want +got):\n%s", d)
			}
			// A rank session's preparation makes the same check.
			got = planProblem{}
			if _, err := PrepareRank(inst, l, Options{DType: tt.dt, LL8: tt.ll8}); err != nil {
				got = problemOf(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("PrepareRank (-want +got):\n%s", d)
			}
		})
	}
}

// TestRingEndMatchesEveryIteration compares ringEnd's closed form with a
// walk over every iteration, for random pipelines.
func TestRingEndMatchesEveryIteration(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		slot := uint64(1 + rng.IntN(64))
		unit := uint64(1 + rng.IntN(100))
		length := uint64(rng.IntN(400))
		off := uint64(rng.IntN(50))
		pipe := &OpInstance{UnitSize: unit, Iterations: rng.IntN(50)}
		c := &launchCheck{slot: slot}
		it, end, ok := c.ringEnd(off, length, pipe)
		wantIt, wantEnd, wantOK := 0, uint64(0), false
		for i := 0; i < pipe.Iterations; i++ {
			o := uint64(i) * unit
			if o >= length {
				break
			}
			n := min(length-o, unit)
			if e := off + o%slot + n; !wantOK || e > wantEnd {
				wantIt, wantEnd, wantOK = i, e, true
			}
		}
		type res struct {
			It  int
			End uint64
			OK  bool
		}
		if d := cmp.Diff(res{wantIt, wantEnd, wantOK}, res{it, end, ok}); d != "" {
			t.Fatalf("ringEnd(off %d, length %d, unit %d, slot %d, %d iterations) (-want +got):\n%s", off, length, unit, slot, pipe.Iterations, d)
		}
	}
}

// TestPartialElementMatchesEveryIteration does the same for the byte
// counts of pipelined reductions.
func TestPartialElementMatchesEveryIteration(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		elem := []uint64{2, 4}[rng.IntN(2)]
		unit := uint64(1 + rng.IntN(40))
		size := uint64(rng.IntN(200))
		pipe := &OpInstance{UnitSize: unit, Iterations: rng.IntN(30)}
		c := &launchCheck{elem: elem}
		n, it, bad := c.partialElement(size, pipe)
		wantN, wantIt, wantBad := uint64(0), 0, false
		for i := 0; i < pipe.Iterations; i++ {
			o := uint64(i) * unit
			if o >= size {
				break
			}
			if m := min(size-o, unit); m%elem != 0 {
				wantN, wantIt, wantBad = m, i, true
				break
			}
		}
		type res struct {
			N   uint64
			It  int
			Bad bool
		}
		if d := cmp.Diff(res{wantN, wantIt, wantBad}, res{n, it, bad}); d != "" {
			t.Fatalf("partialElement(size %d, unit %d, elem %d, %d iterations) (-want +got):\n%s", size, unit, elem, pipe.Iterations, d)
		}
	}
}

// TestFirstResidue compares firstResidue with a search.
func TestFirstResidue(t *testing.T) {
	t.Parallel()
	for n := uint64(1); n < 60; n++ {
		for a := uint64(0); a < n; a++ {
			g := gcd(a, n)
			want := uint64(0)
			for i := uint64(0); i < n; i++ {
				if i*a%n == n-g {
					want = i
					break
				}
			}
			if got := firstResidue(a, n, g); got != want {
				t.Fatalf("firstResidue(%d, %d, %d) = %d, want %d", a, n, g, got, want)
			}
		}
	}
}

// TestRingEndLongPipeline checks the closed form of ringEnd for a
// pipeline longer than its walk, against every iteration.
func TestRingEndLongPipeline(t *testing.T) {
	t.Parallel()
	slot := uint64(maxRingSteps + 3) // odd: a period of slot iterations for unit 2
	pipe := &OpInstance{UnitSize: 2, Iterations: 1 << 30}
	length := 2 * (slot + 10)
	c := &launchCheck{slot: slot}
	it, end, ok := c.ringEnd(5, length, pipe)
	wantIt, wantEnd := 0, uint64(0)
	for i := uint64(0); i*2 < length; i++ {
		if e := 5 + (i*2)%slot + min(length-i*2, 2); e > wantEnd {
			wantIt, wantEnd = int(i), e
		}
	}
	if !ok || it != wantIt || end != wantEnd {
		t.Errorf("ringEnd = iteration %d, end %d, %v; want iteration %d, end %d", it, end, ok, wantIt, wantEnd)
	}
}
