// This file tests the simulation's parts: the bandwidth sharing, and
// whole predictions for their timeline and deadlocks.

package model

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

func TestShareRates(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name  string
		caps  []float64
		flows []flow
		want  []float64
	}{
		{"two flows share a link", []float64{100}, []flow{{cap: inf, uses: []use{{0, 1}}}, {cap: inf, uses: []use{{0, 1}}}}, []float64{50, 50}},
		{"a capped flow leaves the rest to the other (max-min)", []float64{100}, []flow{{cap: 10, uses: []use{{0, 1}}}, {cap: inf, uses: []use{{0, 1}}}}, []float64{10, 90}},
		{"a flow limited elsewhere", []float64{30, 100}, []flow{{cap: inf, uses: []use{{0, 1}, {1, 1}}}, {cap: inf, uses: []use{{1, 1}}}}, []float64{30, 70}},
		{"weights count bytes per unit", []float64{100}, []flow{{cap: inf, uses: []use{{0, 2}}}}, []float64{50}},
		{"three on one, one of them also on a second", []float64{90, 20}, []flow{{cap: inf, uses: []use{{0, 1}}}, {cap: inf, uses: []use{{0, 1}}}, {cap: inf, uses: []use{{0, 1}, {1, 1}}}}, []float64{35, 35, 20}},
		{"a flow on nothing is capped only by itself", []float64{100}, []flow{{cap: 7}}, []float64{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := make([]resource, len(tt.caps))
			for i, c := range tt.caps {
				res[i].cap = c
			}
			var fs []*flow
			for i := range tt.flows {
				fs = append(fs, &tt.flows[i])
			}
			shareRates(res, fs, nil)
			var got []float64
			for _, f := range fs {
				got = append(got, f.rate)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(1e-9, 1e-9)); diff != "" {
				t.Errorf("rates (-want +got):\n%s", diff)
			}
		})
	}
}

func loadPort(t *testing.T, rel string) *plan.Plan {
	t.Helper()
	p, err := executor.LoadFile(filepath.Join("..", "tests", "ports", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTimeline(t *testing.T) {
	hw, err := LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	plan := loadPort(t, "single_node/allreduce.plan.json")
	pt, err := PredictSize(plan, 1<<20, executor.Float16, true, hw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := pt.Result.Timeline
	steps := 0
	for _, g := range plan.GPUs {
		for _, tb := range g.ThreadBlocks {
			steps += len(tb.Ops)
		}
	}
	if len(tl.Slices) != steps {
		t.Errorf("%d slices, want one per op: %d", len(tl.Slices), steps)
	}
	if got, want := tl.Total, pt.Time-pt.Result.Launch; math.Abs(got-want) > 1e-9 {
		t.Errorf("Total %.3f, want Time − Launch = %.3f", got, want)
	}
	if tl.Size != 1<<20 || tl.Clock != "us" || tl.Ranks != 8 || tl.Source != "model h100-sxm" {
		t.Errorf("timeline header %+v", *tl)
	}
	last := 0.0
	for _, s := range tl.Slices {
		if s.End < s.Start {
			t.Errorf("slice %+v ends before it starts", s)
		}
		last = math.Max(last, s.End)
	}
	if math.Abs(last-tl.Total) > 1e-9 {
		t.Errorf("last slice ends at %.3f, Total %.3f", last, tl.Total)
	}
	signals := 0
	for _, f := range tl.Flows {
		from, to := tl.Slices[f.From], tl.Slices[f.To]
		if f.Kind != "signal" {
			continue
		}
		signals++
		if from.Rank == to.Rank || (from.Name != "signal" && from.Name != "rlxsignal") || (to.Name != "wait" && to.Name != "rlxwait") {
			t.Errorf("signal flow from %+v to %+v", from, to)
		}
		if to.End < from.End {
			t.Errorf("wait %+v ends before the signal %+v that released it", to, from)
		}
	}
	// Every rank's waits on 7 peers, twice, in each of its 8 blocks.
	if want := 8 * 8 * 7 * 2; signals != want {
		t.Errorf("%d signal flows, want %d", signals, want)
	}
}

func TestDeadlock(t *testing.T) {
	hw, err := LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	p := loadPort(t, "single_node/allreduce.plan.json")
	// Rank 0 never signals: its peers wait forever.
	for i := range p.GPUs[0].ThreadBlocks {
		for j := range p.GPUs[0].ThreadBlocks[i].Ops {
			op := &p.GPUs[0].ThreadBlocks[i].Ops[j]
			if op.Type == plan.OpSignal || op.Type == plan.OpRelaxedSignal {
				op.Type, op.ChannelType, op.ChannelIDs = plan.OpNop, plan.NoChannel, nil
			}
		}
	}
	_, err = PredictSize(p, 1<<20, executor.Float16, true, hw, Options{})
	var de *executor.DeadlockError
	if !errors.As(err, &de) {
		t.Fatalf("error %v, want a deadlock", err)
	}
	if len(de.Blocked) == 0 || de.Blocked[0].Waiting != "memory channel signals" {
		t.Errorf("blocked %+v", de.Blocked)
	}
}

func TestNoNVLS(t *testing.T) {
	hw, err := LoadProfile("a100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	plan := loadPort(t, "single_node/allreduce_nvls_zero_copy.plan.json")
	_, err = PredictSize(plan, 1<<20, executor.Float16, true, hw, Options{})
	if err == nil || err.Error() != "allreduce_nvls_zero_copy: rank 0 uses switch channels (NVLS); hardware profile a100-sxm has no NVLS" {
		t.Errorf("error %v", err)
	}
}
