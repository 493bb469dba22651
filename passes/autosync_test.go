package passes

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// TestAutoSyncExamples ports the examples of docs/passes.md §6.
func TestAutoSyncExamples(t *testing.T) {
	t.Parallel()
	runExamples(t, []example{
		{name: "dep_raw", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			nop
			copy o[0:1] -> i[1:2]`}},
		{name: "dep_war_waw_rar", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, O(0, 1, 2), I(0, 0, 1), tb(0))
			t.copy(0, I(0, 0, 1), O(0, 2, 3), tb(0))
			t.copy(0, I(0, 0, 1), O(0, 3, 4), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			copy i[0:1] -> o[1:2]
			nop
			copy o[2:3] -> i[0:1]
			nop
			copy o[3:4] -> i[0:1]`}},
		{name: "dep_partial", build: func(t *tprog) {
			t.copy(0, O(0, 0, 2), I(0, 0, 2), tb(0))
			t.copy(0, I(0, 2, 4), O(0, 2, 4), tb(0))
			t.copy(0, I(0, 3, 4), O(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:2] -> o[0:2]
			copy o[2:4] -> i[2:4]
			nop
			copy o[1:2] -> i[3:4]`}},
		{name: "dep_scope", build: func(t *tprog) {
			t.buffer(0, 4)
			t.copy(0, O(0, 0, 1), I(0, 1, 2), tb(0))
			t.copy(0, S(0, 1, 2), S(0, 0, 1), tb(0))
			t.copy(0, I(0, 2, 3), O(0, 0, 1), tb(1))
		}, want: map[string]string{
			"0/0": `
				copy i[1:2] -> o[0:1]
				copy s[0:1] -> s[1:2]`,
			"0/1": `copy o[0:1] -> i[2:3]`,
		}},
		{name: "dep_remote", build: func(t *tprog) {
			a := t.mem(1, 0)
			a.put(I(1, 0, 1), I(0, 1, 2), tb(0))
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			a.get(O(0, 1, 2), I(1, 2, 3), tb(0))
			t.copy(0, I(0, 3, 4), O(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			put memory ch=[0] i[1:2] -> rb0[0:1]
			copy i[0:1] -> o[0:1]
			get memory ch=[0] rb0[2:3] -> o[1:2]
			nop
			copy o[1:2] -> i[3:4]`}},
		{name: "dep_reset", build: func(t *tprog) {
			ch := t.mem(1, 0)
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			ch.signal(0, none)
			t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
			ch.signal(0, before)
			t.copy(0, I(0, 2, 3), O(0, 0, 1), tb(0))
			t.waits(ir.Memory, 2)
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			signal memory ch={0} sync=none
			nop
			copy o[0:1] -> i[1:2]
			nop
			signal memory ch={0} sync=before
			copy o[0:1] -> i[2:3]`}},
		{name: "dep_barrier", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.barrier(0, 0, 1)
			t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			barrier #0 tbs=[0,1]
			copy o[0:1] -> i[1:2]`}},
		{name: "dep_pkt", build: func(t *tprog) {
			t.buffer(0, 4)
			t.buffer(1, 4)
			a := t.mem(1, 0)
			t.copyPackets(0, S(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, O(0, 0, 1), S(0, 0, 1), tb(0))
			t.unpackPackets(0, O(0, 1, 2), S(0, 1, 2), tb(0))
			t.copy(0, S(0, 1, 2), I(0, 1, 2), tb(0))
			a.readPutPackets(S(1, 0, 1), S(0, 1, 2), tb(0))
			t.reduce(0, I(0, 2, 3), []ck{S(0, 2, 3)}, tb(0), O(0, 2, 3), ir.Sum, true)
			t.copy(0, I(0, 2, 3), O(0, 3, 4), tb(0))
			t.copy(0, S(0, 2, 3), O(0, 3, 4), tb(0))
		}, want: map[string]string{"0/0": `
			cpkt i[0:1] -> s[0:1]
			copy s[0:1] -> o[0:1]
			upkt s[1:2] -> o[1:2]
			copy i[1:2] -> s[1:2]
			rppkt memory ch=[0] s[1:2] -> rb0[0:1]
			repkt none sum src=i[2:3],s[2:3] dst=o[2:3] packet
			copy o[3:4] -> i[2:3]
			nop
			copy o[3:4] -> s[2:3]`}},
		{name: "dep_glre", build: func(t *tprog) {
			sw := t.sw([]int{0, 1}, ir.Input)
			sw.reduce(0, 0, 1, O(0, 0, 1).chunk(), 0, ir.Sum)
			t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `
			glre switch sum ch=[0] buf=i off=0 size=1 chunk=r0:o[0:1]
			copy o[0:1] -> i[1:2]`}},
		{name: "dep_lost", build: func(t *tprog) {
			t.copy(0, O(0, 1, 2), I(0, 2, 3), tb(0))
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
			t.copy(0, I(0, 1, 2), O(0, 2, 3), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[2:3] -> o[1:2]
			copy i[0:1] -> o[0:1]
			nop
			copy i[1:2] -> o[1:2]
			copy o[2:3] -> i[1:2]`}},
		{name: "dep_pipe", build: func(t *tprog) {
			s := t.sem(0, 0)
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.loopCtx(4096, 2, func() {
				s.acquire(0, both)
				t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
				t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
			})
			t.copy(0, I(0, 2, 3), O(0, 1, 2), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			nop
			pipeline unit=4096 chunks=2 {
			  nop
			  sem_acquire sem=[0] sync=both
			  nop
			  copy o[0:1] -> i[1:2]
			  nop
			  copy i[1:2] -> o[1:2]
			}
			nop
			copy o[1:2] -> i[2:3]`}},
		{name: "dep_off", opts: []option{noAutoSync}, build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			t.copy(0, I(0, 1, 2), O(0, 0, 1), tb(0))
		}, want: map[string]string{"0/0": `
			copy i[0:1] -> o[0:1]
			copy o[0:1] -> i[1:2]`}},
		{name: "tbg_dep", build: func(t *tprog) {
			t.copy(0, O(0, 0, 1), I(0, 0, 1), grp(0, 1))
			t.copy(0, I(0, 1, 2), O(0, 0, 1), grp(0, 1))
		}, want: map[string]string{
			"0/0": `
				copy i[0:1] -> o[0:1] tbg=0/2
				nop
				copy o[0:1] -> i[1:2] tbg=0/2`,
			"0/1": `
				copy i[0:1] -> o[0:1] tbg=1/2
				nop
				copy o[0:1] -> i[1:2] tbg=1/2`,
		}},
	})
}

// TestResolveDependencies runs the pass alone on hand-built lists.
func TestResolveDependencies(t *testing.T) {
	t.Parallel()
	cp := func(src, dst ir.Ref) *ir.Op { return &ir.Op{Kind: plan.OpCopy, Src: []ir.Ref{src}, Dst: []ir.Ref{dst}} }
	in := func(i, n int) ir.Ref { return ir.Ref{Buffer: ir.Input, Index: i, Size: n} }
	out := func(i, n int) ir.Ref { return ir.Ref{Buffer: ir.Output, Index: i, Size: n} }
	scr := func(i, n int) ir.Ref { return ir.Ref{Buffer: ir.Scratch, Index: i, Size: n} }
	cases := []struct {
		name   string
		before []*ir.Op
		after  string
	}{
		{"same op reads and writes", []*ir.Op{cp(in(0, 1), in(0, 1)), cp(in(1, 1), out(0, 1))}, `
			copy i[0:1] -> i[0:1]
			copy i[1:2] -> o[0:1]`},
		{"trim keeps the outer pieces", []*ir.Op{
			cp(in(0, 4), out(0, 4)),  // writes o[0:4]
			cp(in(0, 1), in(0, 1)),   // RAR on i[0], same-owner rewrite
			cp(out(0, 0), scr(0, 1)), // size-0 read at o[0]: end = -1, no overlap
			cp(out(3, 1), in(3, 1)),  // reads o[3]: RAW with the first op
		}, `
			copy i[0:4] -> o[0:4]
			copy i[0:1] -> i[0:1]
			copy o[0:0] -> s[0:1]
			nop
			copy o[3:4] -> i[3:4]`},
		{"size-0 read strictly inside a write", []*ir.Op{cp(in(0, 1), out(0, 4)), cp(out(2, 0), in(2, 1))}, `
			copy i[0:1] -> o[0:4]
			nop
			copy o[2:2] -> i[2:3]`},
		{"descending stream", []*ir.Op{cp(in(3, 1), out(3, 1)), cp(in(2, 1), out(2, 1)), cp(in(1, 1), out(1, 1)),
			cp(in(0, 1), out(0, 1)), cp(out(2, 1), in(2, 1))}, `
			copy i[3:4] -> o[3:4]
			copy i[2:3] -> o[2:3]
			copy i[1:2] -> o[1:2]
			copy i[0:1] -> o[0:1]
			nop
			copy o[2:3] -> i[2:3]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := ir.SprintOps(ResolveDependencies(c.before))
			if diff := cmp.Diff(lines(dedent(c.after)), lines(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// naiveTracker is the docs/passes.md §6.2 algorithm on an unsorted slice, for chunks of
// size ≥ 1.
type naiveTracker struct{ iv [3][]access }

func (n *naiveTracker) record(buf int, a access) bool {
	for _, e := range n.iv[buf] {
		if a.start <= e.end && e.start <= a.end && e.owner != a.owner && (e.write || a.write) {
			n.iv = [3][]access{}
			n.iv[buf] = []access{a}
			return true
		}
	}
	var keep []access
	for _, e := range n.iv[buf] {
		if !(a.start <= e.end && e.start <= a.end) {
			keep = append(keep, e)
			continue
		}
		if e.start < a.start {
			keep = append(keep, access{start: e.start, end: a.start - 1, owner: e.owner, write: e.write})
		}
		if e.end > a.end {
			keep = append(keep, access{start: a.end + 1, end: e.end, owner: e.owner, write: e.write})
		}
	}
	n.iv[buf] = append(keep, a)
	return false
}

// TestTrackerMatchesNaive compares the sorted-list tracker with the naive
// model on random access streams.
func TestTrackerMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	owners := make([]*ir.Op, 8)
	for i := range owners {
		owners[i] = &ir.Op{}
	}
	for round := 0; round < 200; round++ {
		var tr tracker
		var nv naiveTracker
		span := 4 + rng.IntN(60)
		for step := 0; step < 300; step++ {
			if rng.IntN(40) == 0 {
				tr.clear()
				nv = naiveTracker{}
				continue
			}
			buf := rng.IntN(3)
			start := rng.IntN(span)
			a := access{start: start, end: start + rng.IntN(5), owner: owners[rng.IntN(len(owners))], write: rng.IntN(2) == 0}
			got := tr.record(&tr.lists[buf], a)
			want := nv.record(buf, a)
			if got != want {
				t.Fatalf("round %d step %d: conflict = %v, naive says %v", round, step, got, want)
			}
			for b := 0; b < 3; b++ {
				if tr.lists[b].len() != len(nv.iv[b]) {
					t.Fatalf("round %d step %d: buffer %d holds %d intervals, naive %d", round, step, b, tr.lists[b].len(), len(nv.iv[b]))
				}
				items := tr.lists[b].items()
				for i := 1; i < len(items); i++ {
					if items[i-1].end >= items[i].start {
						t.Fatalf("round %d step %d: intervals not sorted and disjoint: %v", round, step, items)
					}
				}
			}
		}
	}
}
