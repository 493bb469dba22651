package passes

import (
	"fmt"
	"math/big"
	"runtime"
	"testing"

	"github.com/mscclgo/mscclgo/ir"
	"github.com/mscclgo/mscclgo/plan"
)

// syntheticProgram builds an allreduce-like program: ranks × tbs thread
// blocks of about opsPerTB recorded ops each, mixing copies, fusable puts,
// signal/wait pairs, reductions followed by puts of their result,
// semaphores and a barrier across all blocks of a rank. Pairing counters
// are not recorded (validate has nothing to do).
func syntheticProgram(ranks, tbs, opsPerTB, instances int) *ir.Program {
	chunks := tbs * 4
	p := ir.NewProgram(ranks, chunks, chunks)
	p.Name, p.InstrFusion, p.AutoSync, p.Instances = "synthetic", true, true, instances
	ref := func(b ir.BufferType, i int) []ir.Ref { return []ir.Ref{{Buffer: b, Index: i % chunks, Size: 1}} }
	for r, g := range p.GPUs {
		g.ScratchChunks = chunks
		sem := g.AddSemaphore(big.NewInt(0))
		peers := make([]int, tbs)
		for t := range peers {
			peers[t] = g.AddChannel(ir.Memory, (r+1+t%(ranks-1))%ranks)
		}
		all := make([]int, tbs)
		for t := range all {
			all[t] = t
		}
		barrier := &ir.Op{Kind: plan.OpBarrier, Barrier: &ir.BarrierInfo{ID: g.BarrierID(all), TBList: all}}
		for t := 0; t < tbs; t++ {
			peer := (r + 1 + t%(ranks-1)) % ranks
			ch := g.RegisterChannel(t, ir.Memory, peers[t])
			rbOut := g.RegisterRemoteBuffer(t, peer, ir.Output, ir.Memory)
			rbScr := g.RegisterRemoteBuffer(t, peer, ir.Scratch, ir.Memory)
			rem := func(rb, i int) []ir.Ref { return []ir.Ref{{Remote: true, BufferID: rb, Index: i % chunks, Size: 1}} }
			tb := g.TB(t)
			add := func(o *ir.Op) { tb.Ops = append(tb.Ops, o) }
			for n, j := 0, 0; n < opsPerTB; j++ {
				c := t*4 + j
				add(&ir.Op{Kind: plan.OpCopy, Src: ref(ir.Input, c), Dst: ref(ir.Scratch, c)})
				add(&ir.Op{Kind: plan.OpPut, Src: ref(ir.Scratch, c), Dst: rem(rbScr, c), ChannelIDs: []int{ch}, ChannelType: ir.Memory})
				add(&ir.Op{Kind: plan.OpPut, Src: ref(ir.Input, c+1), Dst: rem(rbScr, c+1), ChannelIDs: []int{ch}, ChannelType: ir.Memory})
				add(&ir.Op{Kind: plan.OpSignal, IDSet: ir.NewSet(ch), ChannelType: ir.Memory, DataSync: ir.SyncBoth})
				add(&ir.Op{Kind: plan.OpWait, IDSet: ir.NewSet(ch), ChannelType: ir.Memory, DataSync: ir.SyncBoth})
				add(&ir.Op{Kind: plan.OpReduce, LocalSrc: append(ref(ir.Input, c), ref(ir.Scratch, c+2)...), LocalDst: ref(ir.Output, c)})
				add(&ir.Op{Kind: plan.OpPut, Src: ref(ir.Output, c), Dst: rem(rbOut, c), ChannelIDs: []int{ch}, ChannelType: ir.Memory})
				add(&ir.Op{Kind: plan.OpCopy, Src: ref(ir.Output, c), Dst: ref(ir.Input, c)})
				add(&ir.Op{Kind: plan.OpSemRelease, SemaphoreIDs: []int{sem}, DataSync: ir.SyncAfter})
				add(&ir.Op{Kind: plan.OpSemAcquire, SemaphoreIDs: []int{sem}, DataSync: ir.SyncBefore})
				n += 10
				if j == 2 {
					add(barrier)
					n++
				}
			}
		}
	}
	return p
}

// BenchmarkRun compiles a 64-rank program of 64 blocks × 50 ops per rank
// (about 200 000 recorded ops).
func BenchmarkRun(b *testing.B) {
	for _, inst := range []int{1, 2} {
		b.Run(fmt.Sprintf("instances=%d", inst), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				p := syntheticProgram(64, 64, 50, inst)
				runtime.GC()
				b.StartTimer()
				if err := Run(p, Config{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRunLarge runs the passes on a 128-rank program and checks the
// result; their cost is BenchmarkRun's to measure (a wall-clock limit in a
// test fails on a loaded machine).
func TestRunLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large program")
	}
	p := syntheticProgram(128, 64, 50, 1)
	if err := Run(p, Config{}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(p); err != nil {
		t.Fatal(err)
	}
}

// allreduceProgram records what the reference's single-node allreduce.py
// records for gpus ranks (8 thread blocks per rank, every rank talks to
// every other): long fusion chains of signals, waits, reductions and puts.
func allreduceProgram(gpus int) *ir.Program {
	const numTB = 8
	t := newProg()
	t.p = ir.NewProgram(gpus, gpus*numTB, gpus*numTB)
	t.p.Name, t.p.InstrFusion, t.p.AutoSync, t.p.Instances = "allreduce", true, true, 1
	type key struct{ peer, gpu, tb int }
	chs := map[key]*tch{}
	for g := 0; g < gpus; g++ {
		for tb := 0; tb < numTB; tb++ {
			for peer := 0; peer < gpus; peer++ {
				if peer != g {
					chs[key{peer, g, tb}] = t.mem(peer, g)
				}
			}
		}
	}
	each := func(f func(c *tch, g, tb, peer int)) {
		for g := 0; g < gpus; g++ {
			for tb := 0; tb < numTB; tb++ {
				for peer := 0; peer < gpus; peer++ {
					if peer != g {
						f(chs[key{peer, g, tb}], g, tb, peer)
					}
				}
			}
		}
	}
	each(func(c *tch, g, tb, peer int) { c.rlxSignal(tb, ir.SyncBoth) })
	each(func(c *tch, g, tb, peer int) { c.rlxWait(tb, ir.SyncAfter) })
	for g := 0; g < gpus; g++ {
		for tb := 0; tb < numTB; tb++ {
			idx := g*numTB + tb
			for peer := 0; peer < gpus; peer++ {
				if peer != g {
					chs[key{peer, g, tb}].reduce(I(g, idx, idx+1), []ck{I(peer, idx, idx+1)}, tbAt(tb), I(g, idx, idx+1), ir.Sum)
				}
			}
			for peer := 0; peer < gpus; peer++ {
				if peer != g {
					chs[key{peer, g, tb}].put(I(peer, idx, idx+1), I(g, idx, idx+1), tbAt(tb))
				}
			}
		}
	}
	each(func(c *tch, g, tb, peer int) { c.signal(tb, ir.SyncBefore) })
	each(func(c *tch, g, tb, peer int) { c.wait(tb, ir.SyncBoth) })
	return t.p
}

func tbAt(n int) at { return tb(n) }

// BenchmarkRunAllreduce compiles the 64-rank allreduce of allreduce.py.
func BenchmarkRunAllreduce(b *testing.B) {
	for _, gpus := range []int{8, 64, 128} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				p := allreduceProgram(gpus)
				runtime.GC()
				b.StartTimer()
				if err := Run(p, Config{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
