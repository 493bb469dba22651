package executor

import (
	"math"
	"testing"
)

// BenchmarkF16Loop compares the loop of bulk16Go (branch-free, no table)
// with the table and branch it replaced, over 1 MiB of fp16 (in cache:
// the arithmetic, not the memory).
func BenchmarkF16Loop(b *testing.B) {
	const n = 1 << 19
	x, y, d := make([]uint16, n), make([]uint16, n), make([]uint16, n)
	for i := range x {
		x[i], y[i] = uint16(0x3c00+i%1000), uint16(0x4000+i%777)
	}
	var table [1 << 16]uint32
	for h := range table {
		table[h] = refF16ToF32Bits(uint16(h))
	}
	b.Run("branchfree", func(b *testing.B) {
		b.SetBytes(2 * n)
		for range b.N {
			bulk16Go(Float16, ReduceSum, d, x, y)
		}
	})
	b.Run("table", func(b *testing.B) {
		b.SetBytes(2 * n)
		for range b.N {
			for i := range d {
				f := math.Float32frombits(table[x[i]]) + math.Float32frombits(table[y[i]])
				bits := math.Float32bits(f)
				if abs := bits & 0x7fffffff; abs-0x38800000 < 0x477ff000-0x38800000 {
					v := abs - 112<<23
					v += 0xfff + (v>>13)&1
					d[i] = uint16(bits>>16)&0x8000 | uint16(v>>13)
				} else {
					d[i] = refF32ToF16(bits)
				}
			}
		}
	})
	b.Run("vector", func(b *testing.B) {
		b.SetBytes(2 * n)
		for range b.N {
			bulk16(Float16, ReduceSum, d, x, y)
		}
	})
}
