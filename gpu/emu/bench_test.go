//go:build cgo

package emu

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
)

// BenchmarkTwoNodeAllReduce runs the shape of MSCCL++'s default
// two-node small-message allreduce on the emulated device: 16 ranks on
// two logical nodes, 29 thread blocks per rank (464 blocks), LL packets
// within a node and port channels across, 64 KiB of float16, at the
// emulation's default 8 threads per block (3,712 host threads). One op
// is one launch of a session opened once; the CPU backend runs the same
// session beside it, so the ratio gpu-emu/cpu is measured in one run.
func BenchmarkTwoNodeAllReduce(b *testing.B) {
	plan := gputest.AlgorithmPlan(b, "allreduce_hier_packet", map[string]string{"world_size": "16", "ranks_per_node": "8", "nblocks": "28"})
	l, err := executor.PlanLayout(plan, 64<<10, executor.Float16, plan.Inplace)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := executor.Instantiate(plan, l.Sizes)
	if err != nil {
		b.Fatal(err)
	}
	blocks := 0
	for r := range inst.Ranks {
		blocks += len(inst.Ranks[r].TBs)
	}
	if blocks != 464 {
		b.Fatalf("%d blocks, want 464", blocks)
	}
	for _, be := range []executor.Backend{gpu.New(gpu.Config{Name: "gpu-emu", Open: Open}), cpu.New()} {
		b.Run(be.Name(), func(b *testing.B) {
			s, err := be.Open(inst, executor.Options{DType: executor.Float16})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			bufs := l.Alloc()
			b.ResetTimer()
			for range b.N {
				if err := s.Launch(context.Background(), bufs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBackToBack: launches of one session back to back on the
// emulated device (an 8-rank LL allreduce at 1 KiB, or the plan of
// MSCCLGO_BENCH_PLAN at MSCCLGO_BENCH_SIZE), with and without graph
// capture.
func BenchmarkBackToBack(b *testing.B) {
	plan, size, threads, ok, err := gputest.BenchEnv()
	if err != nil {
		b.Fatal(err)
	}
	if !ok {
		plan = gputest.AlgorithmPlan(b, "allreduce_packet", map[string]string{"world_size": "8"})
		size = 1 << 10
	}
	for _, g := range []bool{false, true} {
		b.Run(fmt.Sprintf("graph=%v", g), func(b *testing.B) {
			gputest.BackToBack(b, gpu.New(gpu.Config{Name: "gpu-emu", Open: Open, Threads: threads, Graph: g}), plan, size)
		})
	}
}

// BenchmarkCommCall: the host time of a steady-state gpu.Comm call until
// it returns (an in-place 128-byte LL allreduce, 2 ranks as goroutines),
// the stream synchronised after each call outside the timing, so that
// the kernel's time is excluded; "meet" is the baseline where every call
// meets its peers over the bootstrap.
func BenchmarkCommCall(b *testing.B) {
	for _, meet := range []bool{false, true} {
		b.Run(fmt.Sprintf("meet=%v", meet), func(b *testing.B) {
			ss := NewStreams()
			defer ss.Close()
			c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(b, "allreduce_packet", map[string]string{"world_size": "2"}),
				size: 128, dt: executor.Float32, inPlace: true}
			lay := c.layout(b)
			var mu sync.Mutex
			var total time.Duration
			errs := withRanksConfig(b, ss, 2, func(cfg *gpu.Config) { cfg.MeetEveryCall = meet }, func(cr *commRank) error {
				if err := cr.place(lay.BufferLayout); err != nil {
					return err
				}
				call := c.call(lay, cr, executor.Options{DType: c.dt})
				var mine time.Duration
				for i := range b.N + 1 {
					t0 := time.Now()
					if err := cr.comm.Enqueue(context.Background(), call); err != nil {
						return err
					}
					if i > 0 {
						mine += time.Since(t0)
					}
					if err := ss.Synchronize(cr.st, time.Minute); err != nil {
						return err
					}
				}
				mu.Lock()
				total += mine
				mu.Unlock()
				return cr.comm.AsyncError()
			})
			noErrors(b, errs)
			b.ReportMetric(float64(total.Nanoseconds())/float64(2*b.N), "ns/call")
		})
	}
}
