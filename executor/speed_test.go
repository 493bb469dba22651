package executor

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// BenchmarkAddBulk is Reduce of 64 MiB (dst = a op b) in every type and
// op beside Go's copy of 64 MiB, on one core (1core) and split in equal
// parts over GOMAXPROCS goroutines (allcores). SetBytes counts the
// result's bytes, as a copy counts the bytes it writes, so the MB/s of a
// row over its memcpy's is the ratio (a reduction moves half as
// much again: two reads and a write).
//
//	go test ./executor -run '^$' -bench AddBulk -benchtime 5x
func BenchmarkAddBulk(b *testing.B) {
	const size = 64 << 20
	x, y, d := make([]byte, size), make([]byte, size), make([]byte, size)
	for _, t := range []ElemType{Float16, BFloat16, Float32, Int32} {
		for i := 0; i < size/t.Size(); i += 97 {
			t.SetFloat64(x, i, float64(i%1000)/7)
			t.SetFloat64(y, i, float64(i%999)/3)
		}
	}
	for _, cores := range []int{1, runtime.GOMAXPROCS(0)} {
		name := "1core"
		if cores > 1 {
			name = "allcores"
		}
		b.Run(name+"/memcpy", func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				splitRun(cores, size, 64, func(lo, hi int) { copy(d[lo:hi], x[lo:hi]) })
			}
		})
		for _, t := range []ElemType{Float16, BFloat16, Float32, Int32} {
			for _, op := range []ReduceOp{ReduceSum, ReduceProd, ReduceMax, ReduceMin} {
				b.Run(fmt.Sprintf("%s/%s/%v", name, t, op), func(b *testing.B) {
					b.SetBytes(size)
					for range b.N {
						splitRun(cores, size, 64, func(lo, hi int) { t.Reduce(op, d[lo:hi], x[lo:hi], y[lo:hi]) })
					}
				})
			}
		}
	}
}

// splitRun runs f over parts equal ranges of [0, n) (multiples of align but
// the last) at once, one goroutine each, and waits for them.
func splitRun(parts, n, align int, f func(lo, hi int)) {
	if parts <= 1 {
		f(0, n)
		return
	}
	step := (n/parts + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}
