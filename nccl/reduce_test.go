package main

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/planset"
)

func f64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// TestReductionOf checks NCCL's mapping of each op: AVG of a floating
// type a pre-multiply by float(1/n) in the type, of an integer type a
// division after the sum.
func TestReductionOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		k       call
		n       int
		op      executor.ReduceOp
		preMul  []byte
		postDiv uint64
		err     string
	}{
		{"sum", call{coll: collAllReduce, op: opSum, dtype: 7}, 4, executor.ReduceSum, nil, 0, ""},
		{"max", call{coll: collReduceScatter, op: opMax, dtype: 2}, 4, executor.ReduceMax, nil, 0, ""},
		{"avg float32 on 3", call{coll: collAllReduce, op: opAvg, dtype: 7}, 3, executor.ReduceSum, binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(1.0/3))), 0, ""},
		{"avg float16 on 3", call{coll: collAllReduce, op: opAvg, dtype: 6}, 3, executor.ReduceSum, binary.LittleEndian.AppendUint16(nil, 0x3555), 0, ""},
		{"avg bfloat16 on 3", call{coll: collAllReduce, op: opAvg, dtype: 9}, 3, executor.ReduceSum, binary.LittleEndian.AppendUint16(nil, 0x3eab), 0, ""},
		{"avg float64 on 3", call{coll: collAllReduce, op: opAvg, dtype: 8}, 3, executor.ReduceSum, f64s(1.0 / 3), 0, ""},
		{"avg int32", call{coll: collAllReduce, op: opAvg, dtype: 2}, 3, executor.ReduceSum, nil, 3, ""},
		{"premul", call{coll: collAllReduce, op: opPreMulSum, premul: true, scalar: i32s(7), dtype: 2}, 3, executor.ReduceSum, i32s(7), 0, ""},
		{"premul short scalar", call{coll: collAllReduce, op: opPreMulSum, premul: true, scalar: []byte{1}, dtype: 2}, 3, 0, nil, 0, "a scalar of 1 bytes for ncclInt32 (4 bytes)"},
		{"user op", call{coll: collAllReduce, op: 7, dtype: 2}, 3, 0, nil, 0, "the fallback NCCL's"},
		{"allgather", call{coll: collAllGather, op: -1, dtype: 2}, 3, executor.ReduceSum, nil, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := reductionOf(c.k, c.n)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("reductionOf: %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil || r.op != c.op || !slices.Equal(r.preMul, c.preMul) || r.postDiv != c.postDiv {
				t.Errorf("reductionOf = %+v, %v; want op %v, preMul %x, postDiv %d", r, err, c.op, c.preMul, c.postDiv)
			}
		})
	}
}

// TestElementArithmetic checks the built-in path's arithmetic of the
// types plans do not compute, and the scaling of those they do.
func TestElementArithmetic(t *testing.T) {
	negZero := math.Copysign(0, -1)
	nan := math.NaN()
	for _, c := range []struct {
		name    string
		d       int
		op      executor.ReduceOp
		a, b, w []byte
	}{
		{"float64 sum -0", 8, executor.ReduceSum, f64s(negZero, 1.5), f64s(negZero, 2), f64s(negZero, 3.5)},
		{"float64 max -0 +0, NaN ignored", 8, executor.ReduceMax, f64s(negZero, nan, 1), f64s(0, 2, nan), f64s(0, 2, 1)},
		{"float64 min -0 +0", 8, executor.ReduceMin, f64s(0), f64s(negZero), f64s(negZero)},
		{"int8 sum wraps", 0, executor.ReduceSum, []byte{127, 0x80}, []byte{1, 0xff}, []byte{0x80, 0x7f}},
		{"int8 max signed", 0, executor.ReduceMax, []byte{0xff}, []byte{1}, []byte{1}},
		{"uint8 max unsigned", 1, executor.ReduceMax, []byte{0xff}, []byte{1}, []byte{0xff}},
		{"uint8 prod wraps", 1, executor.ReduceProd, []byte{16}, []byte{16}, []byte{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make([]byte, len(c.w))
			combine(c.d, c.op, got, c.a, c.b)
			if !slices.Equal(got, c.w) {
				t.Errorf("combine = %x, want %x", got, c.w)
			}
		})
	}
	// Integer AVG truncates toward zero.
	buf := i32s(-7, 7, -8, math.MinInt32)
	divide(2, buf, 2)
	if want := i32s(-3, 3, -4, math.MinInt32/2); !slices.Equal(buf, want) {
		t.Errorf("divide = %x, want %x", buf, want)
	}
	// A float16 pre-multiply rounds the exact product once: 3 times
	// fp16(1/3) (0x3555, 0.333251953125) is 0.999755859375, half way
	// between 0x3bff (0.99951171875) and 0x3c00 (1): the tie goes to the
	// even 0x3c00.
	three := binary.LittleEndian.AppendUint16(nil, executor.F32ToF16(3))
	got := make([]byte, 2)
	mulScalar(6, got, three, binary.LittleEndian.AppendUint16(nil, 0x3555))
	if h := binary.LittleEndian.Uint16(got); h != 0x3c00 {
		t.Errorf("fp16 3 * fp16(1/3) = %#x, want 0x3c00", h)
	}
}

// TestPadding checks the padded sizes and the block copies of a call no
// plan takes whole.
func TestPadding(t *testing.T) {
	e := planset.Entry{Collective: "allgather", WorldSize: 4, RanksPerNode: 4, MaxMessageSize: math.MaxUint64, InputChunks: 1, OutputChunks: 4, BufferAlignment: 16}
	if u := padUnit(e, collAllGather, 4, 4); u != 16 {
		t.Errorf("allgather unit = %d, want 16 (each block 16-byte units; four of them make the output's four chunks)", u)
	}
	ar := planset.Entry{Collective: "allreduce", WorldSize: 2, RanksPerNode: 2, MaxMessageSize: math.MaxUint64, InputChunks: 2, OutputChunks: 2, BufferAlignment: 16}
	src := []planset.Source{{Index: &planset.Index{Plans: []planset.Entry{ar}}}}
	req := planset.Request{Collective: "allreduce", WorldSize: 2, RanksPerNode: 2, Size: 484, ElementSize: 4}
	if size, pb, ok := paddedSize(src, req, collAllReduce, 484); !ok || size != 512 || pb != 512 {
		t.Errorf("paddedSize(484) = %d, %d, %v; want 512 (2 chunks of 16-byte units)", size, pb, ok)
	}
	// The bulk of the same call the plan takes whole: 15 units of 32.
	if b := bulkBlock(ar, req, 2, 4, 484); b != 480 {
		t.Errorf("bulkBlock(484) = %d, want 480", b)
	}
	if b := bulkBlock(ar, req, 2, 4, 20); b != 0 {
		t.Errorf("bulkBlock(20) = %d, want 0 (less than a unit)", b)
	}
	// A plan's range bounds the padding and the bulk on a device, not on
	// host memory (planset.Request.Host).
	ranged := ar
	ranged.MinMessageSize = 1024
	rsrc := []planset.Source{{Index: &planset.Index{Plans: []planset.Entry{ranged}}}}
	if size, _, ok := paddedSize(rsrc, req, collAllReduce, 484); !ok || size != 1024 {
		t.Errorf("paddedSize(484) under min 1024 = %d, %v; want 1024", size, ok)
	}
	if b := bulkBlock(ranged, req, 2, 4, 484); b != 0 {
		t.Errorf("bulkBlock(484) under min 1024 = %d, want 0", b)
	}
	host := req
	host.Host = true
	if size, _, ok := paddedSize(rsrc, host, collAllReduce, 484); !ok || size != 512 {
		t.Errorf("paddedSize(484) on host memory = %d, %v; want 512 (the range ignored)", size, ok)
	}
	if b := bulkBlock(ranged, host, 2, 4, 484); b != 480 {
		t.Errorf("bulkBlock(484) on host memory = %d, want 480", b)
	}
	// Reducescatter on 2 ranks, 3 elements a block padded to 8.
	l := layout{coll: collReduceScatter, n: 2, rank: 1, es: 2, count: 3, padded: 8}
	var in []uint64
	l.copies(true, func(callAt, planAt, n uint64) { in = append(in, callAt, planAt, n) })
	if want := []uint64{0, 0, 6, 6, 16, 6}; !slices.Equal(in, want) {
		t.Errorf("reducescatter input copies = %v, want %v", in, want)
	}
	if i, o := l.stageOffsets(true); i != 0 || o != 16 || l.stageBytes(true) != 32 || l.stageBytes(false) != 48 {
		t.Errorf("in-place reducescatter staging: offsets %d, %d, bytes %d / %d; want 0, 16, 32 / 48", i, o, l.stageBytes(true), l.stageBytes(false))
	}
	g := layout{coll: collAllGather, n: 3, rank: 2, es: 4, count: 5, padded: 8}
	src8 := make([]byte, g.outBytes())
	for i := range src8 {
		src8[i] = byte(i)
	}
	dst := make([]byte, 3*5*4)
	g.stageOut(plainCopy, 7, reduction{}, dst, src8)
	for r := range 3 {
		if !slices.Equal(dst[r*20:(r+1)*20], src8[r*32:r*32+20]) {
			t.Errorf("allgather block %d copied from the wrong place: %x", r, dst[r*20:(r+1)*20])
		}
	}
}
