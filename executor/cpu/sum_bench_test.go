package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
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

// BenchmarkReduceSplit is one thread block's re of two sources of
// 64 MiB into the output in each element type, on one goroutine
// (threads=1) and split over every core (threads=0, the default), beside
// a copy of 64 MiB on one core and split over every core: SetBytes
// counts the result's bytes, so that each row's MB/s over its copy's is
// the ratio to memcpy. TestReduceSpeedTable (make bench) prints
// the same figures as best-of ratios.
//
//	go test ./executor/cpu -run '^$' -bench ReduceSplit -benchtime 5x
func BenchmarkReduceSplit(b *testing.B) {
	r := newReduceRig(b, 64<<20)
	for _, threads := range []int{1, 0} {
		b.Run(fmt.Sprintf("threads=%d/memcpy", threads), func(b *testing.B) {
			b.SetBytes(int64(r.size))
			for range b.N {
				r.copy(threads)
			}
		})
		for _, dt := range reduceRigTypes {
			b.Run(fmt.Sprintf("threads=%d/%s", threads, dt), func(b *testing.B) {
				s := r.open(b, dt, threads)
				b.SetBytes(int64(r.size))
				b.ResetTimer()
				for range b.N {
					r.launch(b, s)
				}
			})
		}
	}
}

// TestReduceSpeedTable is make bench's table of the CPU backend's reduce
// op (issue 46): one thread block's re of two sources of 64 MiB in each
// element type, on one goroutine and split over every core, each as a
// fraction of Go's copy of 64 MiB on one core and on every core, the best
// of 11 alternations of the copy and the op (the machine is shared); and
// on one goroutine by the process's CPU time (Linux), which other
// processes' load lengthens least. A reduction reads twice what it
// writes; with streaming stores (64 MiB streams) memory bounds it near
// 67% of memcpy, without them near 50%. It prints and asserts nothing;
// it runs only with MSCCLGO_SPEED_TABLE=1.
func TestReduceSpeedTable(t *testing.T) {
	if os.Getenv("MSCCLGO_SPEED_TABLE") == "" {
		t.Skip("set MSCCLGO_SPEED_TABLE=1 (make bench)")
	}
	r := newReduceRig(t, 64<<20)
	wall := func(f func()) time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
	p := runtime.GOMAXPROCS(0)
	fmt.Printf("\n%-26s %9s %9s %7s %9s %9s %7s %9s %9s %7s\n", "cpu re 64 MiB, 2 sources", "1 core", "memcpy", "ratio",
		fmt.Sprintf("%d cores", p), "memcpy", "ratio", "1 core", "memcpy", "CPU time")
	gbs := func(d time.Duration) float64 { return float64(r.size) / d.Seconds() / 1e9 }
	for _, dt := range reduceRigTypes {
		var row [3][2]float64 // [one, all, one by CPU time][copy, op] in GB/s
		for k, threads := range []int{1, 0} {
			s := r.open(t, dt, threads)
			bc, bo := time.Duration(1<<62), time.Duration(1<<62)
			cc, co := time.Duration(1<<62), time.Duration(1<<62)
			for range 11 {
				bc = min(bc, wall(func() { r.copy(threads) }))
				bo = min(bo, wall(func() { r.launch(t, s) }))
				if threads == 1 {
					if c, ok := procCPU(func() { r.copy(1) }); ok && c > 0 {
						cc = min(cc, c)
					}
					if c, ok := procCPU(func() { r.launch(t, s) }); ok && c > 0 {
						co = min(co, c)
					}
				}
			}
			row[k] = [2]float64{gbs(bc), gbs(bo)}
			if threads == 1 {
				row[2] = [2]float64{gbs(cc), gbs(co)}
			}
		}
		fmt.Printf("%-26s %5.2fGB/s %5.2fGB/s %6.1f%% %5.2fGB/s %5.2fGB/s %6.1f%% %5.2fGB/s %5.2fGB/s %6.1f%%\n", fmt.Sprintf("%s sum", dt),
			row[0][1], row[0][0], 100*row[0][1]/row[0][0], row[1][1], row[1][0], 100*row[1][1]/row[1][0],
			row[2][1], row[2][0], 100*row[2][1]/row[2][0])
	}
	fmt.Printf("(GB/s of result bytes; vector kernels (AVX2, F16C): %v; load average %s)\n", executor.HasVectorKernels(), loadAverage())
}

// loadAverage is the first field of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

var reduceRigTypes = []executor.ElemType{executor.Float32, executor.Float16, executor.BFloat16, executor.Int32}

// reduceRig holds the buffers of BenchmarkReduceSplit and
// TestReduceSpeedTable, made and touched once.
type reduceRig struct {
	size int
	bufs []executor.RankBuffers
	x, d []byte // the copy's
}

func newReduceRig(tb testing.TB, size int) *reduceRig {
	r := &reduceRig{size: size, bufs: []executor.RankBuffers{{Input: make([]byte, 2*size), Output: make([]byte, size)}},
		x: make([]byte, size), d: make([]byte, size)}
	for i := range r.x {
		r.x[i] = byte(i)
	}
	copy(r.d, r.x)
	for i := 0; i < len(r.bufs[0].Input); i += 4 {
		r.bufs[0].Input[i+1] = byte(i>>8) | 0x10 // finite values in every type
		r.bufs[0].Input[i+3] = 0x3c
	}
	copy(r.bufs[0].Output, r.x)
	return r
}

// copy copies size bytes on one goroutine (threads 1) or split over
// every core (threads 0), as the op splits.
func (r *reduceRig) copy(threads int) {
	parts := threads
	if parts == 0 {
		parts = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	for _, lr := range splitRanges(r.size, parts) {
		wg.Go(func() { copy(r.d[lr[0]:lr[1]], r.x[lr[0]:lr[1]]) })
	}
	wg.Wait()
}

// open opens the re of dt and launches it once.
func (r *reduceRig) open(tb testing.TB, dt executor.ElemType, threads int) *session {
	bl := newBuilder(1, 0)
	size := uint64(r.size)
	bl.tb(0, op(plan.OpReduce, 0, nil, rs(L(in, 0, size), L(in, size, size)), rs(L(out, 0, size))))
	s := openT(tb, bl.inst, executor.Options{DType: dt, DeadlockTimeout: 5 * time.Second, Threads: threads}, schedule{})
	r.launch(tb, s)
	return s
}

func (r *reduceRig) launch(tb testing.TB, s *session) {
	if err := s.Launch(context.Background(), r.bufs); err != nil {
		tb.Fatal(err)
	}
}
