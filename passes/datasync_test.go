package passes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// TestDataSyncExamples ports the examples of docs/passes.md §5.
func TestDataSyncExamples(t *testing.T) {
	t.Parallel()
	runExamples(t, []example{
		{name: "ds_all", build: func(t *tprog) {
			s := t.sem(0, 0)
			s.release(0, none)
			t.copy(0, O(0, 0, 1), I(0, 0, 1), tb(0))
			s.release(0, before)
			t.copy(0, O(0, 1, 2), I(0, 1, 2), tb(0))
			s.release(0, after)
			t.copy(0, O(0, 2, 3), I(0, 2, 3), tb(0))
			s.release(0, both)
			t.copy(0, O(0, 3, 4), I(0, 3, 4), tb(0))
		}, want: map[string]string{"0/0": `
			sem_release sem=[0] sync=none
			copy i[0:1] -> o[0:1]
			nop
			sem_release sem=[0] sync=before
			copy i[1:2] -> o[1:2]
			sem_release sem=[0] sync=after
			nop
			copy i[2:3] -> o[2:3]
			nop
			sem_release sem=[0] sync=both
			nop
			copy i[3:4] -> o[3:4]`}},
		{name: "ds_pipe", build: func(t *tprog) {
			for r := 0; r < 2; r++ {
				ch := t.mem(1-r, r)
				t.loopCtx(1<<20, 1, func() {
					t.copy(r, O(r, 0, 1), I(r, 0, 1), tb(0))
					ch.signal(0, before)
					ch.wait(0, after)
					t.copy(r, O(r, 1, 2), I(r, 1, 2), tb(0))
				})
			}
		}, want: map[string]string{"0/0": `
			pipeline unit=1048576 chunks=1 {
			  copy i[0:1] -> o[0:1]
			  nop
			  signal memory ch={0} sync=before
			  wait memory ch={0} sync=after
			  nop
			  copy i[1:2] -> o[1:2]
			}`}},
	})
}

// TestInsertDataSync runs the pass alone on hand-built lists.
func TestInsertDataSync(t *testing.T) {
	t.Parallel()
	sig := func(k plan.OpType, s ir.SyncType) *ir.Op {
		return &ir.Op{Kind: k, IDSet: ir.NewSet(0), ChannelType: ir.Memory, DataSync: s}
	}
	nop := &ir.Op{Kind: plan.OpNop}
	cases := []struct {
		name   string
		before []*ir.Op
		after  string
	}{
		{"empty", nil, ""},
		{"rlx ops too", []*ir.Op{sig(plan.OpRelaxedSignal, both), sig(plan.OpRelaxedWait, before)}, `
			nop
			rlxsignal memory ch={0} sync=both
			nop
			nop
			rlxwait memory ch={0} sync=before`},
		{"flush after", []*ir.Op{sig(plan.OpFlush, after)}, `
			flush memory ch={0} sync=after
			nop`},
		{"nops kept, pws untouched", []*ir.Op{nop,
			{Kind: plan.OpPutWithSignal, Src: []ir.Ref{{Size: 1}}, Dst: []ir.Ref{{Remote: true, Size: 1}}, ChannelIDs: []int{0}, ChannelType: ir.Port},
			{Kind: plan.OpBarrier, Barrier: &ir.BarrierInfo{TBList: []int{0, 1}}}}, `
			nop
			pws port ch=[0] i[0:1] -> rb0[0:1]
			barrier #0 tbs=[0,1]`},
		{"pipeline body", []*ir.Op{{Kind: plan.OpPipeline, UnitSize: 1, NumChunks: 1, Body: []*ir.Op{sig(plan.OpWait, both)}}}, `
			pipeline unit=1 chunks=1 {
			  nop
			  wait memory ch={0} sync=both
			  nop
			}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := ir.SprintOps(InsertDataSync(c.before))
			if diff := cmp.Diff(lines(dedent(c.after)), lines(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestInsertDataSyncFreshNops checks that every inserted nop is a distinct
// op and that the input list is left alone.
func TestInsertDataSyncFreshNops(t *testing.T) {
	t.Parallel()
	in := []*ir.Op{
		{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{0}, DataSync: both},
		{Kind: plan.OpSemRelease, SemaphoreIDs: []int{0}, DataSync: both},
	}
	orig := append([]*ir.Op(nil), in...)
	out := InsertDataSync(in)
	if len(out) != 6 {
		t.Fatalf("got %d ops, want 6", len(out))
	}
	seen := map[*ir.Op]bool{}
	for _, o := range out {
		if seen[o] {
			t.Errorf("op %s appears twice", ir.FormatOp(o))
		}
		seen[o] = true
	}
	for i := range in {
		if in[i] != orig[i] {
			t.Errorf("input slot %d changed", i)
		}
	}
}
