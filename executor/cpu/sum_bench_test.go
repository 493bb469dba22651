package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
)

// BenchmarkSum compares the block reduction of 8 sources of 64 KiB with
// the chain of ElemType.Add it replaces, for the types it takes, in one
// run.
//
//	go test ./executor/cpu -run '^$' -bench Sum
func BenchmarkSum(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
		srcs := make([]span, 8)
		for k := range srcs {
			srcs[k] = span{b: make([]byte, reduceBlock)}
			for i := 0; i < reduceBlock; i += dt.Size() {
				dt.SetFloat64(srcs[k].b, i/dt.Size(), rng.NormFloat64())
			}
		}
		res := make([]byte, reduceBlock)
		acc := make([]float32, sumRun)
		b.Run(fmt.Sprintf("%s/runs", dt), func(b *testing.B) {
			b.SetBytes(reduceBlock * 8)
			for range b.N {
				sumRuns(dt, res, srcs, 0, reduceBlock, func() []float32 { return acc })
			}
		})
		b.Run(fmt.Sprintf("%s/add", dt), func(b *testing.B) {
			b.SetBytes(reduceBlock * 8)
			for range b.N {
				dt.Add(res, srcs[0].b, srcs[1].b)
				for _, s := range srcs[2:] {
					dt.Add(res, res, s.b)
				}
			}
		})
	}
}
