//go:build cgo

package emu

import (
	"context"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
)

// TestLaunchesStartNoThreads: the emulated device runs a launch on the
// process's pool of host threads, so launches after the first of a
// session (8 ranks, every block's threads at once) start no thread. It
// is not parallel: no other test launches meanwhile.
func TestLaunchesStartNoThreads(t *testing.T) {
	plan := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "8"})
	l, err := harness.PlanLayout(plan, 64<<10, executor.Float16, plan.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(plan, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	be := gpu.New(gpu.Config{Name: "gpu-emu", Open: Open})
	s, err := be.Open(inst, executor.Options{DType: executor.Float16, DeadlockTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bufs := l.Alloc()
	before := HostThreadsStarted()
	if err := s.Launch(context.Background(), bufs); err != nil {
		t.Fatal(err)
	}
	first := HostThreadsStarted()
	for range 3 {
		if err := s.Launch(context.Background(), bufs); err != nil {
			t.Fatal(err)
		}
	}
	if n := HostThreadsStarted(); n != first {
		t.Errorf("3 launches after the first started %d host threads, want none (the first started %d)", n-first, first-before)
	}
}
