package harness_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// benchRanks and benchBytes are the allreduce benchmark's shape: the port
// of MSCCL++'s single_node/allreduce.py on 8 ranks, 64 MiB of float32 per
// rank, in place as the plan says.
const (
	benchRanks = 8
	benchBytes = 64 << 20
)

// allreducePlan compiles tests/ports/single_node/allreduce.star for 8
// ranks.
func allreducePlan(b *testing.B) *plan.Plan {
	b.Helper()
	res, err := starlib.Eval(starlib.DirSource("../tests/ports/single_node"), "allreduce.star",
		starlib.Options{Defines: map[string]string{"num_gpus": "8"}})
	if err != nil {
		b.Fatal(err)
	}
	data, err := res.Programs[0].Plan()
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Load(data)
	if err != nil {
		b.Fatal(err)
	}
	if len(p.GPUs) != benchRanks || p.Collective != "allreduce" {
		b.Fatalf("plan %q: %s on %d ranks, want allreduce on %d", p.Name, p.Collective, len(p.GPUs), benchRanks)
	}
	return p
}

// BenchmarkAllreduce8 runs the same 8-rank, 64 MiB float32 allreduce on
// the CPU backend and as direct Go code (serial, and split over
// GOMAXPROCS goroutines), so that the backend's overhead over the
// arithmetic can be read off: compare the ns/op (or the MB/s, the
// per-rank message size over the time) of the sub-benchmarks. Inputs are
// refilled before every launch with the timer stopped; every launch is
// checked once at the end.
//
//	go test ./harness -run '^$' -bench Allreduce8 -benchtime 3x
func BenchmarkAllreduce8(b *testing.B) {
	plan := allreducePlan(b)
	layout, err := harness.PlanLayout(plan, benchBytes, executor.Float32, plan.Inplace)
	if err != nil {
		b.Fatal(err)
	}
	bufs := layout.Alloc()

	b.Run("cpu-backend", func(b *testing.B) {
		inst, err := executor.Instantiate(plan, layout.Sizes)
		if err != nil {
			b.Fatal(err)
		}
		sess, err := cpu.New().Open(inst, executor.Options{DType: executor.Float32})
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		b.SetBytes(benchBytes)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			layout.FillInputs(bufs, i)
			b.StartTimer()
			if err := sess.Launch(context.Background(), bufs); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		checkBench(b, layout, bufs, b.N-1)
	})

	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		name := "direct-serial"
		if workers > 1 {
			name = "direct-parallel"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(benchBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				layout.FillInputs(bufs, i)
				b.StartTimer()
				directAllreduce(bufs, workers)
			}
			b.StopTimer()
			checkBench(b, layout, bufs, b.N-1)
		})
	}
}

// checkBench fails b when the outputs of iteration seq are wrong.
func checkBench(b *testing.B, layout *harness.Layout, bufs []executor.RankBuffers, seq int) {
	b.Helper()
	wrong, err := layout.Check(bufs, seq)
	if err != nil {
		b.Fatal(err)
	}
	for r, n := range wrong {
		if n != 0 {
			b.Fatalf("rank %d: %d wrong elements", r, n)
		}
	}
}

// directAllreduce is the allreduce written directly in Go on float32
// slices: every element of every rank's output becomes the sum of that
// element of the inputs, in rank order, with the element range split over
// workers goroutines and summed a cache-sized block at a time. Outputs may
// alias inputs (a block is read from every input before it is written).
func directAllreduce(bufs []executor.RankBuffers, workers int) {
	const block = 4096
	ins := make([][]float32, len(bufs))
	outs := make([][]float32, len(bufs))
	for r, b := range bufs {
		ins[r] = asFloat32(b.Input)
		outs[r] = asFloat32(b.Output)
	}
	n := len(ins[0])
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*n/workers, (w+1)*n/workers
		wg.Go(func() {
			var acc [block]float32
			for b := lo; b < hi; b += block {
				e := min(b+block, hi)
				a := acc[:e-b]
				copy(a, ins[0][b:e])
				for _, in := range ins[1:] {
					for i, x := range in[b:e] {
						a[i] += x
					}
				}
				for _, out := range outs {
					copy(out[b:e], a)
				}
			}
		})
	}
	wg.Wait()
}

// asFloat32 views little-endian float32 bytes (allocated by make, so
// aligned) as a []float32.
func asFloat32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
