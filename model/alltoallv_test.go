// This file tests the predictions of alltoallv plans for counts: they
// grow with the bytes sent, a call whose bytes go over one link takes
// longer than one that spreads them over every link, the port plan
// across nodes is slower than NVLink, and bad counts are named errors.

package model_test

import (
	"errors"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
)

func predictCounts(t *testing.T, p *plan.Plan, m [][]int64, hw *model.Profile) *model.CountsPoint {
	t.Helper()
	pt, err := model.PredictCounts(p, executor.MatrixCounts(m), executor.Float32, hw, model.Options{})
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	return pt
}

func TestPredictCounts(t *testing.T) {
	t.Parallel()
	const n = 8
	hw := h100(t)
	plan := bundled(t, "alltoallv", map[string]string{"world_size": "8"})
	// One peer pair carries everything: that link bounds the call.
	const total = 8 << 20 / 4 // elements sent in all
	oneLink := executor.UniformMatrix(n, 0)
	oneLink[0][1] = total
	spread := executor.UniformMatrix(n, total/(n*n))

	var last float64
	for _, count := range []int64{0, 1 << 10, 1 << 14, 1 << 18} {
		pt := predictCounts(t, plan, executor.UniformMatrix(n, count), hw)
		if want := uint64(n * n * count * 4); pt.Bytes != want {
			t.Errorf("uniform %d: %d bytes, want %d", count, pt.Bytes, want)
		}
		if pt.Time <= last {
			t.Errorf("uniform %d elements per block: %.2f µs, not more than %.2f µs for fewer", count, pt.Time, last)
		}
		if pt.Time < pt.Result.Launch {
			t.Errorf("uniform %d: time %.2f µs below the launch overhead %.2f", count, pt.Time, pt.Result.Launch)
		}
		last = pt.Time
	}
	one, all := predictCounts(t, plan, oneLink, hw), predictCounts(t, plan, spread, hw)
	if one.Bytes != all.Bytes {
		t.Fatalf("the two matrices send %d and %d bytes", one.Bytes, all.Bytes)
	}
	if one.Time <= all.Time {
		t.Errorf("8 MiB over one link: %.2f µs, not more than %.2f µs over every link", one.Time, all.Time)
	}
	// Across two nodes the port plan's blocks between nodes go over the
	// NICs, slower than NVLink within a node.
	cross := bundled(t, "alltoallv_port", map[string]string{"world_size": "8", "ranks_per_node": "4"})
	opts := model.Options{RanksPerNode: 4}
	pc, err := model.PredictCounts(cross, executor.MatrixCounts(spread), executor.Float32, hw, opts)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Time <= all.Time {
		t.Errorf("two nodes: %.2f µs, not more than %.2f µs within one node", pc.Time, all.Time)
	}
}

func TestPredictCountsErrors(t *testing.T) {
	t.Parallel()
	hw := h100(t)
	plan := bundled(t, "alltoallv", map[string]string{"world_size": "4"})
	bad := executor.MatrixCounts(executor.UniformMatrix(4, 8))
	bad.Recv[2][1] = 9
	_, err := model.PredictCounts(plan, bad, executor.Float32, hw, model.Options{})
	if !errors.Is(err, executor.ErrCountsMismatch) {
		t.Errorf("mismatched counts: got %v, want ErrCountsMismatch", err)
	}
	static := bundled(t, "alltoall", map[string]string{"world_size": "4"})
	if _, err := model.PredictCounts(static, executor.MatrixCounts(executor.UniformMatrix(4, 8)), executor.Float32, hw, model.Options{}); err == nil {
		t.Error("a static alltoall plan with counts: no error")
	}
}
