package main

// reduce.go: a call's reduction as mscclgo runs it, and the element
// arithmetic of every ncclDataType_t for the host-memory paths that do
// their own (the scaling of AVG and PREMUL_SUM, the built-in path of
// generic.go).
//
// NCCL's definitions (src/enqueue.cc hostToDevRedOp, src/device/
// reduce_kernel.h): ncclSum, ncclProd, ncclMax and ncclMin reduce
// pairwise in the element type. ncclAvg of a floating type is a
// PreMulSum by 1/nranks converted to the element type (float(1.0/n),
// then to half or bfloat16 rounded to nearest; double 1.0/n): every input
// element is multiplied by the scalar, rounded once to the element type,
// and the products are summed. ncclAvg of an integer type is a sum, then
// a division by nranks (SumPostDiv), truncated toward zero for signed
// types. ncclRedOpCreatePreMulSum's op multiplies each rank's input by
// its own scalar, then sums.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mscclgo/mscclgo/executor"
)

// Reductions by ncclRedOp_t value.
const (
	opSum  = 0
	opProd = 1
	opMax  = 2
	opMin  = 3
	opAvg  = 4
	// opPreMulSum is mscclgo.h's MSCCLGO_PREMUL_SUM: a sum of each
	// input pre-multiplied by the call's scalar (call.premul set).
	opPreMulSum = 5
)

// reduction is how a call reduces: the op the plan (or the built-in
// path) combines with, and the scaling around it.
type reduction struct {
	op executor.ReduceOp
	// preMul, when not nil, is one element of the call's type: each input
	// element is multiplied by it before the sum (AVG of a floating type,
	// PREMUL_SUM).
	preMul []byte
	// postDiv, when above 0, divides every result element (AVG of an
	// integer type).
	postDiv uint64
}

// scaled reports whether r needs the input or the output scaled around
// the plan's sum.
func (r reduction) scaled() bool { return r.preMul != nil || r.postDiv > 0 }

// isFloat reports whether d is a floating type.
func isFloat(d int) bool { return d == 6 || d == 7 || d == 8 || d == 9 }

// reductionOf is the reduction of call k on n ranks. Allgather has none
// (the zero value: a sum never applied).
func reductionOf(k call, n int) (reduction, error) {
	if !k.coll.hasOp() {
		return reduction{}, nil
	}
	switch {
	case k.premul:
		if uint64(len(k.scalar)) != elemSize(k.dtype) {
			return reduction{}, errorf(resultInvalidArgument, "MSCCLGO_PREMUL_SUM: a scalar of %d bytes for %s (%d bytes)", len(k.scalar), dtypeName(k.dtype), elemSize(k.dtype))
		}
		return reduction{op: executor.ReduceSum, preMul: k.scalar}, nil
	case k.op == opSum:
		return reduction{op: executor.ReduceSum}, nil
	case k.op == opProd:
		return reduction{op: executor.ReduceProd}, nil
	case k.op == opMax:
		return reduction{op: executor.ReduceMax}, nil
	case k.op == opMin:
		return reduction{op: executor.ReduceMin}, nil
	case k.op == opAvg:
		if isFloat(k.dtype) {
			return reduction{op: executor.ReduceSum, preMul: avgScalar(k.dtype, n)}, nil
		}
		return reduction{op: executor.ReduceSum, postDiv: uint64(n)}, nil
	}
	return reduction{}, errorf(resultInvalidUsage, "%s: reductions made by ncclRedOpCreatePreMulSum are the fallback NCCL's", opName(k.op))
}

// avgScalar is NCCL's ncclAvg scalar for floating type d on n ranks:
// float(1.0/n), in the element type.
func avgScalar(d, n int) []byte {
	f := float32(1.0 / float64(n))
	switch d {
	case 6:
		return binary.LittleEndian.AppendUint16(nil, executor.F32ToF16(f))
	case 9:
		return binary.LittleEndian.AppendUint16(nil, executor.F32ToBF16(f))
	case 8:
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(1.0/float64(n)))
	}
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(f))
}

// scaleChunk bounds the scalar-filled operand of a plan type's multiply.
const scaleChunk = 4096

// mulScalar stores src times s (one element) into dst, element-wise in
// type d's arithmetic (products of float16 and bfloat16 rounded once to
// the type, integers wrapping). dst may be src.
func mulScalar(d int, dst, src, s []byte) {
	es := int(elemSize(d))
	if planElem(d) {
		t := planDType(d)
		fill := make([]byte, min(len(src), scaleChunk/es*es))
		for i := 0; i < len(fill); i += es {
			copy(fill[i:], s)
		}
		for at := 0; at < len(src); at += len(fill) {
			end := min(at+len(fill), len(src))
			t.Reduce(executor.ReduceProd, dst[at:end], src[at:end], fill[:end-at])
		}
		return
	}
	switch d {
	case 0, 1:
		for i := range src {
			dst[i] = src[i] * s[0]
		}
	case 3:
		m := binary.LittleEndian.Uint32(s)
		for i := 0; i+4 <= len(src); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(src[i:])*m)
		}
	case 4, 5:
		m := binary.LittleEndian.Uint64(s)
		for i := 0; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])*m)
		}
	case 8:
		m := math.Float64frombits(binary.LittleEndian.Uint64(s))
		for i := 0; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], math.Float64bits(math.Float64frombits(binary.LittleEndian.Uint64(src[i:]))*m))
		}
	}
}

// combine stores a op b into dst, element-wise in type d's arithmetic:
// the executor's for the plan types (docs/executor.md §5.4), the same
// rules for the others (integers wrap; max and min of float64 ignore a
// NaN operand and order -0 below +0). dst may be a or b.
func combine(d int, op executor.ReduceOp, dst, a, b []byte) {
	if planElem(d) {
		planDType(d).Reduce(op, dst, a, b)
		return
	}
	switch d {
	case 0:
		for i := range dst {
			dst[i] = uint8(combineInt(op, int64(int8(a[i])), int64(int8(b[i]))))
		}
	case 1:
		for i := range dst {
			dst[i] = uint8(combineUint(op, uint64(a[i]), uint64(b[i])))
		}
	case 3:
		for i := 0; i+4 <= len(dst); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], uint32(combineUint(op, uint64(binary.LittleEndian.Uint32(a[i:])), uint64(binary.LittleEndian.Uint32(b[i:])))))
		}
	case 4:
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], uint64(combineInt(op, int64(binary.LittleEndian.Uint64(a[i:])), int64(binary.LittleEndian.Uint64(b[i:])))))
		}
	case 5:
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], combineUint(op, binary.LittleEndian.Uint64(a[i:]), binary.LittleEndian.Uint64(b[i:])))
		}
	case 8:
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], combineF64(op, binary.LittleEndian.Uint64(a[i:]), binary.LittleEndian.Uint64(b[i:])))
		}
	default:
		panic(fmt.Sprintf("mscclgo: combine of %s", dtypeName(d)))
	}
}

func combineInt(op executor.ReduceOp, a, b int64) int64 {
	switch op {
	case executor.ReduceProd:
		return a * b
	case executor.ReduceMax:
		return max(a, b)
	case executor.ReduceMin:
		return min(a, b)
	}
	return a + b
}

func combineUint(op executor.ReduceOp, a, b uint64) uint64 {
	switch op {
	case executor.ReduceProd:
		return a * b
	case executor.ReduceMax:
		return max(a, b)
	case executor.ReduceMin:
		return min(a, b)
	}
	return a + b
}

// f64Key orders float64 bits (not NaN) as their values, -0 below +0.
func f64Key(x uint64) int64 {
	s := int64(x)
	return s ^ (s >> 63 & math.MaxInt64)
}

func combineF64(op executor.ReduceOp, a, b uint64) uint64 {
	x, y := math.Float64frombits(a), math.Float64frombits(b)
	switch op {
	case executor.ReduceProd:
		return math.Float64bits(x * y)
	case executor.ReduceMax, executor.ReduceMin:
		nx, ny := x != x, y != y
		switch {
		case nx && ny:
			return 0x7ff8000000000000
		case nx:
			return b
		case ny:
			return a
		}
		if (f64Key(a) < f64Key(b)) == (op == executor.ReduceMin) {
			return a
		}
		return b
	}
	return math.Float64bits(x + y)
}

// divide divides every element of buf (integer type d) by n: truncated
// toward zero for the signed types, as NCCL's SumPostDiv.
func divide(d int, buf []byte, n uint64) {
	switch d {
	case 0:
		for i := range buf {
			buf[i] = uint8(int8(int64(int8(buf[i])) / int64(n)))
		}
	case 1:
		for i := range buf {
			buf[i] = uint8(uint64(buf[i]) / n)
		}
	case 2:
		for i := 0; i+4 <= len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], uint32(int32(int64(int32(binary.LittleEndian.Uint32(buf[i:])))/int64(n))))
		}
	case 3:
		for i := 0; i+4 <= len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], uint32(uint64(binary.LittleEndian.Uint32(buf[i:]))/n))
		}
	case 4:
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], uint64(int64(binary.LittleEndian.Uint64(buf[i:]))/int64(n)))
		}
	case 5:
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], binary.LittleEndian.Uint64(buf[i:])/n)
		}
	}
}

// stageInput copies a rank's input src into dst, pre-multiplied by r's
// scalar when it has one.
func stageInput(d int, r reduction, dst, src []byte) {
	if r.preMul != nil {
		mulScalar(d, dst, src, r.preMul)
		return
	}
	copy(dst, src)
}
