package executor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestParseDType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ElemType
		name string
		size int
	}{
		{"float16", Float16, "half", 2},
		{"half", Float16, "half", 2},
		{"FP16", Float16, "half", 2},
		{"bfloat16", BFloat16, "bfloat16", 2},
		{"bf16", BFloat16, "bfloat16", 2},
		{"float32", Float32, "float", 4},
		{"float", Float32, "float", 4},
		{"fp32", Float32, "float", 4},
		{"int32", Int32, "int32", 4},
		{"int", Int32, "int32", 4},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDType(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || got.Name() != tt.name || got.Size() != tt.size {
				t.Errorf("ParseDType(%q) = %v (size %d), want %v (%s, size %d)", tt.in, got, got.Size(), tt.want, tt.name, tt.size)
			}
		})
	}
	for _, bad := range []string{"", "fp8", "uint8", "float64"} {
		if _, err := ParseDType(bad); err == nil {
			t.Errorf("ParseDType(%q): no error", bad)
		}
	}
}

func TestF32ToF16(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max", 65504, 0x7bff},
		{"below overflow tie", 65519.996, 0x7bff},
		{"overflow tie", 65520, 0x7c00},
		{"negative overflow", -1e6, 0xfc00},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
		{"nan", float32(math.NaN()), 0x7fff},
		{"tie to even down", 1 + 0x1p-11, 0x3c00},
		{"tie to even up", 1 + 3*0x1p-11, 0x3c02},
		{"above tie", 1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 0x3ffp-24, 0x03ff},
		{"subnormal rounds to normal", 0x3ffp-24 + 0x1p-25, 0x0400},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above half smallest subnormal", 0x1p-25 + 0x1p-40, 0x0001},
		{"one and a half subnormal ulps ties to even", 3 * 0x1p-25, 0x0002},
		{"negative subnormal", -5 * 0x1p-24, 0x8005},
		{"far below", 1e-30, 0x0000},
		{"fill value", 1023.0 / 1024, 0x3bfe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := F32ToF16(tt.in); got != tt.want {
				t.Errorf("F32ToF16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
			}
			if got := F64ToF16(float64(tt.in)); got != tt.want {
				t.Errorf("F64ToF16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

func TestF32ToBF16(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"minus one", -1, 0xbf80},
		{"tie to even down", 1 + 0x1p-8, 0x3f80},
		{"tie to even up", 1 + 3*0x1p-8, 0x3f82},
		{"max float32 overflows", math.MaxFloat32, 0x7f80},
		{"largest finite", 0x1.fep127, 0x7f7f},
		{"inf", float32(math.Inf(-1)), 0xff80},
		{"nan", float32(math.NaN()), 0x7fff},
		{"subnormal", 0x1p-133, 0x0001},
		{"subnormal tie", 0x1p-134, 0x0000},
		{"fill value 257 rounds", 257.0 / 1024, 0x3e80},
		{"fill value 259 rounds up", 259.0 / 1024, 0x3e82},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := F32ToBF16(tt.in); got != tt.want {
				t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
			}
			if got := F64ToBF16(float64(tt.in)); got != tt.want {
				t.Errorf("F64ToBF16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

// TestF16RoundTrip checks every fp16 value converts to float32 and back.
func TestF16RoundTrip(t *testing.T) {
	t.Parallel()
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		want := uint16(h)
		if f != f {
			want = 0x7fff
		}
		if got := F32ToF16(f); got != want {
			t.Fatalf("F32ToF16(F16ToF32(%#04x) = %g) = %#04x", h, f, got)
		}
		if got := F64ToF16(float64(f)); got != want {
			t.Fatalf("F64ToF16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

// TestNarrowingAgrees compares the float32 bit tricks with the generic
// float64 rounding on random float32 bit patterns, weighted to the fp16
// range.
func TestNarrowingAgrees(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2_000_000; i++ {
		bits := r.Uint32()
		if i%2 == 0 { // exponents around the fp16 range
			bits = bits&0x807fffff | (90+r.Uint32N(60))<<23
		}
		f := math.Float32frombits(bits)
		if got, want := F32ToF16(f), F64ToF16(float64(f)); got != want {
			t.Fatalf("fp16 of %#08x (%g): bit trick %#04x, generic %#04x", bits, f, got, want)
		}
		if got, want := F32ToBF16(f), F64ToBF16(float64(f)); got != want {
			t.Fatalf("bf16 of %#08x (%g): bit trick %#04x, generic %#04x", bits, f, got, want)
		}
	}
}

func put16(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func put32(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func f32bits(v ...float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func TestAdd(t *testing.T) {
	t.Parallel()
	inf32, nan32 := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name    string
		dt      ElemType
		a, b, w []byte
	}{
		{"fp16 exact", Float16, put16(0x3c00, 0x3800), put16(0x3c00, 0x3800), put16(0x4000, 0x3c00)},
		{"fp16 tie to even", Float16, put16(0x6800, 0x6800), put16(0x3c00, 0x4200), put16(0x6800, 0x6802)}, // 2048+1, 2048+3
		{"fp16 overflow", Float16, put16(0x7bff, 0x7bff), put16(0x4c00, 0x4bff), put16(0x7c00, 0x7bff)},    // +16, +15.99
		{"fp16 subnormals", Float16, put16(0x0001, 0x03ff), put16(0x0001, 0x0001), put16(0x0002, 0x0400)},
		{"fp16 cancellation", Float16, put16(0x3c01), put16(0xbc00), put16(0x1400)},
		{"fp16 inf and nan", Float16, put16(0x7c00, 0x7c00, 0x7e01), put16(0x3c00, 0xfc00, 0x3c00), put16(0x7c00, 0x7fff, 0x7fff)},
		{"bf16 tie to even", BFloat16, put16(0x3f80, 0x3f81), put16(0x3b80, 0x3b80), put16(0x3f80, 0x3f82)}, // 1+2^-8, (1+2^-7)+2^-8
		{"bf16 overflow", BFloat16, put16(0x7f7f), put16(0x7f7f), put16(0x7f80)},
		{"bf16 subnormal", BFloat16, put16(0x0001), put16(0x0001), put16(0x0002)},
		{"fp32", Float32, put32(f32bits(1, 1, 0x1p-149, inf32)...), put32(f32bits(0x1p-24, 0x1p-23, 0x1p-149, -inf32)...),
			put32(math.Float32bits(1), math.Float32bits(1+0x1p-23), math.Float32bits(0x1p-148), 0x7fffffff)},
		{"fp32 nan", Float32, put32(f32bits(nan32)...), put32(f32bits(1)...), put32(0x7fffffff)},
		{"int32 wraps", Int32, put32(0x7fffffff, 0xffffffff, 5), put32(1, 1, 0xfffffffd), put32(0x80000000, 0, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := make([]byte, len(tt.w))
			tt.dt.Add(got, tt.a, tt.b)
			if string(got) != string(tt.w) {
				t.Errorf("Add = % x, want % x", got, tt.w)
			}
			// dst aliasing a.
			a := append([]byte(nil), tt.a...)
			tt.dt.Add(a, a, tt.b)
			if string(a) != string(tt.w) {
				t.Errorf("Add in place = % x, want % x", a, tt.w)
			}
		})
	}
}

// TestAddCorrectlyRounded checks Add against the exactly rounded sum: the
// float64 sum of two fp16 values is exact, that of two bf16 values is
// rounded from 53 bits (an innocuous double rounding).
func TestAddCorrectlyRounded(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 16
	for _, dt := range []ElemType{Float16, BFloat16} {
		a, b, got := make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n)
		for round := 0; round < 16; round++ {
			for i := 0; i < n; i++ {
				x, y := uint16(r.Uint32()), uint16(r.Uint32())
				if round%2 == 0 { // similar magnitudes, where rounding happens most
					y = y&0x83ff | x&0x7c00
				}
				binary.LittleEndian.PutUint16(a[2*i:], x)
				binary.LittleEndian.PutUint16(b[2*i:], y)
			}
			dt.Add(got, a, b)
			want := make([]byte, 2)
			for i := 0; i < n; i++ {
				dt.SetFloat64(want, 0, dt.Float64(a, i)+dt.Float64(b, i))
				if g := binary.LittleEndian.Uint16(got[2*i:]); g != binary.LittleEndian.Uint16(want) {
					t.Fatalf("%s: %#04x + %#04x = %#04x, want %#04x", dt, binary.LittleEndian.Uint16(a[2*i:]),
						binary.LittleEndian.Uint16(b[2*i:]), g, binary.LittleEndian.Uint16(want))
				}
			}
		}
	}
}

func TestFloat64RoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dt   ElemType
		in   float64
		want float64
	}{
		{Float16, 0.1, 0.0999755859375},
		{Float16, 1e5, math.Inf(1)},
		{BFloat16, 0.1, 0.10009765625},
		{Float32, 0.1, float64(float32(0.1))},
		{Int32, 7.9, 7},
		{Int32, -7.9, -7},
		{Int32, 1 << 31, -(1 << 31)},
		{Int32, math.NaN(), 0},
	}
	for _, tt := range tests {
		b := make([]byte, 2*tt.dt.Size())
		tt.dt.SetFloat64(b, 1, tt.in)
		if got := tt.dt.Float64(b, 1); got != tt.want {
			t.Errorf("%s: SetFloat64(%g) then Float64 = %g, want %g", tt.dt, tt.in, got, tt.want)
		}
		if tt.dt.Float64(b, 0) != 0 {
			t.Errorf("%s: SetFloat64 of element 1 wrote element 0", tt.dt)
		}
	}
	if Float16.Epsilon() != 0x1p-10 || BFloat16.Epsilon() != 0x1p-7 || Float32.Epsilon() != 0x1p-23 || Int32.Epsilon() != 0 {
		t.Error("wrong epsilons")
	}
}

// allTypes are the element types.
var allTypes = []ElemType{Float16, BFloat16, Float32, Int32}

// BenchmarkAdd measures Add on 64 KiB operands, the backend's block size
// order of magnitude.
func BenchmarkAdd(b *testing.B) {
	for _, dt := range allTypes {
		b.Run(dt.Name(), func(b *testing.B) {
			const n = 64 << 10
			x, y, z := make([]byte, n), make([]byte, n), make([]byte, n)
			for i := range n / dt.Size() {
				dt.SetFloat64(x, i, float64(i%1024)/1024)
				dt.SetFloat64(y, i, float64((i*7)%1024)/1024)
			}
			b.SetBytes(n)
			for b.Loop() {
				dt.Add(z, x, y)
			}
		})
	}
}

// TestAddUnaligned checks the byte-wise path of Add (operands not aligned
// to the element size) against the element-slice path.
func TestAddUnaligned(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allTypes {
		const n = 4096
		x, y := make([]byte, n+1), make([]byte, n+1)
		for i := range x {
			x[i], y[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		want := make([]byte, n)
		dt.Add(want, x[:n], y[:n])
		xu, yu, got := make([]byte, n+1), make([]byte, n+1), make([]byte, n+1)
		copy(xu[1:], x[:n])
		copy(yu[1:], y[:n])
		dt.Add(got[1:], xu[1:], yu[1:])
		if string(got[1:]) != string(want) {
			t.Errorf("%s: unaligned Add differs from aligned Add", dt)
		}
	}
}
