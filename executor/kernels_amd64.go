//go:build amd64 && !purego

package executor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vectorKernels is whether this CPU (and its OS) runs AVX2 and F16C: read
// once, at start, from CPUID; never changed.
var vectorKernels = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// HasVectorKernels reports whether Add and Reduce run the vector kernels
// of kernels_amd64.s (AVX2 and F16C) on this machine.
func HasVectorKernels() bool { return vectorKernels }

// The kernels (kernels_amd64.s) each take n elements, a multiple of 16
// (each step does 16, in two independent halves of 8 where a vector
// holds 8), at d, x and y.

//go:noescape
func addF32AVX2(d, x, y *uint32, n int)

//go:noescape
func mulF32AVX2(d, x, y *uint32, n int)

// minMaxF32AVX2 is MAX (flip 0) or MIN (flip all ones) of float32 bits.
//
//go:noescape
func minMaxF32AVX2(d, x, y *uint32, n int, flip uint32)

//go:noescape
func addF16AVX2(d, x, y *uint16, n int)

//go:noescape
func mulF16AVX2(d, x, y *uint16, n int)

//go:noescape
func addBF16AVX2(d, x, y *uint16, n int)

// mulBF16AVX2 returns the elements it stored: it stops before the first
// 16 whose float32 products include one below float32's normal range but
// not zero (mulBF16 rounds those from the exact product).
//
//go:noescape
func mulBF16AVX2(d, x, y *uint16, n int) int

// minMax16AVX2 is MAX (flip 0) or MIN (flip 0xffff) of fp16 (nan
// 0x7c00) or bf16 (nan 0x7f80) bits: a value whose bits without the sign
// exceed nan is a NaN.
//
//go:noescape
func minMax16AVX2(d, x, y *uint16, n int, flip, nan uint16)

// The streaming kernels (kernels_amd64.s): the kernels above with
// non-temporal stores, d 32-byte aligned.

//go:noescape
func addF32NT(d, x, y *uint32, n int)

//go:noescape
func mulF32NT(d, x, y *uint32, n int)

//go:noescape
func minMaxF32NT(d, x, y *uint32, n int, flip uint32)

//go:noescape
func addF16NT(d, x, y *uint16, n int)

//go:noescape
func mulF16NT(d, x, y *uint16, n int)

//go:noescape
func addBF16NT(d, x, y *uint16, n int)

//go:noescape
func mulBF16NT(d, x, y *uint16, n int) int

//go:noescape
func minMax16NT(d, x, y *uint16, n int, flip, nan uint16)

// The int32 kernels (kernels_amd64.s): sum and product wrapping, max
// and min signed; 16 elements a step; the NT forms stream.

//go:noescape
func addI32AVX2(d, x, y *uint32, n int)

//go:noescape
func addI32NT(d, x, y *uint32, n int)

//go:noescape
func mulI32AVX2(d, x, y *uint32, n int)

//go:noescape
func mulI32NT(d, x, y *uint32, n int)

//go:noescape
func maxI32AVX2(d, x, y *uint32, n int)

//go:noescape
func maxI32NT(d, x, y *uint32, n int)

//go:noescape
func minI32AVX2(d, x, y *uint32, n int)

//go:noescape
func minI32NT(d, x, y *uint32, n int)

// streamHead is the elements of size bytes before p's next 32-byte
// boundary: where a streaming kernel may start.
func streamHead(p unsafe.Pointer, size int) int {
	return int(-uintptr(p)&31) / size
}

// vec16 runs the vector kernel of t and op over the longest prefix it
// takes and returns its length. With stream, it stores through the
// streaming kernels, the elements before d's first 32-byte boundary
// through the loops.
func vec16(t ElemType, op ReduceOp, d, x, y []uint16, stream bool) int {
	if !vectorKernels || len(d) < 16 {
		return 0
	}
	h := 0
	if stream {
		h = streamHead(unsafe.Pointer(&d[0]), 2)
		if len(d)-h < 16 {
			return 0
		}
		bulk16Go(t, op, d[:h], x[:h], y[:h])
	}
	n := (len(d) - h) &^ 15
	d, x, y = d[h:h+n], x[h:h+n], y[h:h+n]
	d0, x0, y0 := &d[0], &x[0], &y[0]
	switch {
	case op == ReduceSum && t == Float16:
		if stream {
			addF16NT(d0, x0, y0, n)
		} else {
			addF16AVX2(d0, x0, y0, n)
		}
	case op == ReduceSum:
		if stream {
			addBF16NT(d0, x0, y0, n)
		} else {
			addBF16AVX2(d0, x0, y0, n)
		}
	case op == ReduceProd && t == Float16:
		if stream {
			mulF16NT(d0, x0, y0, n)
		} else {
			mulF16AVX2(d0, x0, y0, n)
		}
	case op == ReduceProd:
		mul := mulBF16AVX2
		if stream {
			mul = mulBF16NT
		}
		done := 0
		for done < n {
			done += mul(&d[done], &x[done], &y[done], n-done)
			if done == n {
				break
			}
			// A block with a tiny product: 16 elements the scalar way
			// (n is a multiple of 16; done stays 32-byte aligned for
			// the streaming kernel).
			for i := done; i < done+16; i++ {
				d[i] = mulBF16(x[i], y[i])
			}
			done += 16
		}
	default:
		flip, nan := uint16(0), uint16(0x7c00)
		if op == ReduceMin {
			flip = 0xffff
		}
		if t == BFloat16 {
			nan = 0x7f80
		}
		if stream {
			minMax16NT(d0, x0, y0, n, flip, nan)
		} else {
			minMax16AVX2(d0, x0, y0, n, flip, nan)
		}
	}
	return h + n
}

// vec32 is vec16 for fp32 and int32.
func vec32(t ElemType, op ReduceOp, d, x, y []uint32, stream bool) int {
	if !vectorKernels || (t != Float32 && t != Int32) || len(d) < 16 {
		return 0
	}
	h := 0
	if stream {
		h = streamHead(unsafe.Pointer(&d[0]), 4)
		if len(d)-h < 16 {
			return 0
		}
		bulk32Go(t, op, d[:h], x[:h], y[:h])
	}
	n := (len(d) - h) &^ 15 // a multiple of every kernel's step
	d0, x0, y0 := &d[h], &x[h], &y[h]
	if t == Int32 {
		k := [2][NumReduceOps]func(d, x, y *uint32, n int){
			{addI32AVX2, mulI32AVX2, maxI32AVX2, minI32AVX2},
			{addI32NT, mulI32NT, maxI32NT, minI32NT},
		}
		s := 0
		if stream {
			s = 1
		}
		k[s][op](d0, x0, y0, n)
		return h + n
	}
	switch op {
	case ReduceSum:
		if stream {
			addF32NT(d0, x0, y0, n)
		} else {
			addF32AVX2(d0, x0, y0, n)
		}
	case ReduceProd:
		if stream {
			mulF32NT(d0, x0, y0, n)
		} else {
			mulF32AVX2(d0, x0, y0, n)
		}
	case ReduceMax, ReduceMin:
		flip := uint32(0)
		if op == ReduceMin {
			flip = 0xffffffff
		}
		if stream {
			minMaxF32NT(d0, x0, y0, n, flip)
		} else {
			minMaxF32AVX2(d0, x0, y0, n, flip)
		}
	}
	return h + n
}
