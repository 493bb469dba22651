package cpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// TestProvenance explains rank 0's first output element in small
// reductions: rank 1 puts its input into rank 0's scratch and signals;
// rank 0 waits and reduces its input with that scratch. The reduction is
// right, writes the scratch instead of the output, or skips the scratch;
// the explanation says which input elements arrived and names the op
// that should have brought a missing one.
func TestProvenance(t *testing.T) {
	t.Parallel()
	const N = 64
	want := []Contribution{{Rank: 0, Offset: 0}, {Rank: 1, Offset: 0}}
	type miss struct {
		Want      Contribution
		How, Step string
		Near      string
	}
	type result struct {
		Arrived []Contribution
		Missing []miss
		Extra   []Contribution
		Holes   []string
	}
	cases := []struct {
		name   string
		reduce executor.OpInstance
		then   []executor.OpInstance
		want   result
	}{
		{name: "right",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N), L(scr, 0, N)), rs(L(out, 0, N))),
			want:   result{Arrived: want}},
		{name: "onto the scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N), L(scr, 0, N)), rs(L(scr, N, N))),
			then:   []executor.OpInstance{cp(L(in, 0, N), L(out, 0, N))},
			want:   result{Arrived: want[:1], Missing: []miss{{Want: want[1], How: "elsewhere", Step: "r0 tb0 op 1 wrote rank 0 scratch[64]", Near: "rank 0 input[0]"}}}},
		{name: "skips the scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N)), rs(L(out, 0, N))),
			want:   result{Arrived: want[:1], Missing: []miss{{Want: want[1], How: "last", Step: "r1 tb0 op 0 wrote rank 0 scratch[0]"}}}},
		{name: "reads the wrong scratch",
			reduce: op(plan.OpReduce, plan.NoChannel, nil, rs(L(in, 0, N), L(scr, N, N)), rs(L(out, 0, N))),
			want: result{Arrived: want[:1], Holes: []string{"rank 0 scratch[64]"},
				Missing: []miss{{Want: want[1], How: "hole", Step: "r1 tb0 op 0 wrote rank 0 scratch[0]", Near: "rank 0 scratch[64]"}}}},
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
			x := p.Explain(0, 0, want)
			var got result
			for _, a := range x.Arrivals {
				got.Arrived = append(got.Arrived, a.From)
			}
			for _, a := range x.Extra {
				got.Extra = append(got.Extra, a.From)
			}
			for _, h := range x.Holes {
				got.Holes = append(got.Holes, h.String())
			}
			for _, m := range x.Missing {
				g := miss{Want: m.Want, How: m.How}
				if m.Step != nil {
					g.Step = fmt.Sprintf("r%d tb%d %s wrote %s", m.Step.Rank, m.Step.TB, m.Step.Op.Path, m.Step.Wrote)
				}
				if m.How == "elsewhere" || m.How == "hole" {
					g.Near = m.Near.String()
				}
				got.Missing = append(got.Missing, g)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("explanation (-want +got):\n%s", d)
			}
		})
	}
}
