//go:build cuda

package cuda

import (
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
)

// BenchmarkBackToBack launches the plan of MSCCLGO_BENCH_PLAN at
// MSCCLGO_BENCH_SIZE bytes (float16) on device 0 back to back, with and
// without graph capture (gpu/bench/run.sh runs it on a GPU). Block size:
// MSCCLGO_BENCH_THREADS, else the plan's (the test block size on the fake
// driver).
func BenchmarkBackToBack(b *testing.B) {
	plan, size, threads, ok, err := gputest.BenchEnv()
	if err != nil {
		b.Fatal(err)
	}
	if !ok {
		b.Skip("MSCCLGO_BENCH_PLAN not set: no plan to run")
	}
	if threads == 0 && fake() {
		threads = testThreads()
	}
	for _, g := range []bool{false, true} {
		b.Run(fmt.Sprintf("graph=%v", g), func(b *testing.B) {
			be := gpu.New(gpu.Config{Name: "gpu", Threads: threads, Graph: g, Open: func() (gpu.Driver, error) { return Open(0) }})
			gputest.BackToBack(b, be, plan, size)
		})
	}
}
