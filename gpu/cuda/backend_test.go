//go:build cuda

package cuda

// backend_test.go is the differential test of the CUDA backend: plans run
// through gpu.New over this driver and through the CPU reference backend
// with the same inputs, and every byte of every rank's buffers must match
// after every launch (gpu/gputest).

import (
	"context"
	"errors"
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

// sharedGolden holds the MSCCL++ reference plans, beside the checkout.
const sharedGolden = "../../../shared/golden"

// backend is the CUDA backend on device 0 with the test block size (the
// plan's own on a real device would also do; the fake driver runs every
// CUDA thread as a host thread).
func backend() executor.Backend {
	return gpu.New(gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return testNode.Open(0) }, Threads: testThreads()})
}

// TestDifferential runs a few reference plans that cover the kernel's
// paths: memory-channel allreduce, LL-packet allgather, port channels
// (the proxy's copies, flags and flushes), pipelines, and a plan of the
// project's own. Float32 at up to three valid sizes below 16 KiB, two
// launches each.
func TestDifferential(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(sharedGolden, "MANIFEST.tsv")); err != nil {
		t.Skipf("reference plans not found at %s (they come with the project's shared/ directory)", sharedGolden)
	}
	for _, tc := range []struct {
		name string // the file under sharedGolden, without .json
		what string
	}{
		{"allreduce__ngpus-2", "memory channels, reduce-send"},
		{"allreduce_naivy__ngpus-2", "LL packets, reduce"},
		{"allgather_pkt__ngpus-2", "LL packets, put"},
		{"put_with_signal_test", "port channels: proxy copies and flags"},
		{"put_with_signal_and_flush_test", "port channels: flush"},
		{"flush_test", "port channels: flush"},
		{"allreduce_pipeline", "pipelines"},
		{"alltoall_pipeline__ngpus-2", "pipelines, put"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan, err := executor.LoadFile(filepath.Join(sharedGolden, tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			run(t, plan, tc.what)
		})
	}
}

// TestDifferentialProjectPlan runs the project's golden plan that uses
// every builtin (port channels included).
func TestDifferentialProjectPlan(t *testing.T) {
	t.Parallel()
	p, err := executor.LoadFile("../../tests/testdata/every_builtin.plan.json")
	if err != nil {
		if errors.Is(err, plan.ErrUnknownOp) || strings.Contains(err.Error(), "data after the plan's JSON object") {
			t.Skipf("not a single loadable plan: %v", err)
		}
		t.Fatal(err)
	}
	run(t, p, "every builtin")
}

func run(t *testing.T, p *plan.Plan, what string) {
	t.Helper()
	sizes := harness.CheckSizes(p, executor.Float32, 1<<14, 3)
	if len(sizes) == 0 {
		t.Fatalf("no valid float32 size in [%d, %d]", p.MinMessageSize, p.MaxMessageSize)
	}
	for _, size := range sizes {
		c := gputest.Case{Plan: p, Size: size, DType: executor.Float32, InPlace: p.Inplace, Launches: 2,
			Timeout: 2 * time.Second}
		if !runCase(t, c, what) {
			return
		}
	}
}

// runCase runs one case and reports whether larger sizes are worth
// running (not after a deadlock).
func runCase(t *testing.T, c gputest.Case, what string) bool {
	t.Helper()
	out, err := gputest.Run(context.Background(), backend(), c)
	switch {
	case err != nil:
		t.Errorf("%s (%s): %v", c, what, err)
	case out == gputest.Deadlock && c.Plan.Collective != "test":
		t.Errorf("%s (%s): the collective deadlocks on both backends", c, what)
		return false
	case out == gputest.Deadlock:
		t.Logf("%s (%s): deadlock on both backends, reported by the watchdog (a test plan: no defined result)", c, what)
		return false
	case out == gputest.Racy:
		t.Logf("%s (%s): racy plan (the CPU backend reports a race): outputs not compared", c, what)
	default:
		t.Logf("%s (%s): identical to the CPU backend", c, what)
	}
	return true
}

// TestGraphCapture runs plans through sessions that capture their launch
// (the staged arguments' copy, the cleared progress records, the kernel)
// into a CUDA graph at the first launch and replay it at the next ones,
// against the CPU backend: on the fake driver, its capture records the
// stream's work and cuGraphLaunch replays it.
func TestGraphCapture(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(sharedGolden, "MANIFEST.tsv")); err != nil {
		t.Skipf("reference plans not found at %s (they come with the project's shared/ directory)", sharedGolden)
	}
	be := gpu.New(gpu.Config{Name: "gpu", Threads: testThreads(), Graph: true, Open: func() (gpu.Driver, error) { return Open(0) }})
	for _, name := range []string{"allreduce_naivy__ngpus-2", "put_with_signal_and_flush_test", "allreduce__ngpus-2"} {
		plan, err := executor.LoadFile(filepath.Join(sharedGolden, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range harness.CheckSizes(plan, executor.Float32, 1<<14, 2) {
			c := gputest.Case{Plan: plan, Size: size, DType: executor.Float32, InPlace: plan.Inplace, Launches: 3,
				Timeout: 5 * time.Second}
			out, err := gputest.Run(context.Background(), be, c)
			if err != nil {
				t.Fatalf("%s %s: %v", name, c, err)
			}
			if out != gputest.Same && plan.Collective != "test" {
				t.Fatalf("%s %s: outcome %v, want identical buffers", name, c, out)
			}
		}
	}
}
