//go:build cgo

package emu

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
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

// TestSpeedTable is `make bench`: one table, measured in one run, of the
// machine's memcpy bandwidth, the CPU backend's busbw at 64 MiB (8-rank
// allreduce port, float and half), its time per launch at 128 B and
// 64 KiB, and the emulated device's time per launch beside the CPU
// backend's on the plan shapes of issue 33 (docs/gpu.md). It prints
// figures and asserts nothing about them (the machine is shared); it
// runs only with MSCCLGO_SPEED_TABLE=1.
func TestSpeedTable(t *testing.T) {
	if os.Getenv("MSCCLGO_SPEED_TABLE") == "" {
		t.Skip("set MSCCLGO_SPEED_TABLE=1 (make bench)")
	}
	port := func(tb testing.TB) *plan.Plan {
		p, err := executor.LoadFile("../../tests/ports/single_node/allreduce.plan.json")
		if err != nil && !plan.IsWarning(err) {
			tb.Fatal(err)
		}
		return p
	}
	arPort := port(t)
	arPacket := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "8"})
	ag := gputest.AlgorithmPlan(t, "allgather", map[string]string{"world_size": "8"})
	twoNode := gputest.AlgorithmPlan(t, "allreduce_hier_packet", map[string]string{"world_size": "16", "ranks_per_node": "8", "nblocks": "28"})

	only := os.Getenv("MSCCLGO_SPEED_ONLY") // a shape name prefix: that emulated shape alone; "cpu": the CPU lines alone
	if only == "" || only == "cpu" {
		cpuSpeed(t, arPort, arPacket)
	}
	if only == "cpu" {
		return
	}
	emuSpeed(t, only, arPacket, ag, arPort, twoNode)
}

// cpuSpeed prints the CPU backend's lines of TestSpeedTable. The busbw
// lines give the fraction of one core's memcpy and the fraction
// of the ceiling: an 8-rank allreduce in one memory reads every rank's
// input and writes every rank's output, n·size bytes each way, as much
// as a memcpy of n·size bytes, so its busbw is at most
// 2(n-1)/n² ≈ 22% of the memcpy bandwidth of every core (docs/executor.md).
func cpuSpeed(t *testing.T, arPort, arPacket *plan.Plan) {
	const n, size = 8, 64 << 20
	mem := memcpyBandwidth(size)
	memAll := memcpyBandwidthAll(size)
	ceiling := memAll * 2 * (n - 1) / (n * n)
	fmt.Printf("%-44s %10.2f GB/s\n", "memcpy (64 MiB, Go copy, one core)", mem/1e9)
	fmt.Printf("%-44s %10.2f GB/s\n", fmt.Sprintf("memcpy (64 MiB each, %d cores at once)", runtime.GOMAXPROCS(0)), memAll/1e9)
	fmt.Printf("%-44s %10.2f GB/s  (2(n-1)/n² of memcpy on every core)\n", "busbw ceiling, 8 ranks in one memory", ceiling/1e9)
	reduceSpeed(size)
	for _, dt := range []executor.ElemType{executor.Float32, executor.Float16, executor.BFloat16} {
		d, u, err := perLaunchCPU(cpu.New(), arPort, size, dt, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bus := busBW(size, n, d)
		fmt.Printf("%-44s %10.2f GB/s  %5.1f%% of memcpy  %5.1f%% of ceiling  (%v per launch, %v CPU time)\n",
			fmt.Sprintf("cpu busbw allreduce port 8 ranks 64 MiB %s", dt), bus/1e9, 100*bus/mem, 100*bus/ceiling,
			d.Round(time.Microsecond), u.Round(time.Microsecond))
	}
	for _, size := range []uint64{128, 64 << 10} {
		d, u, err := perLaunchCPU(cpu.New(), arPacket, size, executor.Float32, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%-44s %10.3f ms per launch  (%.3f ms CPU time)\n", fmt.Sprintf("cpu allreduce_packet 8 ranks %s float", sizeName(size)), d.Seconds()*1e3, u.Seconds()*1e3)
	}
}

// reduceSpeed prints the reductions' own lines of TestSpeedTable
// (issue 46): executor.ElemType.Reduce of size bytes (dst = a op b) in
// every type and op, on one core and split in equal parts over every
// core, as fractions of Go's copy of size bytes measured the same two
// ways in the same run. A reduction moves 1.5 times a copy's bytes (two
// reads and a write), so memory bounds it near 67% of memcpy.
func reduceSpeed(size int) {
	x, y, d := make([]byte, size), make([]byte, size), make([]byte, size)
	for _, t := range []executor.ElemType{executor.Float16, executor.BFloat16, executor.Float32} {
		for i := 0; i < size/t.Size(); i += 61 {
			t.SetFloat64(x, i, 1+float64(i%1000)/7)
			t.SetFloat64(y, i, 1+float64(i%999)/3)
		}
	}
	p := runtime.GOMAXPROCS(0)
	run := func(parts int, f func(lo, hi int)) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		step := (size/parts + 63) / 64 * 64
		for lo := 0; lo < size; lo += step {
			hi := min(lo+step, size)
			wg.Go(func() { f(lo, hi) })
		}
		wg.Wait()
		return time.Since(start)
	}
	cp := func(lo, hi int) { copy(d[lo:hi], x[lo:hi]) }
	// pair is the best of 11 alternations of a copy and f on parts cores:
	// their bandwidths, measured side by side (the machine is shared).
	pair := func(parts int, f func(lo, hi int)) (float64, float64) {
		f(0, size)
		bc, bf := time.Duration(1<<62), time.Duration(1<<62)
		for range 11 {
			bc = min(bc, run(parts, cp))
			bf = min(bf, run(parts, f))
		}
		return float64(size) / bc.Seconds(), float64(size) / bf.Seconds()
	}
	fmt.Printf("\n%-36s %9s %9s %7s %9s %9s %7s\n", fmt.Sprintf("reduce %s, dst = a op b", sizeName(uint64(size))), "1 core", "memcpy", "ratio", fmt.Sprintf("%d cores", p), "memcpy", "ratio")
	for _, t := range []executor.ElemType{executor.Float32, executor.Float16, executor.BFloat16, executor.Int32} {
		for _, op := range []executor.ReduceOp{executor.ReduceSum, executor.ReduceProd, executor.ReduceMax, executor.ReduceMin} {
			f := func(lo, hi int) { t.Reduce(op, d[lo:hi], x[lo:hi], y[lo:hi]) }
			c1, r1 := pair(1, f)
			cp, rp := pair(p, f)
			fmt.Printf("%-36s %5.2fGB/s %5.2fGB/s %6.1f%% %5.2fGB/s %5.2fGB/s %6.1f%%\n", fmt.Sprintf("%s %v", t, op),
				r1/1e9, c1/1e9, 100*r1/c1, rp/1e9, cp/1e9, 100*rp/cp)
		}
	}
	fmt.Printf("(GB/s of result bytes; vector kernels (AVX2, F16C): %v)\n", executor.HasVectorKernels())
	fmt.Println()
}

// emuSpeed prints the emulated device's lines of TestSpeedTable.
func emuSpeed(t *testing.T, only string, arPacket, ag, arPort, twoNode *plan.Plan) {
	fmt.Printf("\n%-36s %12s %12s %8s %12s %12s %8s\n", "per launch (half), wall and CPU time", "gpu-emu", "cpu", "ratio", "gpu-emu cpu", "cpu cpu", "ratio")
	emu := gpu.New(gpu.Config{Name: "gpu-emu", Open: Open})
	shapes := []struct {
		name string
		plan *plan.Plan
		size uint64
	}{
		{"allreduce_packet 8 ranks", arPacket, 64 << 10},
		{"allreduce_packet 8 ranks", arPacket, 1 << 20}, // its max_message_size
		{"allgather 8 ranks", ag, 64 << 10},
		{"allgather 8 ranks", ag, 4 << 20},
		{"allreduce port 8 ranks", arPort, 64 << 10},
		{"allreduce port 8 ranks", arPort, 4 << 20},
		{"two-node allreduce 16 ranks", twoNode, 64 << 10},
	}
	before := HostThreadsStarted()
	for _, s := range shapes {
		if only != "" && !strings.HasPrefix(s.name+" "+sizeName(s.size), only) {
			continue
		}
		de, ue, err := perLaunchCPU(emu, s.plan, s.size, executor.Float16, time.Second)
		if err != nil {
			t.Fatalf("gpu-emu %s: %v", s.name, err)
		}
		dc, uc, err := perLaunchCPU(cpu.New(), s.plan, s.size, executor.Float16, time.Second)
		if err != nil {
			t.Fatalf("cpu %s: %v", s.name, err)
		}
		fmt.Printf("%-36s %10.3fms %10.3fms %7.2fx %10.3fms %10.3fms %7.2fx\n", s.name+" "+sizeName(s.size),
			de.Seconds()*1e3, dc.Seconds()*1e3, de.Seconds()/dc.Seconds(), ue.Seconds()*1e3, uc.Seconds()*1e3, ue.Seconds()/uc.Seconds())
	}
	fmt.Printf("\nhost threads started by the emulated launches above: %d\n", HostThreadsStarted()-before)
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// busBW is nccl-tests' bus bandwidth of an allreduce of size bytes on n
// ranks taking d: size/d × 2(n-1)/n.
func busBW(size uint64, n int, d time.Duration) float64 {
	return float64(size) / d.Seconds() * 2 * float64(n-1) / float64(n)
}

// memcpyBandwidth is the bytes per second of Go's copy between two
// buffers of n bytes (each counted once, as busbw counts them).
func memcpyBandwidth(n int) float64 {
	a, b := make([]byte, n), make([]byte, n)
	copy(a, b)
	copy(b, a)
	best := time.Duration(1 << 62)
	for range 8 {
		start := time.Now()
		copy(a, b)
		best = min(best, time.Since(start))
	}
	return float64(n) / best.Seconds()
}

// memcpyBandwidthAll is the bytes per second of GOMAXPROCS Go copies of n
// bytes each, between buffers of their own, run at once.
func memcpyBandwidthAll(n int) float64 {
	p := runtime.GOMAXPROCS(0)
	bufs := make([][2][]byte, p)
	for i := range bufs {
		bufs[i] = [2][]byte{make([]byte, n), make([]byte, n)}
		copy(bufs[i][0], bufs[i][1])
	}
	best := time.Duration(1 << 62)
	for range 8 {
		var wg sync.WaitGroup
		start := time.Now()
		for i := range bufs {
			wg.Go(func() { copy(bufs[i][0], bufs[i][1]) })
		}
		wg.Wait()
		best = min(best, time.Since(start))
	}
	return float64(p*n) / best.Seconds()
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perLaunchCPU opens a session of plan at size on be, launches it once
// to warm it up and then for at least least (and at least 3 times), and
// returns the mean wall time and the mean CPU time (user and system,
// every thread of the process) of a launch: on a shared machine, the CPU
// time is the figure other processes' load disturbs least.
func perLaunchCPU(be executor.Backend, p *plan.Plan, size uint64, dt executor.ElemType, least time.Duration) (time.Duration, time.Duration, error) {
	l, err := harness.PlanLayout(p, size, dt, p.Inplace)
	if err != nil {
		return 0, 0, err
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		return 0, 0, err
	}
	s, err := be.Open(inst, executor.Options{DType: dt, DeadlockTimeout: 30 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	bufs := l.Alloc()
	l.FillInputs(bufs, 0)
	ctx := context.Background()
	if err := s.Launch(ctx, bufs); err != nil {
		return 0, 0, err
	}
	n := 0
	start, cpu0 := time.Now(), cpuTime()
	for n < 3 || time.Since(start) < least {
		if err := s.Launch(ctx, bufs); err != nil {
			return 0, 0, err
		}
		n++
	}
	return time.Since(start) / time.Duration(n), (cpuTime() - cpu0) / time.Duration(n), nil
}

// smallLLCase is the steady call of BenchmarkCommCall and
// TestSteadyCallAllocatesNothing: an in-place 128-byte LL allreduce of
// floats on 2 ranks.
func smallLLCase(tb testing.TB) (commCase, *harness.Layout) {
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(tb, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 128, dt: executor.Float32, inPlace: true}
	return c, c.layout(tb)
}

// BenchmarkCommCall: the host time of a steady-state devcomm.Comm call until
// it returns (an in-place 128-byte LL allreduce, 2 ranks as goroutines),
// the stream synchronised after each call outside the timing, so that
// the kernel's time is excluded; "meet" is the baseline where every call
// meets its peers over the bootstrap.
func BenchmarkCommCall(b *testing.B) {
	for _, meet := range []bool{false, true} {
		b.Run(fmt.Sprintf("meet=%v", meet), func(b *testing.B) {
			ss := NewStreams()
			defer ss.Close()
			c, lay := smallLLCase(b)
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
