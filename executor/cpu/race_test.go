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

// reduceTBG is the pattern of the MSCCL++ CI plan reduce_tbg.json
// (docs/semantics.md §6.2): a 2-rank allreduce of 64 bytes whose read
// of the peer's scratch is split over a thread-block group of two, each
// member waiting on its own channel. In the racy form TB0 alone copies the
// whole chunk into scratch, so TB1 reads the second half (written by the
// peer's TB0) after a signal from the peer's TB1 only. The fixed form
// splits the copy over the group too.
func reduceTBG(racy bool) (*executor.Instance, func(b []executor.RankBuffers) [][]byte) {
	b := newBuilder(2, 64)
	b.connect(mem, 0, 1)
	b.connect(mem, 0, 1)
	for r := 0; r < 2; r++ {
		peer := 1 - r
		for k := uint64(0); k < 2; k++ {
			var ops []executor.OpInstance
			switch {
			case !racy:
				ops = append(ops, cp(L(in, 32*k, 32), L(scr, 32*k, 32)), nop())
			case k == 0:
				ops = append(ops, cp(L(in, 0, 64), L(scr, 0, 64)), nop())
			}
			ops = append(ops, sig(mem, int(k)), wt(mem, int(k)), nop(),
				op(plan.OpReadReduce, mem, nil, rs(L(in, 32*k, 32), R(peer, scr, 32*k, 32)), rs(L(out, 32*k, 32))))
			b.tb(r, ops...)
		}
	}
	want := func(bb []executor.RankBuffers) [][]byte {
		return [][]byte{sum32(bb[0].Input, bb[1].Input), sum32(bb[1].Input, bb[0].Input)}
	}
	return b.inst, want
}

func TestRaceReduceTBG(t *testing.T) {
	t.Parallel()
	for seed := int64(0); seed < 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			inst, _ := reduceTBG(true)
			o := opts()
			o.Race = true
			s := openT(t, inst, o, schedule{yield: seed > 0, seed: seed})
			err := s.Launch(context.Background(), bufs(2, 64, 64))
			var re *executor.RaceError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a RaceError", err)
			}
			// Both ranks have the race; find rank 0's.
			found := false
			for _, r := range re.Races {
				w, rd := r.A, r.B
				if !w.Write {
					w, rd = rd, w
				}
				if w.Rank == 1 && w.TB == 0 && w.Op == "op 0 copy" && w.Region == (executor.Region{Rank: 1, Buffer: scr, Offset: 0, Size: 64, Switch: -1}) &&
					rd.Rank == 0 && rd.TB == 1 && rd.Op == "op 3 rre" && !rd.Write && rd.Region == (executor.Region{Rank: 1, Buffer: scr, Offset: 32, Size: 32, Switch: -1}) {
					found = true
				}
			}
			if !found || len(re.Races) != 2 {
				t.Errorf("want the two reduce_tbg races (one per rank), got %v", err)
			}
			if !strings.Contains(err.Error(), "rank 0 tb 1 op 3 rre read of rank 1 s[32:64]") {
				t.Errorf("report does not name the read: %v", err)
			}
			// A race is not fatal: the session goes on.
			if err := s.Launch(context.Background(), bufs(2, 64, 64)); !errors.As(err, &re) {
				t.Errorf("second launch: %v", err)
			}
		})
	}
	// The fixed plan is race-free and correct under every schedule.
	for seed := int64(0); seed < 8; seed++ {
		inst, want := reduceTBG(false)
		o := opts()
		o.Race = true
		s := openT(t, inst, o, schedule{yield: true, seed: seed})
		bb := bufs(2, 64, 64)
		for r := range bb {
			bb[r].Input = fill(16, float32(r+1), 0.25)
		}
		if err := s.Launch(context.Background(), bb); err != nil {
			t.Fatalf("fixed plan, seed %d: %v", seed, err)
		}
		for r, w := range want(bb) {
			eq(t, fmt.Sprintf("seed %d rank %d", seed, r), bb[r].Output, w)
		}
	}
}

// plantN is the operand size of the planted races.
const plantN = 64

// plantedRaces are plans with one race each.
var plantedRaces = []struct {
	name  string
	build func() *executor.Instance
	// want are the two accesses of one reported race as
	// "rank tb op write", in either order.
	want    [2]string
	inPlace bool // output aliases input
}{
	{
		name: "missing wait, through aliased in-place buffers",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, plantN)), rs(R(1, out, 0, plantN))), nop(), sig(mem, 0))
			b.tb(1, cp(L(in, 0, plantN), L(out, plantN, plantN)), wt(mem, 0))
			return b.inst
		},
		want:    [2]string{"0 0 op 0 put true", "1 0 op 0 copy false"},
		inPlace: true,
	},
	{
		name: "missing wait",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, plantN)), rs(R(1, out, 0, plantN))), nop(), sig(mem, 0))
			b.tb(1, cp(L(out, 0, plantN), L(in, 0, plantN)), wt(mem, 0))
			return b.inst
		},
		want: [2]string{"0 0 op 0 put true", "1 0 op 0 copy false"},
	},
	{
		name: "wait on the wrong channel",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(mem, 0, 1)
			b.connect(mem, 0, 1)
			b.tb(0, op(plan.OpPut, mem, nil, rs(L(in, 0, plantN)), rs(R(1, out, 0, plantN))), nop(), sig(mem, 0))
			b.tb(0, sig(mem, 1))
			b.tb(1, wt(mem, 1), nop(), cp(L(out, 0, plantN), L(in, 0, plantN)), wt(mem, 0))
			return b.inst
		},
		want: [2]string{"0 0 op 0 put true", "1 0 op 2 copy false"},
	},
	{
		name: "port source overwritten before flush",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(prt, 0, 1)
			b.tb(0, op(plan.OpPut, prt, ch(0), rs(L(in, 0, plantN)), rs(R(1, out, 0, plantN))), nop(),
				cp(L(out, 0, plantN), L(in, 0, plantN)), nop(), op(plan.OpFlush, prt, ch(0), nil, nil))
			return b.inst
		},
		want: [2]string{"0 0 op 0 put (proxy) false", "0 0 op 2 copy true"},
	},
	{
		name: "port data read before the signal's wait",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.connect(prt, 0, 1)
			b.tb(0, op(plan.OpPutWithSignal, prt, ch(0), rs(L(in, 0, plantN)), rs(R(1, out, 0, plantN))))
			b.tb(1, cp(L(out, 0, plantN), L(in, 0, plantN)), nop(), wt(prt, 0))
			return b.inst
		},
		want: [2]string{"0 0 op 0 pws (proxy) true", "1 0 op 0 copy false"},
	},
	{
		name: "missing barrier",
		build: func() *executor.Instance {
			b := newBuilder(1, plantN)
			// TB2 meets TB1 before it meets TB0: nothing orders
			// TB0's write before TB1's read.
			b.tb(0, cp(L(in, 0, plantN), L(scr, 0, plantN)), bar(0, 2))
			b.tb(0, bar(1, 2), cp(L(scr, 0, plantN), L(out, 0, plantN)))
			b.tb(0, bar(1, 2), bar(0, 2))
			return b.inst
		},
		want: [2]string{"0 0 op 0 copy true", "0 1 op 1 copy false"},
	},
	{
		name: "semaphore released before the write",
		build: func() *executor.Instance {
			b := newBuilder(1, plantN)
			b.sems(0, 0)
			b.tb(0, sem(plan.OpSemRelease, 0), cp(L(in, 0, plantN), L(scr, 0, plantN)))
			b.tb(0, sem(plan.OpSemAcquire, 0), cp(L(scr, 0, plantN), L(out, 0, plantN)))
			return b.inst
		},
		want: [2]string{"0 0 op 1 copy true", "0 1 op 1 copy false"},
	},
	{
		name: "two writers of one packet slot",
		build: func() *executor.Instance {
			b := newBuilder(3, 2*plantN)
			b.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, plantN)), rs(R(2, scr, 0, plantN))))
			b.tb(1, op(plan.OpPutPacket, mem, nil, rs(L(in, 0, plantN)), rs(R(2, scr, 0, plantN))))
			return b.inst
		},
		want: [2]string{"0 0 op 0 ppkt true", "1 0 op 0 ppkt true"},
	},
	{
		name: "gstore against a member's read",
		build: func() *executor.Instance {
			b := newBuilder(2, 0)
			b.group(out, 0, 1)
			b.tb(0, op(plan.OpMultiStore, 0, nil, rs(L(in, 0, plantN)), rs(SW(0, out, 0, plantN))))
			b.tb(1, cp(L(out, 0, plantN), L(in, 0, plantN)))
			return b.inst
		},
		want: [2]string{"0 0 op 0 gstore true", "1 0 op 0 copy false"},
	},
}

func TestRacePlanted(t *testing.T) {
	t.Parallel()
	const N = plantN
	cases := plantedRaces
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := opts()
			o.Race = true
			bb := bufs(len(c.build().Ranks), 2*N, N)
			if c.inPlace {
				for r := range bb {
					bb[r].Output = bb[r].Input
				}
			}
			_, err := run(t, c.build(), o, bb)
			var re *executor.RaceError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a RaceError", err)
			}
			desc := func(a executor.Access) string { return fmt.Sprintf("%d %d %s %v", a.Rank, a.TB, a.Op, a.Write) }
			for _, r := range re.Races {
				got := [2]string{desc(r.A), desc(r.B)}
				if got == c.want || got == [2]string{c.want[1], c.want[0]} {
					return
				}
			}
			t.Errorf("race %v not reported; got %v", c.want, err)
		})
	}
}

// TestRacyPlansWithoutDetection runs the racy plans without race
// detection: the backend must serialise their conflicting ops, so that
// `go test -race` stays quiet, and finish.
func TestRacyPlansWithoutDetection(t *testing.T) {
	t.Parallel()
	builds := []func() *executor.Instance{func() *executor.Instance { inst, _ := reduceTBG(true); return inst }}
	for _, c := range plantedRaces {
		builds = append(builds, c.build)
	}
	for seed := int64(0); seed < 4; seed++ {
		for _, build := range builds {
			inst := build()
			s := openT(t, inst, opts(), schedule{yield: seed > 0, seed: seed})
			if err := s.Launch(context.Background(), bufs(len(inst.Ranks), 2*plantN, 2*plantN)); err != nil {
				t.Errorf("seed %d: %v", seed, err)
			}
		}
	}
}

// TestRaceCap checks deduplication and the cap on reported races.
func TestRaceCap(t *testing.T) {
	t.Parallel()
	b := newBuilder(1, 0)
	for i := 0; i < 30; i++ {
		b.tb(0, pipe(16, 4, cp(L(in, 0, 64), L(out, 0, 64))))
	}
	o := opts()
	o.Race = true
	_, err := run(t, b.inst, o, bufs(1, 64, 64))
	var re *executor.RaceError
	if !errors.As(err, &re) {
		t.Fatalf("got %v", err)
	}
	if len(re.Races) != maxRaces {
		t.Errorf("%d races reported, want the cap %d", len(re.Races), maxRaces)
	}
	seen := map[[2]string]bool{}
	for _, r := range re.Races {
		k := [2]string{fmt.Sprint(r.A.TB, r.A.Op), fmt.Sprint(r.B.TB, r.B.Op)}
		if seen[k] {
			t.Errorf("duplicate race %v", k)
		}
		seen[k] = true
	}
}

func TestShadowMerge(t *testing.T) {
	t.Parallel()
	rs := newRaceState(0)
	a := &actor{tid: 0, vc: newClock(1, 0), op: "op 0 copy"}
	// The shadow memory is keyed by address: the buffer must not live on
	// the goroutine's stack, which moves when it grows (a small make may
	// stay there; one over 64 KiB never does).
	buf := make([]byte, 1<<17)[:1024]
	for i := uint64(0); i < 1024; i += 16 {
		rs.access(a, span{bt: scr, off: i, b: buf[i : i+16]}, true, false, nil)
	}
	if n := len(rs.shadow.segs); n != 64 {
		// Each access is its own record: no merge across records.
		t.Errorf("%d segments, want 64", n)
	}
	rs.access(a, span{bt: scr, off: 0, b: buf}, true, false, nil)
	if n := len(rs.shadow.segs); n != 1 {
		t.Errorf("%d segments after a covering write, want 1", n)
	}
	rs.access(a, span{bt: scr, off: 100, b: buf[100:200]}, false, false, nil)
	if n := len(rs.shadow.segs); n != 3 {
		t.Errorf("%d segments after a read inside, want 3", n)
	}
	if len(rs.races) != 0 {
		t.Errorf("races within one thread: %v", rs.races)
	}
}

// TestCounterClocks: the k-th clock of a channel end is the join of the
// clocks of its signals 1..k+1, whether one thread signals it (the
// snapshots are kept as they are) or several do, and a later signal
// never changes an earlier entry.
func TestCounterClocks(t *testing.T) {
	type sg struct {
		tid  int
		snap vclock
	}
	for _, tc := range []struct {
		name string
		sigs []sg
	}{
		{"one thread", []sg{{0, vclock{1, 0, 0}}, {0, vclock{2, 3, 0}}, {0, vclock{3, 3, 1}}}},
		{"two threads", []sg{{0, vclock{1, 0, 0}}, {1, vclock{0, 5, 0}}, {0, vclock{2, 0, 0}}}},
		{"second thread first", []sg{{1, vclock{0, 2, 0}}, {0, vclock{4, 0, 1}}, {1, vclock{0, 3, 0}}}},
		{"a peer process's signal", []sg{{0, vclock{1, 1, 0}}, {-1, nil}, {0, vclock{2, 1, 0}}}},
		{"a peer process's signal first", []sg{{-1, nil}, {2, vclock{0, 0, 7}}, {2, vclock{0, 1, 8}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &launch{s: &session{ntid: 3}, race: newRaceState(0)}
			c := &counter{in: new(uint64)}
			want := make([]vclock, len(tc.sigs))
			acc := make(vclock, 3)
			for k, s := range tc.sigs {
				c.signal(l, s.snap, s.tid)
				acc.join(s.snap)
				want[k] = acc.clone()
			}
			if len(c.clocks) != len(want) {
				t.Fatalf("%d clocks, want %d", len(c.clocks), len(want))
			}
			for k := range want {
				if fmt.Sprint(c.clocks[k]) != fmt.Sprint(want[k]) {
					t.Errorf("clock of signal %d is %v, want %v", k+1, c.clocks[k], want[k])
				}
			}
		})
	}
}
