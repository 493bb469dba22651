//go:build cgo

package emu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// hostThreads are the block sizes of TestHostAccesses: a plan runs at
// those whose grid fits MaxThreads host threads. Every plan runs at the
// first two; the wide ones cost about 20 times as much on two cores
// (thousands of host threads per launch), so by default every
// wideEvery-th plan runs at them too, and every plan with
// MSCCLGO_HOSTACCESS=all (make gpu-hostaccess).
var hostThreads = []int{1, 4, 32, 1024}

// wideEvery is the sampling of TestHostAccesses at more than 4 threads.
const wideEvery = 16

// wideThreads reports whether the i-th plan runs at more than 4 threads.
func wideThreads(i int) bool {
	return os.Getenv("MSCCLGO_HOSTACCESS") == "all" || i%wideEvery == 0
}

// trigger fan-out: the most port-channel triggers one op pushes (one per
// channel of a signal or flush, one per destination of a put).
func fanOut(inst *executor.Instance) int {
	most := 1
	var walk func(ops []executor.OpInstance)
	walk = func(ops []executor.OpInstance) {
		for i := range ops {
			op := &ops[i]
			if op.ChannelType == plan.Port {
				most = max(most, len(op.Channels), len(op.Dst))
			}
			walk(op.Body)
		}
	}
	for r := range inst.Ranks {
		for t := range inst.Ranks[r].TBs {
			walk(inst.Ranks[r].TBs[t].Ops)
		}
	}
	return most
}

// accessRun is one session of a plan on the emulated device: the counts
// of each launch and how the launches ended.
type accessRun struct {
	counts []Counts
	errs   []error
	bound  int // host-mapped accesses allowed per executed op
}

// runCounted opens inst on a new emulated device (wrapped by wrap, if
// not nil) with threads per block and launches it twice, keeping the
// device's counts after each launch. A launch that fails (a deadlock
// reported by the watchdog) still counts.
func runCounted(t *testing.T, inst *executor.Instance, l *executor.BufferLayout, threads int,
	wrap func(gpu.Driver) gpu.Driver) (accessRun, error) {
	t.Helper()
	var dev gpu.Driver
	cfg := gpu.Config{Name: "gpu-emu", Threads: threads, Open: func() (gpu.Driver, error) {
		d, err := Open()
		if err != nil {
			return nil, err
		}
		if err := CountHostAccesses(d); err != nil {
			return nil, err
		}
		dev = d
		if wrap != nil {
			return wrap(d), nil
		}
		return d, nil
	}}
	s, err := gpu.New(cfg).Open(inst, executor.Options{DType: executor.Float16, DeadlockTimeout: 300 * time.Millisecond})
	if err != nil {
		return accessRun{}, err
	}
	defer s.Close()
	run := accessRun{bound: 4 * fanOut(inst)}
	bufs := l.Alloc()
	for range 2 {
		err := s.Launch(context.Background(), bufs)
		c, cerr := HostAccesses(dev)
		if cerr != nil {
			t.Fatal(cerr)
		}
		run.counts = append(run.counts, c)
		run.errs = append(run.errs, err)
		if err != nil {
			break // the session is unusable after a failed launch
		}
	}
	return run, nil
}

// check reports every block of a run whose host-mapped accesses exceed
// the bound times its executed ops.
func (r accessRun) check() error {
	var bad []string
	for i, c := range r.counts {
		for b := range c.HostMapped {
			if c.HostMapped[b] > uint64(r.bound)*c.Ops[b] {
				bad = append(bad, fmt.Sprintf("launch %d block %d: %d host-mapped accesses for %d ops (at most %d per op)",
					i+1, b, c.HostMapped[b], c.Ops[b], r.bound))
			}
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// TestHostAccesses runs every plan of TestDifferential at 1 to 1024
// threads per block and requires that no block touches host-mapped
// memory more than a small constant times its executed ops: 4 stores
// per port-channel trigger (the FIFO slot), nothing else. Spinning adds
// nothing: the waits read device memory only.
func TestHostAccesses(t *testing.T) {
	for i, file := range planFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		wide := wideThreads(i)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plan, err := executor.LoadFile(file)
			if err != nil {
				t.Skipf("not loadable: %v", err)
			}
			sizes := harness.CheckSizes(plan, executor.Float16, 1<<15, 1)
			if len(sizes) == 0 {
				t.Skip("no valid size")
			}
			l, err := executor.PlanLayout(plan, sizes[0], executor.Float16, plan.Inplace)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := executor.Instantiate(plan, l.Sizes)
			if err != nil {
				t.Fatal(err)
			}
			blocks := 0
			for r := range inst.Ranks {
				blocks += len(inst.Ranks[r].TBs)
			}
			ran := 0
			for _, threads := range hostThreads {
				if blocks*threads > MaxThreads || (threads > 4 && !wide) {
					continue
				}
				run, err := runCounted(t, inst, l, threads, nil)
				if err != nil {
					t.Skipf("refused by the backend: %v", err)
				}
				if err := run.check(); err != nil {
					t.Errorf("%d threads: %v", threads, err)
				}
				ran++
			}
			if ran == 0 {
				t.Skipf("%d blocks: not even 1 thread per block fits %d host threads", blocks, MaxThreads)
			}
		})
	}
}

// slowCopies is the emulated device with a slow proxy copy engine: the
// kernel's blocks wait long for port-channel signals and flushes.
type slowCopies struct {
	gpu.Driver
	delay time.Duration
}

func (d slowCopies) Copy(dst, src gpu.DevPtr, n uint64, packets bool) error {
	time.Sleep(d.delay)
	return d.Driver.Copy(dst, src, n, packets)
}

// TestHostAccessesIndependentOfWaiting: the counts of a port-channel
// plan are the same whether the proxy is fast or slow (blocks spinning
// for tens of milliseconds per wait) and at every thread count, and a
// block that waits on a channel until the watchdog stops the launch
// touches no host-mapped memory at all.
func TestHostAccessesIndependentOfWaiting(t *testing.T) {
	// Two nodes of two ranks: port channels between the nodes (puts,
	// signals, flushes, waits).
	p := gputest.AlgorithmPlan(t, "allreduce_hier", map[string]string{"world_size": "4", "ranks_per_node": "2", "instances": "1", "min_message_size": "0"})
	l, err := executor.PlanLayout(p, harness.CheckSizes(p, executor.Float16, 1<<15, 1)[0], executor.Float16, p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := runCounted(t, inst, l, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, c := range fast.counts {
		for _, n := range c.HostMapped {
			total += n
		}
	}
	for i, c := range fast.counts {
		var h, o, most uint64
		for b := range c.HostMapped {
			h, o = h+c.HostMapped[b], o+c.Ops[b]
			most = max(most, c.HostMapped[b])
		}
		t.Logf("launch %d: %d host-mapped accesses, %d ops executed, %d blocks, at most %d accesses in a block",
			i+1, h, o, len(c.HostMapped), most)
	}
	if total == 0 {
		t.Fatalf("the port-channel plan pushed no trigger: the probe counts nothing: %+v", fast.counts)
	}
	for _, c := range []struct {
		name    string
		threads int
		delay   time.Duration
	}{{"slow proxy", 4, 30 * time.Millisecond}, {"slow proxy, 32 threads", 32, 30 * time.Millisecond}, {"1 thread", 1, 0}} {
		slow, err := runCounted(t, inst, l, c.threads, func(d gpu.Driver) gpu.Driver { return slowCopies{d, c.delay} })
		if err != nil {
			t.Fatal(err)
		}
		for i := range fast.counts {
			if err := slow.errs[i]; err != nil {
				t.Fatalf("%s: launch %d: %v", c.name, i+1, err)
			}
			if fmt.Sprint(slow.counts[i]) != fmt.Sprint(fast.counts[i]) {
				t.Errorf("%s: launch %d: counts %v, with a fast proxy and 4 threads %v", c.name, i+1, slow.counts[i], fast.counts[i])
			}
		}
	}

	// A block that spins until the watchdog aborts the launch.
	dl, err := plan.Load([]byte(deadlockPlan))
	if err != nil {
		t.Fatal(err)
	}
	dlay, err := executor.PlanLayout(dl, 1024, executor.Float16, dl.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	dinst, err := executor.Instantiate(dl, dlay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := runCounted(t, dinst, dlay, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	var de *executor.DeadlockError
	if !errors.As(stuck.errs[0], &de) {
		t.Fatalf("deadlock plan: got %v, want the watchdog's report", stuck.errs[0])
	}
	for b, n := range stuck.counts[0].HostMapped {
		if n != 0 {
			t.Errorf("deadlock plan: block %d touched host-mapped memory %d times while it waited", b, n)
		}
	}
}
