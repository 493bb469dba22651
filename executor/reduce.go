package executor

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// ReduceOp is the reduction a run's reduce ops (re, rre, the packet
// reduces, glres) apply: Options.Reduce. Every backend combines the
// operands in the order of docs/semantics.md §2.6 with the element
// arithmetic of docs/executor.md §5.4, which is NCCL's: one rounding per
// pairwise operation in the element type, MAX and MIN ignoring a NaN
// operand. AVG and PREMUL_SUM are not ops of a plan: a library runs them
// as a scaling of the input or the output around a ReduceSum.
type ReduceOp uint8

// The reductions. The zero value is ReduceSum, what every run did before
// the others existed.
const (
	ReduceSum ReduceOp = iota
	ReduceProd
	ReduceMax
	ReduceMin
)

// NumReduceOps is the number of valid ReduceOps: every op below it is
// one, in the order of the constants.
const NumReduceOps = 4

// String returns "sum", "prod", "max" or "min" (the --redop names of
// mscclgo run and nccl-tests' column), or "ReduceOp(n)" for an invalid
// op.
func (op ReduceOp) String() string {
	switch op {
	case ReduceSum:
		return "sum"
	case ReduceProd:
		return "prod"
	case ReduceMax:
		return "max"
	case ReduceMin:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(op))
}

// Valid reports whether op is one of the constants.
func (op ReduceOp) Valid() bool { return op < NumReduceOps }

// ParseReduceOp returns the op of a name: sum, prod (product), max or
// min, in any case.
func ParseReduceOp(name string) (ReduceOp, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "sum":
		return ReduceSum, nil
	case "prod", "product":
		return ReduceProd, nil
	case "max":
		return ReduceMax, nil
	case "min":
		return ReduceMin, nil
	}
	return 0, fmt.Errorf("unknown reduction %q (want sum, prod, max or min)", name)
}

// Reducer is a DType with every ReduceOp, not only the SUM of Add. The
// backends need one for a run whose Options.Reduce is not ReduceSum;
// every ElemType is one.
type Reducer interface {
	DType
	// Reduce stores a op b element-wise into dst, under the contract of
	// DType.Add (equal lengths, dst may alias a or b). Reduce(ReduceSum,
	// ...) is Add.
	Reduce(op ReduceOp, dst, a, b []byte)
}

var _ Reducer = Float32

// CheckReduce returns an error naming op or dt when a run of type dt
// cannot reduce with op: an invalid op, or a DType other than a Reducer
// for an op other than ReduceSum.
func CheckReduce(dt DType, op ReduceOp) error {
	if !op.Valid() {
		return fmt.Errorf("invalid reduction %v (want sum, prod, max or min)", op)
	}
	if op == ReduceSum || dt == nil {
		return nil
	}
	if r, ok := dt.(Reducer); !ok || r == nil {
		return fmt.Errorf("data type %s reduces only with sum, not %v", dt.Name(), op)
	}
	if t, ok := dt.(ElemType); ok && (t < Float16 || t > Int32) {
		return fmt.Errorf("invalid %v", t)
	}
	return nil
}

// Combiner returns the function a backend applies to reduce two blocks
// with op in type dt: dt.Add for ReduceSum, else the Reducer's Reduce
// with op bound. CheckReduce(dt, op) must be nil.
func Combiner(dt DType, op ReduceOp) func(dst, a, b []byte) {
	if op == ReduceSum {
		return dt.Add
	}
	r := dt.(Reducer)
	return func(dst, a, b []byte) { r.Reduce(op, dst, a, b) }
}

// Reduce implements Reducer: a op b for every element, as the device
// computes it (docs/executor.md §5.4).
//
//   - ReduceSum is Add.
//   - ReduceProd: fp32 is one IEEE multiplication, rounded to nearest
//     even, a NaN made the canonical NaN; fp16 and bf16 multiply exactly
//     and round once to the element type (to nearest even, subnormals
//     kept, overflow to ±Inf, NaN canonical), as __hmul does; int32
//     wraps (the low 32 bits of the product).
//   - ReduceMax and ReduceMin: the larger (smaller) operand, −0 ordered
//     below +0; a NaN operand is ignored (the other operand is the
//     result, bits unchanged), two NaNs give the canonical NaN; int32
//     compares signed.
func (t ElemType) Reduce(op ReduceOp, dst, a, b []byte) {
	if op == ReduceSum {
		t.Add(dst, a, b)
		return
	}
	if len(a) != len(dst) || len(b) != len(dst) || len(dst)%t.Size() != 0 {
		panic(fmt.Sprintf("executor: %s %v of %d, %d and %d bytes", t.Name(), op, len(dst), len(a), len(b)))
	}
	if len(dst) == 0 {
		return
	}
	if !op.Valid() {
		panic(fmt.Sprintf("executor: %s reduction with %v", t.Name(), op))
	}
	if nativeLE && aligned(dst, a, b, t.Size()) {
		t.bulk(op, dst, a, b, len(dst) >= StreamBytes)
		return
	}
	// Unaligned operands, or a big-endian host: one element at a time.
	switch t.Size() {
	case 2:
		var d, x, y [1]uint16
		for i := 0; i+1 < len(dst); i += 2 {
			x[0], y[0] = binary.LittleEndian.Uint16(a[i:]), binary.LittleEndian.Uint16(b[i:])
			reduce16(t, op, d[:], x[:], y[:])
			binary.LittleEndian.PutUint16(dst[i:], d[0])
		}
	case 4:
		var d, x, y [1]uint32
		for i := 0; i+3 < len(dst); i += 4 {
			x[0], y[0] = binary.LittleEndian.Uint32(a[i:]), binary.LittleEndian.Uint32(b[i:])
			reduce32(t, op, d[:], x[:], y[:])
			binary.LittleEndian.PutUint32(dst[i:], d[0])
		}
	}
}

// StreamBytes is the destination size from which Add and Reduce store
// it with non-temporal stores, where this CPU has the streaming kernels
// (every type and op under the vector kernels): a
// destination larger than the caches would only evict the operands
// still to be read, and a non-temporal store writes memory without
// reading it first (three words of memory traffic per element instead
// of four). ReduceStream streams at any size.
const StreamBytes = 16 << 20

// ReduceStream is Reduce (op ReduceSum: Add) storing dst with
// non-temporal stores where this CPU has the streaming kernels, for a
// destination that will not be read again soon (the last pass of a
// large reduction): the same bits as Reduce, dst left out of the
// caches. The streamed stores are ordered (SFENCE) before
// ReduceStream returns.
func (t ElemType) ReduceStream(op ReduceOp, dst, a, b []byte) {
	if len(a) != len(dst) || len(b) != len(dst) || len(dst)%t.Size() != 0 || !op.Valid() || len(dst) == 0 || !nativeLE || !aligned(dst, a, b, t.Size()) {
		t.Reduce(op, dst, a, b) // its checks, its panics, or its element loop
		return
	}
	t.bulk(op, dst, a, b, true)
}

// bulk is Reduce over aligned operands on a little-endian host, through
// the streaming kernels with stream.
func (t ElemType) bulk(op ReduceOp, dst, a, b []byte, stream bool) {
	switch t.Size() {
	case 2:
		d, x, y := view16(dst), view16(a), view16(b)
		if stream {
			bulk16Stream(t, op, d, x[:len(d)], y[:len(d)])
		} else {
			bulk16(t, op, d, x[:len(d)], y[:len(d)])
		}
	case 4:
		d, x, y := view32(dst), view32(a), view32(b)
		if stream {
			bulk32Stream(t, op, d, x[:len(d)], y[:len(d)])
		} else {
			bulk32(t, op, d, x[:len(d)], y[:len(d)])
		}
	}
}

// reduce16 is Reduce over fp16 or bf16 bits (len(x), len(y) >= len(d)).
func reduce16(t ElemType, op ReduceOp, d, x, y []uint16) {
	switch op {
	case ReduceProd:
		if t == Float16 {
			for i := range d {
				d[i] = mulF16(x[i], y[i])
			}
		} else {
			for i := range d {
				d[i] = mulBF16(x[i], y[i])
			}
		}
	case ReduceMax:
		for i := range d {
			d[i] = minmax16(t, x[i], y[i], false)
		}
	case ReduceMin:
		for i := range d {
			d[i] = minmax16(t, x[i], y[i], true)
		}
	}
}

// reduce32 is Reduce over fp32 or int32 bits.
func reduce32(t ElemType, op ReduceOp, d, x, y []uint32) {
	if t == Int32 {
		switch op {
		case ReduceProd:
			for i := range d {
				d[i] = x[i] * y[i]
			}
		case ReduceMax:
			for i := range d {
				d[i] = uint32(max(int32(x[i]), int32(y[i])))
			}
		case ReduceMin:
			for i := range d {
				d[i] = uint32(min(int32(x[i]), int32(y[i])))
			}
		}
		return
	}
	switch op {
	case ReduceProd:
		for i := range d {
			p := math.Float32frombits(x[i]) * math.Float32frombits(y[i])
			if p != p {
				d[i] = 0x7fffffff
			} else {
				d[i] = math.Float32bits(p)
			}
		}
	case ReduceMax:
		for i := range d {
			d[i] = minmaxF32(x[i], y[i], false)
		}
	case ReduceMin:
		for i := range d {
			d[i] = minmaxF32(x[i], y[i], true)
		}
	}
}

// mulF16 is the product of fp16 bits a and b rounded once to fp16: the
// float32 product of two fp16 values is exact (22 significant bits,
// within float32's normal range), so rounding it is rounding the exact
// product.
func mulF16(a, b uint16) uint16 { return F32ToF16(F16ToF32(a) * F16ToF32(b)) }

// mulBF16 is the product of bfloat16 bits a and b rounded once to
// bfloat16. The float32 product is exact (16 significant bits) unless it
// falls below float32's normal range, where float32 would round first:
// there the exact float64 product is rounded to bfloat16's subnormal
// grid (2^-133) directly.
func mulBF16(a, b uint16) uint16 {
	x, y := BF16ToF32(a), BF16ToF32(b)
	p := x * y
	if abs := math.Float32bits(p) & 0x7fffffff; abs == 0 || abs >= 0x00800000 {
		return F32ToBF16(p)
	}
	return bf16Tiny(float64(x) * float64(y))
}

// bf16Tiny rounds v, a nonzero exact product of magnitude below 2^-126,
// to bfloat16 (subnormal or the smallest normal), to nearest even.
func bf16Tiny(v float64) uint16 {
	r := math.RoundToEven(math.Ldexp(v, 133)) // in units of 2^-133
	var sign uint16
	if math.Signbit(v) {
		sign, r = 0x8000, -r
	}
	// r <= 128: 128 units is 2^-126, the smallest normal, whose bits are
	// 0x0080 as well.
	return sign | uint16(r)
}

// halfKey orders fp16 or bf16 bits (not NaN) as their values, −0 below
// +0: sign-magnitude to two's complement.
func halfKey(h uint16) int16 {
	s := int16(h)
	return s ^ (s >> 15 & 0x7fff)
}

func isNaNHalf(t ElemType, h uint16) bool {
	if t == BFloat16 {
		return h&0x7fff > 0x7f80
	}
	return h&0x7fff > 0x7c00
}

// minmax16 is MAX (isMin false) or MIN of two values of type t (fp16
// or bf16 bits).
func minmax16(t ElemType, a, b uint16, isMin bool) uint16 {
	na, nb := isNaNHalf(t, a), isNaNHalf(t, b)
	switch {
	case na && nb:
		return 0x7fff
	case na:
		return b
	case nb:
		return a
	}
	if (halfKey(a) < halfKey(b)) == isMin {
		return a
	}
	return b
}

// f32Key orders float32 bits (not NaN) as their values, −0 below +0.
func f32Key(x uint32) int32 {
	s := int32(x)
	return s ^ (s >> 31 & 0x7fffffff)
}

// minmaxF32 is MAX (isMin false) or MIN of float32 bits a and b.
func minmaxF32(a, b uint32, isMin bool) uint32 {
	na, nb := a&0x7fffffff > 0x7f800000, b&0x7fffffff > 0x7f800000
	switch {
	case na && nb:
		return 0x7fffffff
	case na:
		return b
	case nb:
		return a
	}
	if (f32Key(a) < f32Key(b)) == isMin {
		return a
	}
	return b
}
