package executor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The references below are the conversions as they were written before
// the bulk kernels (a loop and branches, one case at a time): the
// branch-free conversions and the vector kernels must agree with them on
// every bit.

func refF16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return sign | 0x7f800000 | mant<<13
	case exp != 0:
		return sign | (exp+112)<<23 | mant<<13
	case mant == 0:
		return sign
	}
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}

func refF32ToF16(x uint32) uint16 {
	sign := uint16(x>>16) & 0x8000
	x &= 0x7fffffff
	switch {
	case x > 0x7f800000:
		return 0x7fff
	case x >= 0x477ff000:
		return sign | 0x7c00
	case x >= 0x38800000:
		x -= 112 << 23
		x += 0xfff + (x>>13)&1
		return sign | uint16(x>>13)
	case x < 0x33000000:
		return sign
	}
	e := x >> 23
	m := x&0x7fffff | 0x800000
	s := 126 - e
	r := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return sign | uint16(r)
}

func refF32ToBF16(x uint32) uint16 {
	if x&0x7fffffff > 0x7f800000 {
		return 0x7fff
	}
	return uint16((x + 0x7fff + (x>>16)&1) >> 16)
}

func refF16(h uint16) float32  { return math.Float32frombits(refF16ToF32Bits(h)) }
func refBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// refReduce16 is one element of x op y in fp16 or bf16, from the
// references.
func refReduce16(t ElemType, op ReduceOp, x, y uint16) uint16 {
	switch op {
	case ReduceSum:
		if t == Float16 {
			return refF32ToF16(math.Float32bits(refF16(x) + refF16(y)))
		}
		return refF32ToBF16(math.Float32bits(refBF16(x) + refBF16(y)))
	case ReduceProd:
		if t == Float16 {
			return refF32ToF16(math.Float32bits(refF16(x) * refF16(y)))
		}
		p := refBF16(x) * refBF16(y)
		if abs := math.Float32bits(p) & 0x7fffffff; abs == 0 || abs >= 0x00800000 {
			return refF32ToBF16(math.Float32bits(p))
		}
		return bf16Tiny(float64(refBF16(x)) * float64(refBF16(y)))
	}
	return minmax16(t, x, y, op == ReduceMin)
}

func refReduce32(t ElemType, op ReduceOp, x, y uint32) uint32 {
	if t == Int32 && op == ReduceSum {
		return x + y
	}
	if t == Int32 || op == ReduceMax || op == ReduceMin {
		var d [1]uint32
		reduce32(t, op, d[:], []uint32{x}, []uint32{y})
		return d[0]
	}
	var r float32
	if op == ReduceSum {
		r = math.Float32frombits(x) + math.Float32frombits(y)
	} else {
		r = math.Float32frombits(x) * math.Float32frombits(y)
	}
	if r != r {
		return 0x7fffffff
	}
	return math.Float32bits(r)
}

// TestF16BitsExhaustive converts every fp16 value.
func TestF16BitsExhaustive(t *testing.T) {
	for h := range 1 << 16 {
		if got, want := f16Bits(uint16(h)), refF16ToF32Bits(uint16(h)); got != want {
			t.Fatalf("f16Bits(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
}

// f32Probes are float32 bits around every fp16 value: the value, the
// midpoint to the next fp16 value (a tie) and one float32 ulp on either
// side of both, with both signs; then the NaNs, the infinities, the
// float32 subnormals' edges and random bits.
func f32Probes() []uint32 {
	var ps []uint32
	for h := uint32(0); h < 0x7c00; h++ {
		v := refF16ToF32Bits(uint16(h))
		w := refF16ToF32Bits(uint16(h + 1))
		mid := math.Float32bits((math.Float32frombits(v) + math.Float32frombits(w)) / 2)
		for _, p := range []uint32{v, v - 1, v + 1, mid, mid - 1, mid + 1} {
			ps = append(ps, p, p|0x80000000)
		}
	}
	for _, p := range []uint32{0, 1, 0x7fffff, 0x800000, 0x33000000, 0x33000001, 0x32ffffff,
		0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x7f7fffff, 0x7f800000, 0x7f800001,
		0x7fc00000, 0x7fffffff, 0x7f800100, 0x7fbfffff} {
		ps = append(ps, p, p|0x80000000)
	}
	rng := rand.New(rand.NewPCG(46, 1))
	for range 1 << 18 {
		ps = append(ps, rng.Uint32())
	}
	return ps
}

func TestF32ToHalfAgree(t *testing.T) {
	for _, x := range f32Probes() {
		if got, want := f32ToF16Bits(x), refF32ToF16(x); got != want {
			t.Fatalf("f32ToF16Bits(%#08x) = %#04x, want %#04x", x, got, want)
		}
		if got, want := f32ToBF16Bits(x), refF32ToBF16(x); got != want {
			t.Fatalf("f32ToBF16Bits(%#08x) = %#04x, want %#04x", x, got, want)
		}
	}
	// bf16 ties and near-ties at every bf16 value.
	for h := uint32(0); h < 1<<16; h++ {
		for _, lo := range []uint32{0x7fff, 0x8000, 0x8001, 0xffff} {
			x := h<<16 | lo
			if got, want := f32ToBF16Bits(x), refF32ToBF16(x); got != want {
				t.Fatalf("f32ToBF16Bits(%#08x) = %#04x, want %#04x", x, got, want)
			}
		}
	}
}

var allOps = []ReduceOp{ReduceSum, ReduceProd, ReduceMax, ReduceMin}

// halfOperands are the operand pairs of the 16-bit kernel tests: x is
// every 16-bit value in order; each y is x rotated by an offset, x
// reversed, or one special value (zeros, infinities, NaNs, the smallest
// and largest finite values, ties) against all.
func halfOperands() (x []uint16, ys [][]uint16) {
	x = make([]uint16, 1<<16)
	for i := range x {
		x[i] = uint16(i)
	}
	rng := rand.New(rand.NewPCG(46, 2))
	for range 6 {
		off := rng.IntN(1 << 16)
		y := make([]uint16, len(x))
		for i := range y {
			y[i] = uint16(i + off)
		}
		ys = append(ys, y)
	}
	rev := make([]uint16, len(x))
	for i := range rev {
		rev[i] = uint16(len(x) - 1 - i)
	}
	ys = append(ys, rev)
	for _, c := range []uint16{0, 0x8000, 1, 0x8001, 0x3c00, 0xbc00, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x7fff, 0xffff,
		0x7c01, 0x0400, 0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x0080, 0x0001, 0x3800, 0x1000, 0x2000} {
		y := make([]uint16, len(x))
		for i := range y {
			y[i] = c
		}
		ys = append(ys, y)
	}
	return x, ys
}

// TestBulk16 runs every fp16 and bf16 kernel (the vector kernels where
// this CPU has them, and the loops alone) over every 16-bit value
// against the references, both operand orders.
func TestBulk16(t *testing.T) {
	x, ys := halfOperands()
	d := make([]uint16, len(x))
	for _, et := range []ElemType{Float16, BFloat16} {
		for _, op := range allOps {
			for k, y := range ys {
				for _, pass := range []struct {
					name string
					f    func(ElemType, ReduceOp, []uint16, []uint16, []uint16)
				}{{"bulk16", bulk16}, {"bulk16Go", bulk16Go}, {"bulk16Stream", bulk16Stream}} {
					for _, swap := range []bool{false, true} {
						a, b := x, y
						if swap {
							a, b = y, x
						}
						pass.f(et, op, d, a, b)
						for i := range d {
							if want := refReduce16(et, op, a[i], b[i]); d[i] != want {
								t.Fatalf("%s %v %v (operands %d): %#04x, %#04x gave %#04x, want %#04x", pass.name, et, op, k, a[i], b[i], d[i], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestBulk32 is TestBulk16 for fp32 and int32: special values against
// each other and random bits, with NaN payloads of both signs.
func TestBulk32(t *testing.T) {
	special := []uint32{0, 0x80000000, 1, 0x80000001, 0x7fffff, 0x800000, 0x3f800000, 0xbf800000,
		0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7f800001, 0xffc00000, 0x7fc00000, 0x7fffffff,
		0xffffffff, 0x00400000, 0x1f800000, 0x5f800000, 0x3f800001}
	var x, y []uint32
	for _, a := range special {
		for _, b := range special {
			x, y = append(x, a), append(y, b)
		}
	}
	rng := rand.New(rand.NewPCG(46, 3))
	for range 1 << 16 {
		a, b := rng.Uint32(), rng.Uint32()
		if rng.IntN(4) == 0 { // near each other: sums that cancel
			b = a ^ 0x80000000 + uint32(rng.IntN(3)) - 1
		}
		x, y = append(x, a), append(y, b)
	}
	d := make([]uint32, len(x))
	for _, et := range []ElemType{Float32, Int32} {
		for _, op := range allOps {
			for _, f := range []func(ElemType, ReduceOp, []uint32, []uint32, []uint32){bulk32, bulk32Go, bulk32Stream} {
				f(et, op, d, x, y)
				for i := range d {
					if want := refReduce32(et, op, x[i], y[i]); d[i] != want {
						t.Fatalf("%v %v: %#08x, %#08x gave %#08x, want %#08x", et, op, x[i], y[i], d[i], want)
					}
				}
			}
		}
	}
}

// TestBulkTails runs the kernels on every length up to 70 and every
// start offset up to 17 (the vector loops' ends and their unaligned
// starts), with the destination the first operand.
func TestBulkTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 4))
	src16 := make([]uint16, 128)
	src32 := make([]uint32, 128)
	for i := range src16 {
		src16[i], src32[i] = uint16(rng.Uint32()), rng.Uint32()
	}
	for _, op := range allOps {
		for n := range 71 {
			for off := range 18 {
				for _, et := range []ElemType{Float16, BFloat16} {
					a := append([]uint16(nil), src16[off:off+n]...)
					b := src16[127-n : 127]
					want := make([]uint16, n)
					for i := range want {
						want[i] = refReduce16(et, op, a[i], b[i])
					}
					bulk16(et, op, a, a, b)
					if fmt.Sprint(a) != fmt.Sprint(want) {
						t.Fatalf("%v %v of %d at %d: %x, want %x", et, op, n, off, a, want)
					}
				}
				a := append([]uint32(nil), src32[off:off+n]...)
				b := src32[127-n : 127]
				want := make([]uint32, n)
				for i := range want {
					want[i] = refReduce32(Float32, op, a[i], b[i])
				}
				bulk32(Float32, op, a, a, b)
				if fmt.Sprint(a) != fmt.Sprint(want) {
					t.Fatalf("float %v of %d at %d: %x, want %x", op, n, off, a, want)
				}
			}
		}
	}
}

// TestBF16ProdTiny makes the vector bf16 product meet tiny products
// (below 2^-126) among ordinary ones, where it hands 16 elements to the
// scalar rounding.
func TestBF16ProdTiny(t *testing.T) {
	n := 256
	x, y, d := make([]uint16, n), make([]uint16, n), make([]uint16, n)
	for i := range x {
		x[i], y[i] = 0x3f80+uint16(i%7), 0x4000+uint16(i%5) // ordinary
		if i%37 == 3 {
			x[i], y[i] = 0x0d00+uint16(i), 0x3000+uint16(i) // product near 2^-130
		}
	}
	for _, tc := range []struct {
		name string
		bulk func(ElemType, ReduceOp, []uint16, []uint16, []uint16)
	}{{"bulk16", bulk16}, {"bulk16Stream", bulk16Stream}} {
		clear(d)
		tc.bulk(BFloat16, ReduceProd, d, x, y)
		for i := range d {
			if want := refReduce16(BFloat16, ReduceProd, x[i], y[i]); d[i] != want {
				t.Fatalf("%s: element %d: %#04x * %#04x = %#04x, want %#04x", tc.name, i, x[i], y[i], d[i], want)
			}
		}
	}
}

// TestStreamTails runs the streaming kernels on every length up to 70
// and some longer, with the destination at every element offset up to
// 17 in a buffer (so at every distance from a 32-byte boundary: the
// loops' heads), apart from the operands and in place of the first,
// against the references.
func TestStreamTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 5))
	const room = 4200
	src16, src32 := make([]uint16, room), make([]uint32, room)
	for i := range src16 {
		src16[i], src32[i] = uint16(rng.Uint32()), rng.Uint32()
	}
	lengths := []int{1000, 4099, 4150}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	buf16, buf32 := make([]uint16, room+32), make([]uint32, room+32)
	for _, op := range allOps {
		for _, n := range lengths {
			for off := range 18 {
				for _, inPlace := range []bool{false, true} {
					for _, et := range []ElemType{Float16, BFloat16} {
						d := buf16[off : off+n]
						a, b := src16[:n], src16[room-n:]
						if inPlace {
							copy(d, a)
							a = d
						}
						want := make([]uint16, n)
						for i := range want {
							want[i] = refReduce16(et, op, a[i], b[i])
						}
						bulk16Stream(et, op, d, a, b)
						if fmt.Sprint(d) != fmt.Sprint(want) {
							t.Fatalf("%v %v of %d at %d (in place %v): %x, want %x", et, op, n, off, inPlace, d, want)
						}
					}
					for _, et := range []ElemType{Float32, Int32} {
						d := buf32[off : off+n]
						a, b := src32[:n], src32[room-n:]
						if inPlace {
							copy(d, a)
							a = d
						}
						want := make([]uint32, n)
						for i := range want {
							want[i] = refReduce32(et, op, a[i], b[i])
						}
						bulk32Stream(et, op, d, a, b)
						if fmt.Sprint(d) != fmt.Sprint(want) {
							t.Fatalf("%v %v of %d at %d (in place %v): %x, want %x", et, op, n, off, inPlace, d, want)
						}
					}
				}
			}
		}
	}
}

// TestReduceStream: ElemType.ReduceStream gives Reduce's bytes, aligned
// and at odd byte offsets (the element loop), and Add and Reduce from
// StreamBytes on (where they stream) the same bytes as their loops.
func TestReduceStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 6))
	const n = StreamBytes + 100
	x, y := make([]byte, n+1), make([]byte, n+1)
	for i := range x {
		x[i], y[i] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	got, want := make([]byte, n+1), make([]byte, n+1)
	for _, et := range []ElemType{Float16, BFloat16, Float32, Int32} {
		for _, op := range allOps {
			for _, c := range []struct {
				name string
				off  int
				size int
			}{{"aligned", 0, 4096 + 8}, {"odd offset", 1, 4096 + 8}, {"from StreamBytes", 0, n / 4 * 4}} {
				m := c.size
				d, a, b := got[c.off:c.off+m], x[c.off:c.off+m], y[c.off:c.off+m]
				w := want[c.off : c.off+m]
				// The reference: the element loops, one element at a time
				// (unaligned operands take them).
				s := et.Size()
				ref := make([]byte, 3*s+1)
				rd, ra, rb := ref[1:1+s], ref[1+s:1+2*s], ref[1+2*s:1+3*s]
				for i := 0; i < m; i += s {
					copy(ra, a[i:i+s])
					copy(rb, b[i:i+s])
					et.Reduce(op, rd, ra, rb)
					copy(w[i:i+s], rd)
				}
				if c.name == "from StreamBytes" {
					et.Reduce(op, d, a, b)
				} else {
					et.ReduceStream(op, d, a, b)
				}
				if string(d) != string(w) {
					i := 0
					for d[i] == w[i] {
						i++
					}
					t.Fatalf("%v %v %s: byte %d is %#x, want %#x", et, op, c.name, i, d[i], w[i])
				}
			}
		}
	}
}
