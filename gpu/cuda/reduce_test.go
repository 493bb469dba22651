//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

// TestReduceOps runs prod, max and min (and sum) through the CUDA
// backend's launch path (gorgonia.org/cu, mg_args.redop; the fake driver
// runs the g++-built kernel) on a Simple and an LL plan in every element
// type, against the CPU backend, with the integer fill.
func TestReduceOps(t *testing.T) {
	t.Parallel()
	plans := map[string]map[string]string{
		"allreduce_rsag":   {"world_size": "2", "min_message_size": "0", "nblocks": "2"},
		"allreduce_packet": {"world_size": "2"},
	}
	for name, defs := range plans {
		p := gputest.AlgorithmPlan(t, name, defs)
		for _, dt := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32, executor.Int32} {
			size := harness.CheckSizes(p, dt, 1<<13, 1)[0]
			for op := executor.ReduceSum; op < executor.NumReduceOps; op++ {
				c := gputest.Case{Plan: p, Size: size, DType: dt, InPlace: p.Inplace, Launches: 2, Timeout: 5 * time.Second,
					Reduce: op, Inputs: func(r, it int, in []byte) { harness.FillWith(in, dt, r, it, harness.IntegerFill) }}
				t.Run(fmt.Sprintf("%s/%s/%v", name, dt, op), func(t *testing.T) {
					if !runCase(t, c, "reduction") {
						t.Fatal("deadlock")
					}
				})
			}
		}
	}
}
