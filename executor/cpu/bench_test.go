package cpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// BenchmarkPackets moves 16 MiB through LL packets: rank 0 packs into rank
// 1's scratch (ppkt), rank 1 unpacks (upkt) concurrently, in four thread
// blocks each.
//
//	go test ./executor/cpu -run '^$' -bench Packets
func BenchmarkPackets(b *testing.B) {
	const size = 16 << 20
	const tbs = 4
	for _, ll8 := range []bool{false, true} {
		b.Run(fmt.Sprintf("LL8=%v", ll8), func(b *testing.B) {
			bl := newBuilder(2, 2*size)
			part := uint64(size / tbs)
			for k := uint64(0); k < tbs; k++ {
				bl.tb(0, op(plan.OpPutPacket, mem, nil, rs(L(in, k*part, part)), rs(R(1, scr, k*part, part))))
				bl.tb(1, op(plan.OpUnpackPacket, 0, nil, rs(L(scr, k*part, part)), rs(L(out, k*part, part))))
			}
			o := opts()
			o.LL8 = ll8
			s := openT(b, bl.inst, o, schedule{})
			bb := bufs(2, size, size)
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Launch(context.Background(), bb); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			eq(b, "output", bb[1].Output, bb[0].Input)
		})
	}
}

// BenchmarkReduce is an 8-rank read-reduce of 8 MiB per rank (each rank
// reduces its eighth of every rank's input and writes it back to all),
// with and without race detection.
func BenchmarkReduce(b *testing.B) {
	const n, size = 8, 8 << 20
	for _, race := range []bool{false, true} {
		b.Run(fmt.Sprintf("race=%v", race), func(b *testing.B) {
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
			o := opts()
			o.Race = race
			s := openT(b, bl.inst, o, schedule{})
			bb := bufs(n, size, size)
			for r := range bb {
				bb[r].Input = fill(size/4, float32(r), 0.5)
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

// BenchmarkAllreducePort runs the 8-rank allreduce port (64 MiB per
// rank, in place) on the backend in float32 and float16; compare with
// BenchmarkAllreduce8 of package harness for the direct Go version.
//
//	go test ./executor/cpu -run '^$' -bench AllreducePort -benchtime 5x
func BenchmarkAllreducePort(b *testing.B) {
	p, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
	if err != nil && !plan.IsWarning(err) {
		b.Skip(err)
	}
	const size = 64 << 20
	for _, dt := range []executor.ElemType{executor.Float32, executor.Float16} {
		b.Run(dt.Name(), func(b *testing.B) {
			lay, err := harness.PlanLayout(p, size, dt, true)
			if err != nil {
				b.Fatal(err)
			}
			inst, err := executor.Instantiate(p, lay.Sizes)
			if err != nil {
				b.Fatal(err)
			}
			s := openT(b, inst, executor.Options{DType: dt}, schedule{})
			bb := lay.Alloc()
			lay.FillInputs(bb, 0)
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

// BenchmarkSmallLaunch is the time of one launch of the 8-rank
// allreduce port at its smallest size (1 KiB of float32): what a launch
// costs besides its data.
func BenchmarkSmallLaunch(b *testing.B) {
	p, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
	if err != nil && !plan.IsWarning(err) {
		b.Skip(err)
	}
	lay, err := harness.PlanLayout(p, 1<<10, executor.Float32, true)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		b.Fatal(err)
	}
	s := openT(b, inst, executor.Options{DType: executor.Float32}, schedule{})
	bb := lay.Alloc()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Launch(context.Background(), bb); err != nil {
			b.Fatal(err)
		}
	}
}
