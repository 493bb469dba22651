package executor

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// ElemType is one of the element types a run can use: Float16, BFloat16,
// Float32 or Int32. It implements DType with the device's SUM (docs/semantics.md §2.7)
// and Numeric for the data generator and the checks.
type ElemType uint8

// The element types. The zero ElemType is invalid.
const (
	Float16 ElemType = iota + 1
	BFloat16
	Float32
	Int32
)

// Numeric is a DType whose elements convert to and from float64. Fill and
// the result checks need it; every ElemType is one.
type Numeric interface {
	DType
	// Float64 returns element i of b, exactly.
	Float64(b []byte, i int) float64
	// SetFloat64 stores v as element i of b: rounded to nearest, ties to
	// even, for the floating-point types (overflow gives ±Inf, NaN the
	// canonical NaN); truncated toward zero and wrapped modulo 2^32 for
	// Int32.
	SetFloat64(b []byte, i int, v float64)
	// Epsilon is the unit of the reduction tolerance of
	// docs/semantics.md §5.3: 2^-10 (fp16), 2^-7 (bf16), 2^-23 (fp32),
	// 0 (int32).
	Epsilon() float64
}

var _ Numeric = Float16

// ParseDType returns the element type of a --dtype name: float16 (half,
// fp16), bfloat16 (bf16), float32 (float, fp32) or int32 (int), in any
// case.
func ParseDType(name string) (ElemType, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "float16", "half", "fp16":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "float32", "float", "fp32":
		return Float32, nil
	case "int32", "int":
		return Int32, nil
	}
	return 0, fmt.Errorf("unknown data type %q (want float16, bfloat16, float32 or int32)", name)
}

// Name returns the nccl-tests name: "half", "bfloat16", "float" or
// "int32".
func (t ElemType) Name() string {
	switch t {
	case Float16:
		return "half"
	case BFloat16:
		return "bfloat16"
	case Float32:
		return "float"
	case Int32:
		return "int32"
	}
	return fmt.Sprintf("ElemType(%d)", uint8(t))
}

// String returns Name.
func (t ElemType) String() string { return t.Name() }

// Size returns the element size in bytes.
func (t ElemType) Size() int {
	switch t {
	case Float16, BFloat16:
		return 2
	case Float32, Int32:
		return 4
	}
	panic(fmt.Sprintf("executor: invalid %v", t))
}

// Epsilon implements Numeric.
func (t ElemType) Epsilon() float64 {
	switch t {
	case Float16:
		return 0x1p-10
	case BFloat16:
		return 0x1p-7
	case Float32:
		return 0x1p-23
	}
	return 0
}

// Add stores a+b element-wise into dst as the device computes it: one
// IEEE addition rounded to nearest even in the element type (fp16 and
// bf16 round after every addition, no wider accumulation), with
// subnormals kept and a NaN result made the canonical NaN (0x7fff,
// 0x7fff, 0x7fffffff) as PTX does; int32 wraps around.
//
// fp16 and bf16 add in float32 and round once: the float32 sum of two
// fp16 (11-bit) or bf16 (8-bit) values rounded again to the narrow type
// equals the correctly rounded sum, since 24 >= 2·11+2 (double rounding
// is innocuous).
func (t ElemType) Add(dst, a, b []byte) {
	if len(a) != len(dst) || len(b) != len(dst) || len(dst)%t.Size() != 0 {
		panic(fmt.Sprintf("executor: %s add of %d, %d and %d bytes", t.Name(), len(dst), len(a), len(b)))
	}
	if len(dst) == 0 {
		return
	}
	if nativeLE && aligned(dst, a, b, t.Size()) {
		t.bulk(ReduceSum, dst, a, b, len(dst) >= StreamBytes)
		return
	}
	// Unaligned operands, or a big-endian host.
	switch t {
	case Float16:
		for i := 0; i+1 < len(dst); i += 2 {
			x := F16ToF32(binary.LittleEndian.Uint16(a[i:]))
			y := F16ToF32(binary.LittleEndian.Uint16(b[i:]))
			binary.LittleEndian.PutUint16(dst[i:], F32ToF16(x+y))
		}
	case BFloat16:
		for i := 0; i+1 < len(dst); i += 2 {
			x := BF16ToF32(binary.LittleEndian.Uint16(a[i:]))
			y := BF16ToF32(binary.LittleEndian.Uint16(b[i:]))
			binary.LittleEndian.PutUint16(dst[i:], F32ToBF16(x+y))
		}
	case Float32:
		for i := 0; i+3 < len(dst); i += 4 {
			s := math.Float32frombits(binary.LittleEndian.Uint32(a[i:])) + math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
			bits := math.Float32bits(s)
			if s != s {
				bits = 0x7fffffff
			}
			binary.LittleEndian.PutUint32(dst[i:], bits)
		}
	case Int32:
		for i := 0; i+3 < len(dst); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(a[i:])+binary.LittleEndian.Uint32(b[i:]))
		}
	}
}

// Float64 implements Numeric.
func (t ElemType) Float64(b []byte, i int) float64 {
	switch t {
	case Float16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case BFloat16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	panic(fmt.Sprintf("executor: invalid %v", t))
}

// SetFloat64 implements Numeric.
func (t ElemType) SetFloat64(b []byte, i int, v float64) {
	switch t {
	case Float16:
		binary.LittleEndian.PutUint16(b[2*i:], F64ToF16(v))
	case BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], F64ToBF16(v))
	case Float32:
		f := float32(v) // Go rounds float64 to float32 to nearest even
		bits := math.Float32bits(f)
		if f != f {
			bits = 0x7fffffff
		}
		binary.LittleEndian.PutUint32(b[4*i:], bits)
	case Int32:
		var n uint32
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			n = uint32(int64(math.Mod(math.Trunc(v), 1<<32)))
		}
		binary.LittleEndian.PutUint32(b[4*i:], n)
	default:
		panic(fmt.Sprintf("executor: invalid %v", t))
	}
}

// nativeLE reports a little-endian host, where Add views the bytes as
// element slices.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// aligned reports whether the operands start at multiples of size.
func aligned(dst, a, b []byte, size int) bool {
	m := uintptr(size - 1)
	return (uintptr(unsafe.Pointer(&dst[0]))|uintptr(unsafe.Pointer(&a[0]))|uintptr(unsafe.Pointer(&b[0])))&m == 0
}

func view16(b []byte) []uint16 { return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2) }
func view32(b []byte) []uint32 { return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4) }

// ---------------------------------------------------------------------------
// Conversions. Bits are IEEE binary16 and bfloat16 (the upper half of a
// binary32).

// F16ToF32 returns the value of fp16 bits h (exact).
func F16ToF32(h uint16) float32 { return math.Float32frombits(f16Bits(h)) }

// f16Bits is the float32 bits of fp16 bits h, without a branch or a
// table: the exponent and mantissa bits, moved into a float32's place,
// are the value times 2^-112 (normal and subnormal alike), so one exact
// multiplication by 2^112 gives it; an all-ones exponent (Inf, NaN:
// payload kept, quiet bit as given) is then made all ones by a mask (0 or
// all ones).
func f16Bits(h uint16) uint32 {
	a := uint32(h & 0x7fff)
	o := math.Float32bits(math.Float32frombits(a<<13) * 0x1p112)
	o |= -((a + 0x400) >> 15) & 0x7f800000
	return o | uint32(h&0x8000)<<16
}

// F32ToF16 rounds f to fp16, to nearest with ties to even: values from
// 65520 up become Inf, values below 2^-14 become subnormals (or zero), a
// NaN becomes the canonical NaN 0x7fff.
func F32ToF16(f float32) uint16 { return f32ToF16Bits(math.Float32bits(f)) }

// f32ToF16Bits is F32ToF16 of float32 bits x, without a branch (max
// and the last selection compile to conditional moves). The float32
// hardware rounds: |f|·2^112·2^-110 (= 4|f|, or Inf from 65536·2^112 on)
// plus 2^(e+2+13-10)... a power of two whose ulp is fp16's ulp at f's
// exponent (at least 2^-24, fp16's subnormal step), so that the sum's
// low bits are f rounded to nearest even, with overflow to Inf; the fp16
// exponent and mantissa are read off the sum's bits. A NaN gives 0x7fff
// (sign dropped).
func f32ToF16Bits(x uint32) uint16 {
	base := math.Float32frombits(x&0x7fffffff) * 0x1p112 * 0x1p-110
	twice := x + x
	bias := max(twice&0xff000000, 0x71000000)
	base += math.Float32frombits(bias>>1 + 0x07800000)
	b := math.Float32bits(base)
	r := uint16(x>>16)&0x8000 | uint16(b>>13)&0x7c00 + uint16(b&0x0fff)
	if twice > 0xff000000 {
		r = 0x7fff
	}
	return r
}

// BF16ToF32 returns the value of bfloat16 bits h (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to bfloat16, to nearest with ties to even
// (subnormals kept, overflow to Inf, NaN to the canonical 0x7fff).
func F32ToBF16(f float32) uint16 { return f32ToBF16Bits(math.Float32bits(f)) }

// f32ToBF16Bits is F32ToBF16 of float32 bits x, without a branch.
func f32ToBF16Bits(x uint32) uint16 {
	nanM := -((0x7f800000 - x&0x7fffffff) >> 31)
	r := (x + 0x7fff + (x>>16)&1) >> 16
	return uint16(r&^nanM | 0x7fff&nanM)
}

// F64ToF16 rounds v to fp16 directly (one rounding, to nearest even).
func F64ToF16(v float64) uint16 { return uint16(roundF64(v, 11, 5)) }

// F64ToBF16 rounds v to bfloat16 directly (one rounding, to nearest even).
func F64ToBF16(v float64) uint16 { return uint16(roundF64(v, 8, 8)) }

// roundF64 rounds v to a binary format with p significant bits (implicit
// bit included) and ebits exponent bits, and returns its bits. It is the
// slow, obviously correct path; the float32 conversions are bit tricks.
func roundF64(v float64, p, ebits int) uint32 {
	bias := 1<<(ebits-1) - 1
	width := 1 + ebits + p - 1
	signBit := uint32(1) << (width - 1)
	expMask := uint32(1<<ebits-1) << (p - 1)
	if math.IsNaN(v) {
		return expMask | (1<<(p-1) - 1) // all ones below the sign: 0x7fff
	}
	var sign uint32
	if math.Signbit(v) {
		sign = signBit
		v = -v
	}
	if v == 0 {
		return sign
	}
	if math.IsInf(v, 0) {
		return sign | expMask
	}
	emin := 1 - bias
	_, exp := math.Frexp(v) // v = f·2^exp, f in [0.5, 1)
	e := exp - 1            // v in [2^e, 2^(e+1))
	if e < emin {
		e = emin
	}
	q := e - (p - 1) // the ulp is 2^q
	n := math.RoundToEven(math.Ldexp(v, -q))
	if n >= float64(uint64(1)<<p) { // rounded up to the next binade
		n /= 2
		q++
	}
	if q+p-1 > bias { // beyond the largest finite value
		return sign | expMask
	}
	m := uint32(n)
	if m < 1<<(p-1) { // subnormal (or zero)
		return sign | m
	}
	biased := uint32(q + p - 1 + bias)
	return sign | biased<<(p-1) | m&(1<<(p-1)-1)
}
