package executor

import "math"

// kernels.go: the bulk loops of Add and Reduce over aligned element
// slices. Where the CPU has them (kernels_amd64.go: AVX2 and F16C,
// detected at run time) the vector kernels of kernels_amd64.s take the
// whole multiples of a vector and the loops below the rest; elsewhere the
// loops take all. Both compute each element exactly as the scalar
// definitions (Add, Reduce and the conversions of dtype.go): the tests
// compare them over every fp16 and bf16 value.
//
// The loops are shaped for the Go compiler: the operands resliced to
// len(d) so that the bounds checks leave the loop, and the fp16 and bf16
// conversions branch-free and table-free (f16Bits, f32ToF16Bits,
// f32ToBF16Bits).

// bulk16 stores x op y into d (fp16 or bf16 bits; len(x), len(y) ==
// len(d)).
func bulk16(t ElemType, op ReduceOp, d, x, y []uint16) {
	i := vec16(t, op, d, x, y, false)
	bulk16Go(t, op, d[i:], x[i:len(d)], y[i:len(d)])
}

// bulk16Stream is bulk16 storing d with the streaming kernels where the
// CPU has them: the same bits, d not kept in the caches.
func bulk16Stream(t ElemType, op ReduceOp, d, x, y []uint16) {
	i := vec16(t, op, d, x, y, true)
	bulk16Go(t, op, d[i:], x[i:len(d)], y[i:len(d)])
}

// bulk16Go is bulk16 without the vector kernels.
func bulk16Go(t ElemType, op ReduceOp, d, x, y []uint16) {
	x, y = x[:len(d)], y[:len(d)]
	switch {
	case op == ReduceSum && t == Float16:
		for i := range d {
			d[i] = f32ToF16Bits(math.Float32bits(math.Float32frombits(f16Bits(x[i])) + math.Float32frombits(f16Bits(y[i]))))
		}
	case op == ReduceSum:
		for i := range d {
			d[i] = f32ToBF16Bits(math.Float32bits(math.Float32frombits(uint32(x[i])<<16) + math.Float32frombits(uint32(y[i])<<16)))
		}
	default:
		reduce16(t, op, d, x, y)
	}
}

// bulk32 stores x op y into d (fp32 or int32 bits).
func bulk32(t ElemType, op ReduceOp, d, x, y []uint32) {
	i := vec32(t, op, d, x, y, false)
	bulk32Go(t, op, d[i:], x[i:len(d)], y[i:len(d)])
}

// bulk32Stream is bulk16Stream for fp32 and int32.
func bulk32Stream(t ElemType, op ReduceOp, d, x, y []uint32) {
	i := vec32(t, op, d, x, y, true)
	bulk32Go(t, op, d[i:], x[i:len(d)], y[i:len(d)])
}

// bulk32Go is bulk32 without the vector kernels.
func bulk32Go(t ElemType, op ReduceOp, d, x, y []uint32) {
	x, y = x[:len(d)], y[:len(d)]
	switch {
	case op == ReduceSum && t == Float32:
		for i := range d {
			s := math.Float32frombits(x[i]) + math.Float32frombits(y[i])
			if s != s {
				d[i] = 0x7fffffff
			} else {
				d[i] = math.Float32bits(s)
			}
		}
	case op == ReduceSum:
		for i := range d {
			d[i] = x[i] + y[i]
		}
	default:
		reduce32(t, op, d, x, y)
	}
}
