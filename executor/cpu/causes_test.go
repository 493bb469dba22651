package cpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/diagnose"
	"github.com/mscclgo/mscclgo/plan"
)

// TestCauses runs TestProvenance's small reductions (rank 1 puts into
// rank 0's scratch and signals, rank 0 waits and reduces) with one
// mistake each and checks the likeliest typed cause of rank 0's first
// wrong output element: its kind and the op it blames.
func TestCauses(t *testing.T) {
	t.Parallel()
	const N = 64
	want := []Contribution{{Rank: 0, Offset: 0}, {Rank: 1, Offset: 0}}
	cases := []struct {
		name   string
		reduce executor.OpInstance
		then   []executor.OpInstance
		kind   diagnose.Kind
		rank   int // of the op blamed
		text   string
	}{
		{name: "onto the scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N), L(scr, 0, N)), rs(L(scr, N, N))),
			then:   []executor.OpInstance{cp(L(in, 0, N), L(out, 0, N))},
			kind:   diagnose.ReadButWroteElsewhere, rank: 0, text: "read rank 0 input[0], which the result is built from, but wrote rank 0 scratch[64]"},
		{name: "skips the scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N)), rs(L(out, 0, N))),
			kind:   diagnose.LastMover, rank: 1, text: "moved rank 1 input[0] last, to rank 0 scratch[0]"},
		{name: "reads the wrong scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N), L(scr, N, N)), rs(L(out, 0, N))),
			kind:   diagnose.ReadUnwritten, rank: 0, text: "reads rank 0 scratch[64], which no op wrote before it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBuilder(2, 2*N)
			c0, c1 := b.connect(mem, 0, 1)
			b.tb(0, append([]executor.OpInstance{wt(mem, c0), tc.reduce}, tc.then...)...)
			b.tb(1, op(plan.OpPut, mem, ch(c1), rs(L(in, 0, N)), rs(R(0, scr, 0, N))), sig(mem, c1))
			p, err := Provenance(context.Background(), b.inst, opts(), bufs(2, N, N))
			if err != nil {
				t.Fatal(err)
			}
			cs := diagnose.Rank(p.Causes(b.inst, p.Explain(0, 0, want), 3))
			if len(cs) == 0 {
				t.Fatal("no cause")
			}
			c := cs[0]
			if c.Kind != tc.kind || c.Op.Rank != tc.rank || c.Count != 3 || !strings.Contains(c.Text, tc.text) {
				t.Errorf("cause %v of rank %d, count %d: %s\nwant %v of rank %d, count 3, saying %q", c.Kind, c.Op.Rank, c.Count, c.Text, tc.kind, tc.rank, tc.text)
			}
		})
	}
}

// TestDeadlockDiagnosed runs every deadlock of deadlockCases on the CPU
// backend and diagnoses its blocked state (executor/diagnose): every
// blocked thread block's op is found in the instance by the backend's
// description of it, and the likeliest cause is of the kind the mistake
// is (none where the blocked state names none: a barrier or a
// semaphore).
func TestDeadlockDiagnosed(t *testing.T) {
	t.Parallel()
	want := map[string]diagnose.Kind{
		"wait without signal":      diagnose.MissingSignal,
		"unpaired channel":         diagnose.UnpairedChannel,
		"port wait without signal": diagnose.MissingSignal,
		"circular wait":            diagnose.CircularWait,
		"inside a pipeline":        diagnose.MissingSignal,
		"packet never written":     diagnose.PartialWrite,
	}
	for _, c := range deadlockCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inst := c.build()
			s := openT(t, inst, opts(), schedule{})
			err := s.Launch(context.Background(), bufs(len(s.ranks), 64, 64))
			var de *executor.DeadlockError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, want a DeadlockError", err)
			}
			r := diagnose.Deadlock(inst, de.Blocked)
			for _, b := range r.Blocked {
				if b.Op.Op == nil {
					t.Errorf("%s: the op %q is not found in the instance", b.Line, b.BlockedTB.Op)
				}
			}
			var got diagnose.Kind
			if len(r.Causes) > 0 {
				got = r.Causes[0].Kind
			}
			if got != want[c.name] {
				t.Errorf("likeliest cause %v, want %v: %+v", got, want[c.name], r.Causes)
			}
		})
	}
}
