// This file tests --fit on a two-node run: Fit on nccl-tests output of the
// MSCCL++ default two-node small-message allreduce (testdata/
// nccl-tests-2x8.txt, rewritten with -update) adjusts the cross-node
// parameters and brings the error down.

package model_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
)

// twoNodeTruth is the profile the synthetic two-node results were
// predicted with: h100-sxm with a slower host side and PCIe.
func twoNodeTruth(tb testing.TB) *model.Profile {
	hw := h100(tb).Clone()
	hw.Params.ProxyPollUS.Value = 9
	hw.Params.PCIeLatencyUS.Value = 0.8
	return hw
}

// twoNodeResults writes nccl-tests output of plan at sizes 1 KiB to
// 64 KiB on 2 × 8 ranks, the times predicted with truth.
func twoNodeResults(tb testing.TB, p *plan.Plan, truth *model.Profile) string {
	var b strings.Builder
	b.WriteString("# Synthetic: not a measurement. The times are mscclgo's model of the plan\n")
	b.WriteString("# allreduce_hier_packet_2x8gpu_small on h100-sxm with proxy_poll_us 9 and\n")
	b.WriteString("# pcie_latency_us 0.8 (go test ./model -run TestFitMultiNode -update), in the\n")
	b.WriteString("# format of nccl-tests' all_reduce_perf on two nodes of 8 GPUs; the out-of-place\n")
	b.WriteString("# columns repeat the in-place ones.\n")
	b.WriteString("# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 1\n#\n# Using devices\n")
	for r := 0; r < 16; r++ {
		fmt.Fprintf(&b, "#  Rank %2d Group  0 Pid %6d on      node%d device  %d [0x%02x] NVIDIA H100 80GB HBM3\n", r, 4000+r, r/8, r%8, 0x18+r%8)
	}
	b.WriteString("#\n#                                                              out-of-place                       in-place\n")
	b.WriteString("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n")
	b.WriteString("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
	var busSum float64
	n := 0
	for s := uint64(1 * kib); s <= 64*kib; s *= 2 {
		pt := predict(tb, p, s, truth, model.Options{NoTimeline: true, RanksPerNode: 8})
		col := fmt.Sprintf("%8.2f  %6.2f  %6.2f  %5d", pt.Time, pt.AlgBW, pt.BusBW, 0)
		fmt.Fprintf(&b, "%12d  %12d      half     sum      -1  %s  %s\n", s, s/2, col, col)
		busSum += pt.BusBW
		n++
	}
	fmt.Fprintf(&b, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %.4g\n#\n", busSum/float64(n))
	return b.String()
}

func TestFitMultiNode(t *testing.T) {
	plan := hierSmall2x8(t)
	path := filepath.Join("testdata", "nccl-tests-2x8.txt")
	want := twoNodeResults(t, plan, twoNodeTruth(t))
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Fatalf("%s is stale (go test ./model -run TestFitMultiNode -update rewrites it) (-want +got):\n%s", path, diff)
	}
	meas, err := model.ParseResults(path, strings.NewReader(string(data)), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(meas) != 7 {
		t.Fatalf("%d rows, want 7 (1 KiB to 64 KiB)", len(meas))
	}
	hw := h100(t)
	opts := model.Options{RanksPerNode: 8}
	if got := model.DefaultFitParams(plan, hw, opts); !cmp.Equal(got, model.CrossNodeFitParams()) {
		t.Errorf("default fit parameters of a two-node plan: %v, want the cross-node ones %v", got, model.CrossNodeFitParams())
	}
	res, err := model.Fit(plan, meas, hw, opts, model.FitOptions{DType: executor.Float16, InPlace: true, Source: path})
	if err != nil {
		t.Fatal(err)
	}
	var m, before, after []float64
	for _, p := range res.Points {
		m, before, after = append(m, p.Time), append(before, p.Before), append(after, p.After)
	}
	_, worstBefore := model.ErrorSummary(before, m)
	_, worstAfter := model.ErrorSummary(after, m)
	if worstBefore < 0.1 || worstAfter > 0.02 {
		t.Errorf("worst error before %.3f (want ≥ 0.1), after %.3f (want ≤ 0.02)", worstBefore, worstAfter)
	}
	for _, name := range model.CrossNodeFitParams() {
		p, _ := res.Profile.Params.Get(name)
		if !strings.HasPrefix(p.Source, "fitted to "+path+" (7 points") {
			t.Errorf("%s: source %q does not say it was fitted", name, p.Source)
		}
	}
	// The fit need not recover each term (several trade off against each
	// other at these sizes), but it must move the host side towards the
	// truth's slower one.
	if got := res.Profile.Params.ProxyPollUS.Value; got <= hw.Params.ProxyPollUS.Value || math.IsNaN(got) {
		t.Errorf("fitted proxy_poll_us %.2f, want above the bundled %.2f (the results were made with 9)", got, hw.Params.ProxyPollUS.Value)
	}
	if got := res.Profile.Params.OpUS.Value; got != hw.Params.OpUS.Value {
		t.Errorf("op_us changed to %v: a two-node fit adjusts the cross-node terms only", got)
	}
}
