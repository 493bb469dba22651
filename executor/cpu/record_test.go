package cpu

// record_test.go tests Record's logical clock: slice times and the flows
// from releases to the ops they released, on hand-built instances.

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// recSlice is a slice as the tests compare it: where, what, when.
type recSlice struct {
	At         string // "r0 tb1 op 2"
	Name       string
	Iteration  int
	Start, End float64
}

// recFlow is a flow by its ends' names.
type recFlow struct{ From, To, Kind string }

func sliceName(s timeline.Slice) string { return fmt.Sprintf("r%d tb%d %s", s.Rank, s.TB, s.Op) }

func TestRecord(t *testing.T) {
	t.Parallel()
	const N = 64
	cases := []struct {
		name   string
		build  func() *executor.Instance
		slices []recSlice
		flows  []recFlow
	}{
		{
			name: "memory signal releases the wait on the peer",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				c0, c1 := b.connect(mem, 0, 1)
				b.tb(0, cp(L(in, 0, N), L(out, 0, N)), nop(), sig(mem, c0))
				b.tb(1, wt(mem, c1), cp(L(in, 0, N), L(out, 0, N)))
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0", "copy", -1, 0, 1},
				{"r0 tb0 op 1", "nop", -1, 1, 2},
				{"r0 tb0 op 2", "signal", -1, 2, 3},
				{"r1 tb0 op 0", "wait", -1, 3, 4},
				{"r1 tb0 op 1", "copy", -1, 4, 5},
			},
			flows: []recFlow{{"r0 tb0 op 2", "r1 tb0 op 0", "signal"}},
		},
		{
			name: "port signal through the proxy",
			build: func() *executor.Instance {
				b := newBuilder(2, 0)
				c0, c1 := b.connect(prt, 0, 1)
				b.tb(0, nop(), sig(prt, c0))
				b.tb(1, wt(prt, c1))
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0", "nop", -1, 0, 1},
				{"r0 tb0 op 1", "signal", -1, 1, 2},
				{"r1 tb0 op 0", "wait", -1, 2, 3},
			},
			flows: []recFlow{{"r0 tb0 op 1", "r1 tb0 op 0", "signal"}},
		},
		{
			name: "semaphore release and acquire",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.sems(0, 0)
				b.tb(0, nop(), nop(), sem(plan.OpSemRelease, 0))
				b.tb(0, sem(plan.OpSemAcquire, 0), nop())
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0", "nop", -1, 0, 1},
				{"r0 tb0 op 1", "nop", -1, 1, 2},
				{"r0 tb0 op 2", "sem_release", -1, 2, 3},
				{"r0 tb1 op 0", "sem_acquire", -1, 3, 4},
				{"r0 tb1 op 1", "nop", -1, 4, 5},
			},
			flows: []recFlow{{"r0 tb0 op 2", "r0 tb1 op 0", "semaphore"}},
		},
		{
			name: "barrier: every participant starts with the last arrival",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, nop(), nop(), bar(0, 2))
				b.tb(0, bar(0, 2), nop())
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0", "nop", -1, 0, 1},
				{"r0 tb0 op 1", "nop", -1, 1, 2},
				{"r0 tb0 op 2", "barrier", -1, 2, 3},
				{"r0 tb1 op 0", "barrier", -1, 2, 3},
				{"r0 tb1 op 1", "nop", -1, 3, 4},
			},
			flows: []recFlow{{"r0 tb0 op 2", "r0 tb1 op 0", "barrier"}},
		},
		{
			name: "packets: the reader starts after the writer",
			build: func() *executor.Instance {
				b := newBuilder(2, 4*N)
				b.tb(0, nop(), op(plan.OpPutPacket, mem, nil, rs(L(in, 0, N)), rs(R(1, scr, N, N))))
				b.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, N, N)), rs(L(out, 0, N))))
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0", "nop", -1, 0, 1},
				{"r0 tb0 op 1", "ppkt", -1, 1, 2},
				{"r1 tb0 op 0", "upkt", -1, 2, 3},
			},
			flows: []recFlow{{"r0 tb0 op 1", "r1 tb0 op 0", "packet"}},
		},
		{
			name: "pipeline: a slice per iteration",
			build: func() *executor.Instance {
				b := newBuilder(1, 0)
				b.tb(0, pipe(N/2, 2, cp(L(in, 0, N), L(out, 0, N)), nop()))
				return b.inst
			},
			slices: []recSlice{
				{"r0 tb0 op 0.0", "copy", 0, 0, 1},
				{"r0 tb0 op 0.1", "nop", 0, 1, 2},
				{"r0 tb0 op 0.0", "copy", 1, 2, 3},
				{"r0 tb0 op 0.1", "nop", 1, 3, 4},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := tc.build()
			tl, err := Record(context.Background(), inst, opts(), bufs(len(inst.Ranks), N, N))
			if err != nil {
				t.Fatal(err)
			}
			var got []recSlice
			for _, s := range tl.Slices {
				got = append(got, recSlice{sliceName(s), s.Name, s.Iteration, s.Start, s.End})
			}
			if d := cmp.Diff(tc.slices, got); d != "" {
				t.Errorf("slices (-want +got):\n%s", d)
			}
			var flows []recFlow
			for _, f := range tl.Flows {
				flows = append(flows, recFlow{sliceName(tl.Slices[f.From]), sliceName(tl.Slices[f.To]), f.Kind})
			}
			if d := cmp.Diff(tc.flows, flows); d != "" {
				t.Errorf("flows (-want +got):\n%s", d)
			}
			if tl.Clock != timeline.Steps || tl.Ranks != len(inst.Ranks) {
				t.Errorf("clock %q ranks %d, want %q %d", tl.Clock, tl.Ranks, timeline.Steps, len(inst.Ranks))
			}
		})
	}
}

// TestRecordDescribes checks the plan-level fields of a slice: bytes,
// peers and channels.
func TestRecordDescribes(t *testing.T) {
	t.Parallel()
	b := newBuilder(3, 0)
	c01, c10 := b.connect(mem, 0, 1)
	c02, c20 := b.connect(mem, 0, 2)
	b.tb(0, op(plan.OpPut, mem, ch(c01, c02), rs(L(in, 0, 32), L(in, 32, 32)), rs(R(1, out, 0, 32), R(2, out, 0, 32))), sig(mem, c01, c02))
	b.tb(1, wt(mem, c10))
	b.tb(2, wt(mem, c20))
	tl, err := Record(context.Background(), b.inst, opts(), bufs(3, 64, 64))
	if err != nil {
		t.Fatal(err)
	}
	want := timeline.Slice{Rank: 0, TB: 0, Op: "op 0", Name: "put", Iteration: -1, Start: 0, End: 1, Bytes: 64, Peers: []int{1, 2}, Channel: fmt.Sprintf("memory %d,%d", c01, c02)}
	if d := cmp.Diff(want, tl.Slices[0]); d != "" {
		t.Errorf("put slice (-want +got):\n%s", d)
	}
	if len(tl.Flows) != 2 {
		t.Errorf("flows %+v, want one per waiting rank", tl.Flows)
	}
}

// TestRecordOffByDefault checks that an ordinary session records nothing.
func TestRecordOffByDefault(t *testing.T) {
	b := newBuilder(1, 0)
	b.tb(0, nop())
	s := mustRun(t, b.inst, opts(), bufs(1, 0, 0))
	if s.rec != nil {
		t.Error("an ordinary session has a recorder")
	}
}
