// This file holds the benchmarks of the model: a 64-rank plan predicted
// at the 21 sizes 1 KiB to 1 GiB, against instantiating it at the same
// sizes (the baseline of the ratio).

package model_test

import (
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
)

// sizes21 are the sizes 1 KiB, 2 KiB, ..., 1 GiB.
func sizes21() []uint64 {
	var s []uint64
	for x := uint64(1024); x <= 1<<30; x *= 2 {
		s = append(s, x)
	}
	return s
}

// plan64 is the bundled hierarchical LL allreduce on 8 nodes of 8 ranks
// (the Simple one, allreduce_hier, needs 4 KiB at least at 64 ranks).
func plan64(b *testing.B) *plan.Plan {
	return bundled(b, "allreduce_hier_packet", map[string]string{"world_size": "64", "ranks_per_node": "8",
		"min_message_size": "0", "max_message_size": "18446744073709551615"})
}

// BenchmarkModel64Ranks predicts a 64-rank plan at 21 sizes (one
// iteration is the whole sweep, as `mscclgo model -b 1K -e 1G` runs it).
func BenchmarkModel64Ranks(b *testing.B) {
	p := plan64(b)
	hw := h100(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pts, skipped, err := model.Sweep(p, sizes21(), executor.Float16, p.Inplace, hw, model.Options{NoTimeline: true})
		if err != nil || len(pts) != 21 {
			b.Fatalf("%d points, skipped %v, %v", len(pts), skipped, err)
		}
	}
}

// BenchmarkInstantiate64Ranks is the baseline: instantiating the same
// plan at the same sizes.
func BenchmarkInstantiate64Ranks(b *testing.B) {
	p := plan64(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sizes21() {
			l, err := executor.PlanLayout(p, s, executor.Float16, p.Inplace)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := executor.Instantiate(p, l.Sizes); err != nil {
				b.Fatal(err)
			}
		}
	}
}
