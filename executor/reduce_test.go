package executor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestReduceOpNames(t *testing.T) {
	for op, name := range map[ReduceOp]string{ReduceSum: "sum", ReduceProd: "prod", ReduceMax: "max", ReduceMin: "min"} {
		if op.String() != name || !op.Valid() {
			t.Errorf("%d: String %q Valid %v, want %q, true", uint8(op), op.String(), op.Valid(), name)
		}
		got, err := ParseReduceOp(" " + name + " ")
		if err != nil || got != op {
			t.Errorf("ParseReduceOp(%q) = %v, %v", name, got, err)
		}
	}
	if op, err := ParseReduceOp("PRODUCT"); err != nil || op != ReduceProd {
		t.Errorf("ParseReduceOp(PRODUCT) = %v, %v", op, err)
	}
	if _, err := ParseReduceOp("avg"); err == nil || !contains(err.Error(), `"avg"`) {
		t.Errorf("ParseReduceOp(avg): %v, want an error naming it", err)
	}
	if ReduceOp(4).Valid() || ReduceOp(4).String() != "ReduceOp(4)" {
		t.Errorf("ReduceOp(4): %v %v", ReduceOp(4).Valid(), ReduceOp(4))
	}
	if err := CheckReduce(Float32, ReduceOp(9)); err == nil || !contains(err.Error(), "ReduceOp(9)") {
		t.Errorf("CheckReduce(op 9) = %v", err)
	}
	if err := CheckReduce(sumOnly{}, ReduceMax); err == nil || !contains(err.Error(), "sumonly") || !contains(err.Error(), "max") {
		t.Errorf("CheckReduce(sum-only type, max) = %v", err)
	}
	if err := CheckReduce(sumOnly{}, ReduceSum); err != nil {
		t.Errorf("CheckReduce(sum-only type, sum) = %v", err)
	}
	if err := Validate(&Instance{}, Options{DType: Float32, Reduce: ReduceOp(7)}); err == nil || !contains(err.Error(), "ReduceOp(7)") {
		t.Errorf("Validate with op 7: %v", err)
	}
}

// sumOnly is a DType without Reduce.
type sumOnly struct{}

func (sumOnly) Name() string         { return "sumonly" }
func (sumOnly) Size() int            { return 4 }
func (sumOnly) Add(dst, a, b []byte) { Int32.Add(dst, a, b) }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// reduce1 applies op to one pair of elements given as bits.
func reduce1(t ElemType, op ReduceOp, a, b uint32) uint32 {
	x, y, d := make([]byte, 4), make([]byte, 4), make([]byte, 4)
	binary.LittleEndian.PutUint32(x, a)
	binary.LittleEndian.PutUint32(y, b)
	n := t.Size()
	t.Reduce(op, d[:n], x[:n], y[:n])
	if n == 2 {
		return uint32(binary.LittleEndian.Uint16(d))
	}
	return binary.LittleEndian.Uint32(d)
}

// TestReduceClosedForms pins the special cases of docs/executor.md §5.4
// (NCCL's device reductions) for every type.
func TestReduceClosedForms(t *testing.T) {
	const (
		f16NaN, f16Inf, f16Max, f16NegZ, f16One, f16Two = 0x7fff, 0x7c00, 0x7bff, 0x8000, 0x3c00, 0x4000
		f16NaNPayload                                   = 0x7e01
		bfNaN, bfInf, bfMax, bfNegZ, bfOne, bfTwo       = 0x7fff, 0x7f80, 0x7f7f, 0x8000, 0x3f80, 0x4000
		bfNaNPayload                                    = 0xffc1
		f32NaN, f32Inf, f32Max, f32NegZ, f32One         = 0x7fffffff, 0x7f800000, 0x7f7fffff, 0x80000000, 0x3f800000
		f32NaNPayload                                   = 0xffc00001
	)
	cases := []struct {
		name    string
		t       ElemType
		op      ReduceOp
		a, b, w uint32
	}{
		// Sums: -0 + -0 = -0, +0 + -0 = +0.
		{"f16 -0+-0", Float16, ReduceSum, f16NegZ, f16NegZ, f16NegZ},
		{"f16 +0+-0", Float16, ReduceSum, 0, f16NegZ, 0},
		{"bf16 -0+-0", BFloat16, ReduceSum, bfNegZ, bfNegZ, bfNegZ},
		{"f32 -0+-0", Float32, ReduceSum, f32NegZ, f32NegZ, f32NegZ},
		// Products: signs, overflow to Inf, 0·Inf = NaN (canonical), NaN canonical.
		{"f16 2*2", Float16, ReduceProd, f16Two, f16Two, 0x4400},
		{"f16 -0*1", Float16, ReduceProd, f16NegZ, f16One, f16NegZ},
		{"f16 max*2 overflows", Float16, ReduceProd, f16Max, f16Two, f16Inf},
		{"f16 -max*2 overflows", Float16, ReduceProd, 0x8000 | f16Max, f16Two, 0x8000 | f16Inf},
		{"f16 0*inf", Float16, ReduceProd, 0, f16Inf, f16NaN},
		{"f16 nan payload*1", Float16, ReduceProd, f16NaNPayload, f16One, f16NaN},
		{"f16 subnormal product", Float16, ReduceProd, 0x0200, 0x3800, 0x0100}, // 2^-15 · 0.5
		{"f16 underflow to -0", Float16, ReduceProd, 0x8001, 0x0001, f16NegZ},
		{"bf16 2*2", BFloat16, ReduceProd, bfTwo, bfTwo, 0x4080},
		{"bf16 max*2 overflows", BFloat16, ReduceProd, bfMax, bfTwo, bfInf},
		{"bf16 nan payload", BFloat16, ReduceProd, bfNaNPayload, bfOne, bfNaN},
		{"bf16 tiny", BFloat16, ReduceProd, 0x0080, 0x3f00, 0x0040}, // 2^-126 · 0.5 = subnormal
		{"f32 max*2 overflows", Float32, ReduceProd, f32Max, 0x40000000, f32Inf},
		{"f32 nan payload", Float32, ReduceProd, f32NaNPayload, f32One, f32NaN},
		{"f32 -0*1", Float32, ReduceProd, f32NegZ, f32One, f32NegZ},
		{"i32 wraps", Int32, ReduceProd, 0x10000, 0x10000, 0},
		{"i32 -3*7", Int32, ReduceProd, uint32(0xfffffffd), 7, uint32(0xffffffeb)},
		{"i32 min*-1 wraps", Int32, ReduceProd, 0x80000000, 0xffffffff, 0x80000000},
		// Max and min: NaN ignored, two NaNs canonical, -0 below +0.
		{"f16 max nan,1", Float16, ReduceMax, f16NaNPayload, f16One, f16One},
		{"f16 max 1,nan", Float16, ReduceMax, f16One, f16NaNPayload, f16One},
		{"f16 max nan,nan", Float16, ReduceMax, f16NaNPayload, f16NaNPayload, f16NaN},
		{"f16 min nan,-inf", Float16, ReduceMin, f16NaN, 0x8000 | f16Inf, 0x8000 | f16Inf},
		{"f16 max -0,+0", Float16, ReduceMax, f16NegZ, 0, 0},
		{"f16 max +0,-0", Float16, ReduceMax, 0, f16NegZ, 0},
		{"f16 min +0,-0", Float16, ReduceMin, 0, f16NegZ, f16NegZ},
		{"f16 min -1,1", Float16, ReduceMin, 0x8000 | f16One, f16One, 0x8000 | f16One},
		{"f16 max -1,-2", Float16, ReduceMax, 0x8000 | f16One, 0x8000 | f16Two, 0x8000 | f16One},
		{"f16 max inf,max", Float16, ReduceMax, f16Inf, f16Max, f16Inf},
		{"bf16 max nan,1", BFloat16, ReduceMax, bfNaNPayload, bfOne, bfOne},
		{"bf16 max nan,nan", BFloat16, ReduceMax, bfNaNPayload, 0x7f81, bfNaN},
		// 0x7c01 is a NaN in fp16 but a finite bf16 value: the type decides.
		{"bf16 max 0x7c01,1", BFloat16, ReduceMax, 0x7c01, bfOne, 0x7c01},
		{"f16 max 0x7c01,1", Float16, ReduceMax, 0x7c01, f16One, f16One},
		{"bf16 min -0,+0", BFloat16, ReduceMin, bfNegZ, 0, bfNegZ},
		{"bf16 min -2,-1", BFloat16, ReduceMin, 0x8000 | bfTwo, 0x8000 | bfOne, 0x8000 | bfTwo},
		{"f32 max nan,-1", Float32, ReduceMax, f32NaNPayload, 0xbf800000, 0xbf800000},
		{"f32 min -1,nan", Float32, ReduceMin, 0xbf800000, f32NaN, 0xbf800000},
		{"f32 max nan,nan", Float32, ReduceMax, f32NaNPayload, 0x7f800001, f32NaN},
		{"f32 max -0,+0", Float32, ReduceMax, f32NegZ, 0, 0},
		{"f32 min +0,-0", Float32, ReduceMin, 0, f32NegZ, f32NegZ},
		{"f32 min -inf,-max", Float32, ReduceMin, 0xff800000, 0x80000000 | f32Max, 0xff800000},
		{"i32 max signed", Int32, ReduceMax, 0xffffffff, 1, 1},
		{"i32 min signed", Int32, ReduceMin, 0xffffffff, 1, 0xffffffff},
		{"i32 min int_min", Int32, ReduceMin, 0x80000000, 0x7fffffff, 0x80000000},
	}
	for _, c := range cases {
		if got := reduce1(c.t, c.op, c.a, c.b); got != c.w {
			t.Errorf("%s: %s %v(%#x, %#x) = %#x, want %#x", c.name, c.t, c.op, c.a, c.b, got, c.w)
		}
	}
}

// TestReduceRoundsOnce checks the fp16 and bf16 products against the
// exact product rounded once (F64ToF16 and F64ToBF16 of the float64
// product, which is exact), and max/min against a float64 comparison,
// over random bit patterns of every class and every pair of a set of
// edge values.
func TestReduceRoundsOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	edges := []uint16{0, 0x8000, 1, 0x8001, 0x3ff, 0x400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x3c00, 0xbc00,
		0x0080, 0x0040, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x3f80, 0x0001, 0x2000, 0x1fff}
	for _, tt := range []ElemType{Float16, BFloat16} {
		val := func(h uint16) float64 {
			if tt == Float16 {
				return float64(F16ToF32(h))
			}
			return float64(BF16ToF32(h))
		}
		round := F64ToF16
		if tt == BFloat16 {
			round = F64ToBF16
		}
		check := func(a, b uint16) {
			x, y := val(a), val(b)
			got := uint16(reduce1(tt, ReduceProd, uint32(a), uint32(b)))
			if want := round(x * y); got != want {
				t.Fatalf("%s prod(%#04x, %#04x) = %#04x, want %#04x", tt, a, b, got, want)
			}
			mx, mn := uint16(reduce1(tt, ReduceMax, uint32(a), uint32(b))), uint16(reduce1(tt, ReduceMin, uint32(a), uint32(b)))
			wx, wn := refMinMax(a, b, x, y, false), refMinMax(a, b, x, y, true)
			if mx != wx || mn != wn {
				t.Fatalf("%s max/min(%#04x, %#04x) = %#04x/%#04x, want %#04x/%#04x", tt, a, b, mx, mn, wx, wn)
			}
		}
		for _, a := range edges {
			for _, b := range edges {
				check(a, b)
			}
		}
		for range 200000 {
			a, b := uint16(rng.Uint32()), uint16(rng.Uint32())
			if rng.IntN(4) == 0 { // near-underflow products: small exponents
				a &^= 0x7000
				b = b&^0x7f80 | 0x3f00
			}
			check(a, b)
		}
	}
	// float32 max/min against float64 comparisons.
	for range 100000 {
		a, b := rng.Uint32(), rng.Uint32()
		if rng.IntN(8) == 0 {
			b = a ^ 0x80000000
		}
		x, y := float64(math.Float32frombits(a)), float64(math.Float32frombits(b))
		for _, isMin := range []bool{false, true} {
			op := ReduceMax
			if isMin {
				op = ReduceMin
			}
			if got, want := reduce1(Float32, op, a, b), refMinMax32(a, b, x, y, isMin); got != want {
				t.Fatalf("f32 %v(%#x, %#x) = %#x, want %#x", op, a, b, got, want)
			}
		}
	}
}

// refMinMax is the reference MAX/MIN of two 16-bit values from float64
// comparisons: NaN ignored, −0 < +0, two NaNs canonical.
func refMinMax(a, b uint16, x, y float64, isMin bool) uint16 {
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0x7fff
	case math.IsNaN(x):
		return b
	case math.IsNaN(y):
		return a
	}
	if x == y && x == 0 { // signed zeros
		neg := a&0x8000 != 0
		if neg == isMin {
			return a
		}
		return b
	}
	if (x < y) == isMin || x == y {
		return a
	}
	return b
}

func refMinMax32(a, b uint32, x, y float64, isMin bool) uint32 {
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0x7fffffff
	case math.IsNaN(x):
		return b
	case math.IsNaN(y):
		return a
	}
	if x == y && x == 0 {
		if (a&0x80000000 != 0) == isMin {
			return a
		}
		return b
	}
	if (x < y) == isMin || x == y {
		return a
	}
	return b
}

// TestReduceUnaligned: the element-at-a-time path (unaligned operands)
// gives the aligned path's bits.
func TestReduceUnaligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tt := range []ElemType{Float16, BFloat16, Float32, Int32} {
		for op := ReduceSum; op < NumReduceOps; op++ {
			n := 64 * tt.Size()
			buf := make([]byte, 3*n+3)
			a, b := buf[1:1+n], buf[n+2:2*n+2]
			for i := range a {
				a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
			}
			want := make([]byte, n)
			aa, bb := append([]byte(nil), a...), append([]byte(nil), b...)
			tt.Reduce(op, want, aa, bb)
			got := buf[2*n+3:]
			tt.Reduce(op, got, a, b)
			if string(got) != string(want) {
				t.Errorf("%s %v: unaligned result differs", tt, op)
			}
		}
	}
}

func BenchmarkReduce(b *testing.B) {
	for _, tt := range []ElemType{Float16, BFloat16, Float32, Int32} {
		for op := ReduceSum; op < NumReduceOps; op++ {
			x, y, d := make([]byte, 64<<10), make([]byte, 64<<10), make([]byte, 64<<10)
			for i := 0; i < len(x); i += tt.Size() {
				tt.SetFloat64(x, i/tt.Size(), float64(i%1000)/999)
				tt.SetFloat64(y, i/tt.Size(), float64(i%777)/555)
			}
			b.Run(tt.Name()+"/"+op.String(), func(b *testing.B) {
				b.SetBytes(int64(len(d)))
				for b.Loop() {
					tt.Reduce(op, d, x, y)
				}
			})
		}
	}
}
