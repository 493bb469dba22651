package cpu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// benchOps are the reductions the benchmarks below run; the sum is the
// fast path (sum.go), the others pairwise ElemType.Reduce per block.
var benchOps = []executor.ReduceOp{executor.ReduceSum, executor.ReduceProd, executor.ReduceMax, executor.ReduceMin}

// BenchmarkReduceOps is BenchmarkReduce's 8-rank read-reduce of 8 MiB
// per rank in fp16 and fp32 (ElemTypes: the sum takes sumElems), with
// every reduction.
//
//	go test ./executor/cpu -run '^$' -bench ReduceOps -benchtime 20x
func BenchmarkReduceOps(b *testing.B) {
	const n, size = 8, 8 << 20
	for _, dt := range []executor.ElemType{executor.Float16, executor.Float32} {
		for _, red := range benchOps {
			b.Run(fmt.Sprintf("%s/%v", dt, red), func(b *testing.B) {
				bl := newBuilder(n, 0)
				part := uint64(size / n)
				for r := 0; r < n; r++ {
					srcs := rs(L(in, uint64(r)*part, part))
					dsts := rs(L(out, uint64(r)*part, part))
					for p := 0; p < n; p++ {
						if p != r {
							srcs = append(srcs, R(p, in, uint64(r)*part, part))
							dsts = append(dsts, R(p, out, uint64(r)*part, part))
						}
					}
					bl.tb(r, op(plan.OpReadReduceSend, mem, nil, srcs, dsts))
				}
				s := openT(b, bl.inst, executor.Options{DType: dt, Reduce: red, DeadlockTimeout: 5 * time.Second}, schedule{})
				bb := bufs(n, size, size)
				for r := range bb {
					for i := 0; i < size; i += dt.Size() {
						dt.SetFloat64(bb[r].Input, i/dt.Size(), 1+float64((i/dt.Size()+r)%7)/64)
					}
				}
				b.SetBytes(size)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Launch(context.Background(), bb); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPacketReduce is an LL16 packet reduce of 4 MiB on one rank:
// three peers' packets in its scratch and its own input (repkt), with
// every reduction.
func BenchmarkPacketReduce(b *testing.B) {
	const size = 4 << 20
	const tbs = 4
	dt := executor.Float32
	for _, red := range benchOps {
		b.Run(red.String(), func(b *testing.B) {
			bl := newBuilder(4, 6*size)
			part := uint64(size / tbs)
			for k := uint64(0); k < tbs; k++ {
				for p := 1; p < 4; p++ {
					bl.tb(p, op(plan.OpPutPacket, mem, nil, rs(L(in, k*part, part)), rs(R(0, scr, uint64(p-1)*size+k*part, part))))
				}
				srcs := rs(L(in, k*part, part))
				for p := 1; p < 4; p++ {
					srcs = append(srcs, L(scr, uint64(p-1)*size+k*part, part))
				}
				bl.tb(0, op(plan.OpReducePacket, 0, nil, srcs, rs(L(out, k*part, part))))
			}
			s := openT(b, bl.inst, executor.Options{DType: dt, Reduce: red, DeadlockTimeout: 5 * time.Second}, schedule{})
			bb := bufs(4, size, size)
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Launch(context.Background(), bb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
