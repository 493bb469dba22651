package cpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// reuseN is the operand size of the launch-boundary cases.
const reuseN = 64

// reuseCases are plans of two ranks that are race-free within a launch;
// some race across the launch boundary (docs/executor.md §5.3). race is
// the pair both the static check and the race detector must name, as
// "rank tb op write" of the later launch's access, then of the earlier
// one's, and apart the launches between them; "" for a plan that is
// race-free across launches too.
var reuseCases = []struct {
	name  string
	build func() *executor.Instance
	race  [2]string
	apart int
	text  string // in the static check's warning
}{
	{
		name: "a put into a slot the peer reads, no handshake",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(mem, 0, 1)
			b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))), nop(), sig(mem, 0))
			b.tb(1, wt(mem, 0), cp(L(scr, 0, reuseN), L(out, 0, reuseN)))
			return b.inst
		},
		race:  [2]string{"0 0 op 0 put true", "1 0 op 1 copy false"},
		apart: 1,
		text:  "the put of rank 0 tb 0 op 0 writes rank 1 scratch[0:64] in every launch, which the copy of rank 1 tb 0 op 1 reads: no signal and wait orders rank 1's access before rank 0's write in the next launch (a race across the launch boundary; add a handshake,",
	},
	{
		name: "a put into a slot the peer reads, handshake at the end",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(mem, 0, 1)
			b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))), nop(), sig(mem, 0), wt(mem, 0))
			b.tb(1, wt(mem, 0), cp(L(scr, 0, reuseN), L(out, 0, reuseN)), nop(), sig(mem, 0))
			return b.inst
		},
	},
	{
		name: "a put into a slot the peer reads, handshake at the start",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(mem, 0, 1)
			b.tb(0, wt(mem, 0), op(plan.OpPut, mem, nil, rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))), nop(), sig(mem, 0))
			b.tb(1, sig(mem, 0), wt(mem, 0), cp(L(scr, 0, reuseN), L(out, 0, reuseN)))
			return b.inst
		},
	},
	{
		name: "a rank rewrites its own scratch while the peer gets it",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(mem, 0, 1)
			b.tb(0, cp(L(in, 0, reuseN), L(scr, 0, reuseN)), nop(), sig(mem, 0))
			b.tb(1, wt(mem, 0), op(plan.OpGet, mem, nil, rs(R(0, scr, 0, reuseN)), rs(L(out, 0, reuseN))))
			return b.inst
		},
		race:  [2]string{"0 0 op 0 copy true", "1 0 op 1 get false"},
		apart: 1,
		text:  "the copy of rank 0 tb 0 op 0 writes rank 0 scratch[0:64] in every launch, which the get of rank 1 tb 0 op 1 reads: no signal and wait orders rank 1's access before rank 0's write in the next launch",
	},
	{
		name: "a rank rewrites its own scratch once the peer has got it",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(mem, 0, 1)
			b.tb(0, cp(L(in, 0, reuseN), L(scr, 0, reuseN)), nop(), sig(mem, 0), wt(mem, 0))
			b.tb(1, wt(mem, 0), op(plan.OpGet, mem, nil, rs(R(0, scr, 0, reuseN)), rs(L(out, 0, reuseN))), nop(), sig(mem, 0))
			return b.inst
		},
	},
	{
		name: "a port put's source rewritten in the next launch, no flush",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(prt, 0, 1)
			b.tb(0, cp(L(in, 0, reuseN), L(scr, 0, reuseN)), nop(), op(plan.OpPutWithSignal, prt, ch(0), rs(L(scr, 0, reuseN)), rs(R(1, out, 0, reuseN))))
			b.tb(1, wt(prt, 0))
			return b.inst
		},
		race:  [2]string{"0 0 op 0 copy true", "0 0 op 2 pws false"},
		apart: 1,
		text:  "which the pws of rank 0 tb 0 op 2 reads: no signal and wait orders rank 0's proxy's access before rank 0's write in the next launch (a race across the launch boundary; flush the transfer, or add a handshake,",
	},
	{
		name: "a port put's source rewritten in the next launch, after a flush",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(prt, 0, 1)
			b.tb(0, cp(L(in, 0, reuseN), L(scr, 0, reuseN)), nop(), op(plan.OpPutWithSignal, prt, ch(0), rs(L(scr, 0, reuseN)), rs(R(1, out, 0, reuseN))),
				op(plan.OpFlush, prt, ch(0), nil, nil))
			b.tb(1, wt(prt, 0))
			return b.inst
		},
	},
	{
		name: "a port put's source rewritten in the next launch, put with signal and flush",
		build: func() *executor.Instance {
			b := newBuilder(2, reuseN)
			b.connect(prt, 0, 1)
			b.tb(0, cp(L(in, 0, reuseN), L(scr, 0, reuseN)), nop(), op(plan.OpPutWithSignalAndFlush, prt, ch(0), rs(L(scr, 0, reuseN)), rs(R(1, out, 0, reuseN))))
			b.tb(1, wt(prt, 0))
			return b.inst
		},
	},
	{
		name: "a port put forwards a slot, the handshake through the same proxy",
		build: func() *executor.Instance {
			// Rank 1's "ready" of the next launch goes through its
			// proxy's FIFO, after this launch's forwarding put has read
			// the slot.
			b := newBuilder(2, reuseN)
			b.connect(prt, 0, 1)
			b.tb(0, wt(prt, 0), op(plan.OpPutWithSignal, prt, ch(0), rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))))
			b.tb(1, sig(prt, 0), wt(prt, 0), op(plan.OpPut, prt, ch(0), rs(L(scr, 0, reuseN)), rs(R(0, out, 0, reuseN))))
			return b.inst
		},
	},
	{
		name: "a port put forwards a slot, the handshake on a memory channel",
		build: func() *executor.Instance {
			// The thread block's "ready" does not wait for the proxy.
			b := newBuilder(2, reuseN)
			b.connect(prt, 0, 1)
			b.connect(mem, 0, 1)
			b.tb(0, wt(mem, 0), op(plan.OpPutWithSignal, prt, ch(0), rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))))
			b.tb(1, sig(mem, 0), wt(prt, 0), op(plan.OpPut, prt, ch(0), rs(L(scr, 0, reuseN)), rs(R(0, out, 0, reuseN))))
			return b.inst
		},
		race:  [2]string{"0 0 op 1 pws true", "1 0 op 2 put false"},
		apart: 1,
		text:  "no signal and wait orders rank 1's proxy's access before rank 0's write in the next launch",
	},
	{
		name: "LL packets into one scratch, one way",
		build: func() *executor.Instance {
			b := newBuilder(2, 2*reuseN)
			b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))))
			b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, reuseN)), rs(L(out, 0, reuseN))))
			return b.inst
		},
		race:  [2]string{"0 0 op 0 ppkt true", "1 0 op 0 upkt false"},
		apart: 1,
		text:  "writes rank 1 scratch[0:128] in every launch, which the upkt of rank 1 tb 0 op 0 reads: no signal and wait orders rank 1's access before rank 0's write in the next launch",
	},
	{
		name: "LL packets into a double-buffered scratch, one way",
		build: func() *executor.Instance {
			b := newBuilder(2, 4*reuseN)
			b.inst.Plan.UseDoubleScratch = true
			b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, reuseN)), rs(R(1, scr, 0, reuseN))))
			b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, reuseN)), rs(L(out, 0, reuseN))))
			return b.inst
		},
		race:  [2]string{"0 0 op 0 ppkt true", "1 0 op 0 upkt false"},
		apart: 2,
		text:  "before rank 0's write two launches later (scratch is double-buffered: the next launch uses the other half)",
	},
	{
		name: "LL packets into a double-buffered scratch, both ways",
		build: func() *executor.Instance {
			b := newBuilder(2, 4*reuseN)
			b.inst.Plan.UseDoubleScratch = true
			for r := range 2 {
				b.tb(r, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, reuseN)), rs(R(1-r, scr, 0, reuseN))),
					op(plan.OpUnpackPacket, 0, nil, rs(L(scr, 0, reuseN)), rs(L(out, 0, reuseN))))
			}
			return b.inst
		},
	},
}

// TestReuseAcrossLaunches: the static launch-boundary check
// (executor.CheckReuse, mscclgo check's warning) and the race detector
// over three launches agree on each case: both name the same pair of
// ops, of launches apart launches apart, or neither reports anything.
func TestReuseAcrossLaunches(t *testing.T) {
	t.Parallel()
	desc := func(rank, tb int, o *executor.OpInstance, write bool) string {
		return fmt.Sprintf("%d %d %s %s %v", rank, tb, o.Path, o.Type, write)
	}
	for _, c := range reuseCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var static [][2]string
			for _, r := range executor.CheckReuse(c.build()) {
				got := [2]string{desc(r.LaterRank, r.LaterTB, r.Later, r.LaterWrites), desc(r.EarlierRank, r.EarlierTB, r.Earlier, r.EarlierWrites)}
				static = append(static, got)
				if got != c.race || r.Apart != c.apart {
					t.Errorf("CheckReuse: %v, %d launch(es) apart (%v); want %v, %d apart", got, r.Apart, r, c.race, c.apart)
				}
				if !strings.Contains(r.String(), c.text) {
					t.Errorf("CheckReuse's warning\n%v\ndoes not say\n%s", r, c.text)
				}
			}
			if c.race != [2]string{} && len(static) == 0 {
				t.Errorf("CheckReuse: nothing; want %v", c.race)
			}

			o := opts()
			o.Race = true
			s := openT(t, c.build(), o, schedule{})
			var re *executor.RaceError
			launch := 0
			for ; launch < 3; launch++ {
				err := s.Launch(context.Background(), bufs(2, reuseN, reuseN))
				if errors.As(err, &re) {
					break
				}
				if err != nil {
					t.Fatalf("launch %d: %v", launch, err)
				}
			}
			if c.race == [2]string{} {
				if re != nil {
					t.Errorf("launch %d: %v; want no race", launch, re)
				}
				return
			}
			if re == nil {
				t.Fatalf("no race in 3 launches; want %v, %d launch(es) apart", c.race, c.apart)
			}
			dyn := func(a executor.Access) string {
				return fmt.Sprintf("%d %d %s %v", a.Rank, a.TB, strings.TrimSuffix(a.Op, " (proxy)"), a.Write)
			}
			for _, r := range re.Races {
				later, earlier := r.A, r.B
				if later.Launch < earlier.Launch {
					later, earlier = earlier, later
				}
				if [2]string{dyn(later), dyn(earlier)} == c.race && later.Launch-earlier.Launch == c.apart {
					return
				}
			}
			t.Errorf("the race detector does not report %v, %d launch(es) apart: %v", c.race, c.apart, re)
		})
	}
}
