// This file tests the results parser and the profile fit.

package model_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
)

const ncclTestsOutput = `# nThread 1 nGpus 8 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    15.02    0.07    0.12      0    14.80    0.07    0.12      0
        2048           512     float     sum      -1    15.40    0.13    0.23      0    15.10    0.14    0.24      0
# Avg bus bandwidth    : 0.18
`

const runOutput = `# mscclgo run plan.json: plan "p", collective allreduce, 8 ranks, protocol LL
#       size         count      type   redop    root     time   algbw   busbw #wrong
        4096          2048      half     sum      -1    10.50    0.39    0.68      0
# skipped size 8192: whatever
# Out of bounds values : 0 OK
`

func TestParseResults(t *testing.T) {
	tests := []struct {
		name, data string
		inPlace    bool
		want       []model.Measurement
		err        string
	}{
		{"nccl-tests out of place", ncclTestsOutput, false, []model.Measurement{{Size: 1024, Time: 15.02, Line: 6}, {Size: 2048, Time: 15.40, Line: 7}}, ""},
		{"nccl-tests in place", ncclTestsOutput, true, []model.Measurement{{Size: 1024, Time: 14.80, Line: 6}, {Size: 2048, Time: 15.10, Line: 7}}, ""},
		{"mscclgo run", runOutput, true, []model.Measurement{{Size: 4096, Time: 10.50, Line: 3}}, ""},
		{"bad time", "1024 256 float sum -1 -3 0 0 0\n", false, nil, "r.txt:1: time \"-3\": want a positive number of µs"},
		{"no rows", "# nothing\nhello\n", false, nil, "r.txt: no result rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := model.ParseResults("r.txt", strings.NewReader(tt.data), tt.inPlace)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFit fits a profile to "measurements" predicted with a changed
// profile: the fit must bring the error down.
func TestFit(t *testing.T) {
	plan := bundled(t, "allreduce_rsag", map[string]string{"world_size": "8", "min_message_size": "0"})
	hw := h100(t)
	truth := hw.Clone()
	truth.Params.GraphLaunchUS.Value = 4.5
	truth.Params.NVLinkEfficiency.Value = 0.6
	var meas []model.Measurement
	for s := uint64(1 << 10); s <= 1<<28; s *= 16 {
		pt := predict(t, plan, s, truth, model.Options{NoTimeline: true})
		meas = append(meas, model.Measurement{Size: s, Time: pt.Time})
	}
	res, err := model.Fit(plan, meas, hw, model.Options{}, model.FitOptions{DType: executor.Float16, InPlace: plan.Inplace,
		Params: []string{"graph_launch_us", "nvlink_efficiency"}, Source: "synthetic"})
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
	if got := res.Profile.Params.GraphLaunchUS; got.Value < 4.3 || got.Value > 4.7 || !strings.HasPrefix(got.Source, "fitted to synthetic (5 points") {
		t.Errorf("fitted graph_launch_us %+v, want about 4.5 with its source", got)
	}
	if hw.Params.GraphLaunchUS.Value != 2.0 {
		t.Errorf("Fit changed its input profile")
	}
	if _, err := model.Fit(plan, meas, hw, model.Options{}, model.FitOptions{Params: []string{"warp_speed"}}); err == nil || !strings.Contains(err.Error(), `unknown parameter "warp_speed"`) {
		t.Errorf("unknown parameter: %v", err)
	}
}
