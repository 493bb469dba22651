package cpu

import (
	"math"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
)

// sum.go reduces blocks of elements: ((src0 ⊕ src1) ⊕ src2) ⊕ … in the
// order of docs/semantics.md §2.6, with the device's rounding after
// every addition (executor.ElemType.Add), one element type dispatch per
// block instead of one per element. fp16 accumulates in float32 runs of
// sumRun elements: each source is widened once, added, and the sum
// rounded back to fp16 precision in place (still a float32, exactly an
// fp16 value), so that the result is bit for bit what Add gives, pair
// after pair. float32 adds straight into the destination and makes a NaN
// result canonical once, at the end: a NaN operand or sum stays NaN in
// every later addition, whatever its payload. bf16 keeps Add: its
// widening is a shift, and runs measured slower (BenchmarkSum).
//
// Where the executor has its vector kernels (executor.HasVectorKernels:
// AVX2 and F16C) no type takes any of this: Add pair after pair over the
// block, which stays in L1, measured 5 (fp32) to 20 (fp16) times faster
// than these runs (BenchmarkSum, 8 sources of 64 KiB); int32 has its
// vector kernels too.

// sumRun is the elements of one run: its float32 accumulator stays in L1.
const sumRun = 1024

// sumElems stores the sum of srcs[k][off:e] (k in order) into res, which
// may be srcs[0] or srcs[1] but no later source; acc returns a run of
// sumRun float32s for fp16 sums (the caller's, so that no goroutine grows
// its stack for it). It returns false when it does not (bf16, any type
// under the vector kernels, or operands not aligned to their element):
// the caller then adds with dt.Add.
func sumElems(dt executor.ElemType, res []byte, srcs []span, off, e int, acc func() []float32) bool {
	if executor.HasVectorKernels() {
		return false
	}
	return sumRuns(dt, res, srcs, off, e, acc)
}

// sumRuns is sumElems whatever the CPU: the runs above.
func sumRuns(dt executor.ElemType, res []byte, srcs []span, off, e int, acc func() []float32) bool {
	if !sumAligned(res, dt) {
		return false
	}
	for _, s := range srcs {
		if !sumAligned(s.b[off:e], dt) {
			return false
		}
	}
	n := (e - off) / dt.Size()
	switch dt {
	case executor.Float32:
		d := u32s(res, n)
		for a := 0; a < n; a += sumRun {
			b := min(a+sumRun, n)
			var run [maxSumSources][]uint32
			k := 0
			for _, s := range srcs {
				if k == len(run) {
					sumF32(d[a:b], run[:k])
					run[0], k = d[a:b], 1
				}
				run[k] = u32s(s.b[off:], n)[a:b]
				k++
			}
			sumF32(d[a:b], run[:k])
			canonF32(d[a:b])
		}
	case executor.Int32:
		d := u32s(res, n)
		addI32(d, u32s(srcs[0].b[off:], n), u32s(srcs[1].b[off:], n))
		for _, s := range srcs[2:] {
			addI32(d, d, u32s(s.b[off:], n))
		}
	case executor.Float16:
		buf := acc()
		d := u16s(res, n)
		for a := 0; a < n; a += sumRun {
			b := min(a+sumRun, n)
			r := buf[:b-a]
			widenF16(r, u16s(srcs[0].b[off:], n)[a:b])
			for _, s := range srcs[1:] {
				addRoundF16(r, u16s(s.b[off:], n)[a:b])
			}
			narrowF16(d[a:b], r)
		}
	default:
		return false
	}
	return true
}

func sumAligned(b []byte, dt executor.ElemType) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(dt.Size()) == 0
}

// u32s and u16s view the first n elements of b (little-endian host,
// aligned: checked by sumElems).
func u32s(b []byte, n int) []uint32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b[:4*n]))), n)
}

func u16s(b []byte, n int) []uint16 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b[:2*n]))), n)
}

// maxSumSources bounds the sources sumF32 takes at once.
const maxSumSources = 16

// sumF32 stores ((s[0]+s[1])+s[2])+… into d (at least two sources; d may
// be s[0] or s[1]), folding up to four sources per pass over d, so that
// d is loaded and stored a third as often as one addF32 per source.
func sumF32(d []uint32, s [][]uint32) {
	k := min(len(s), 4)
	switch k {
	case 2:
		addF32(d, s[0], s[1])
	case 3:
		add3F32(d, s[0], s[1], s[2])
	default:
		add4F32(d, s[0], s[1], s[2], s[3])
	}
	for rest := s[k:]; len(rest) > 0; {
		switch len(rest) {
		case 1:
			addF32(d, d, rest[0])
			rest = nil
		case 2:
			add3F32(d, d, rest[0], rest[1])
			rest = nil
		default:
			add4F32(d, d, rest[0], rest[1], rest[2])
			rest = rest[3:]
		}
	}
}

// f32of is the float32 of bits v.
func f32of(v uint32) float32 { return math.Float32frombits(v) }

// add3F32 stores (x+y)+z into d, each sum rounded to float32.
func add3F32(d, x, y, z []uint32) {
	x, y, z = x[:len(d)], y[:len(d)], z[:len(d)]
	for i := range d {
		t := float32(f32of(x[i]) + f32of(y[i]))
		d[i] = math.Float32bits(float32(t + f32of(z[i])))
	}
}

// add4F32 stores ((w+x)+y)+z into d, each sum rounded to float32.
func add4F32(d, w, x, y, z []uint32) {
	w, x, y, z = w[:len(d)], x[:len(d)], y[:len(d)], z[:len(d)]
	for i := range d {
		t := float32(f32of(w[i]) + f32of(x[i]))
		t = float32(t + f32of(y[i]))
		d[i] = math.Float32bits(float32(t + f32of(z[i])))
	}
}

// addF32 stores x+y into d, float32 bits; NaN payloads are left as the
// hardware makes them (canonF32 fixes them).
func addF32(d, x, y []uint32) {
	x = x[:len(d)]
	y = y[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, xx, yy := d[i:i+4:i+4], x[i:i+4:i+4], y[i:i+4:i+4]
		dd[0] = math.Float32bits(math.Float32frombits(xx[0]) + math.Float32frombits(yy[0]))
		dd[1] = math.Float32bits(math.Float32frombits(xx[1]) + math.Float32frombits(yy[1]))
		dd[2] = math.Float32bits(math.Float32frombits(xx[2]) + math.Float32frombits(yy[2]))
		dd[3] = math.Float32bits(math.Float32frombits(xx[3]) + math.Float32frombits(yy[3]))
	}
	for ; i < len(d); i++ {
		d[i] = math.Float32bits(math.Float32frombits(x[i]) + math.Float32frombits(y[i]))
	}
}

// canonF32 makes every NaN the canonical 0x7fffffff (as PTX does).
func canonF32(d []uint32) {
	for i, v := range d {
		if v&0x7fffffff > 0x7f800000 {
			d[i] = 0x7fffffff
		}
	}
}

func addI32(d, x, y []uint32) {
	x = x[:len(d)]
	y = y[:len(d)]
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

// widenF16 converts fp16 bits to float32, exactly (executor's table).
func widenF16(d []float32, h []uint16) {
	h = h[:len(d)]
	for i, v := range h {
		d[i] = executor.F16ToF32(v)
	}
}

// addRoundF16 adds h to d and rounds each sum to fp16 precision, to
// nearest even, as executor.F32ToF16 followed by executor.F16ToF32 (a
// NaN stays a NaN).
func addRoundF16(d []float32, h []uint16) {
	h = h[:len(d)]
	for i, v := range h {
		s := math.Float32bits(d[i] + executor.F16ToF32(v))
		if abs := s & 0x7fffffff; abs-0x38800000 < 0x477ff000-0x38800000 {
			// A normal fp16 result: round off the 13 low mantissa bits.
			abs = (abs + 0xfff + (abs>>13)&1) &^ 0x1fff
			d[i] = math.Float32frombits(s&0x80000000 | abs)
		} else {
			d[i] = executor.F16ToF32(executor.F32ToF16(math.Float32frombits(s)))
		}
	}
}

// narrowF16 stores float32 values that are exactly fp16 values (or NaN)
// as fp16 bits.
func narrowF16(d []uint16, f []float32) {
	f = f[:len(d)]
	for i, v := range f {
		s := math.Float32bits(v)
		if abs := s & 0x7fffffff; abs-0x38800000 < 0x477ff000-0x38800000 {
			d[i] = uint16(s>>16)&0x8000 | uint16((abs-112<<23)>>13)
		} else {
			d[i] = executor.F32ToF16(v)
		}
	}
}
