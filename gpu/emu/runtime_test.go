//go:build cgo

package emu

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// deadlockPlan: rank 0 waits on a memory channel that rank 1 never
// signals.
const deadlockPlan = `{"name": "deadlock", "collective": "test", "protocol": "Simple", "inplace": false,
 "num_threads_per_block": 1024, "buffer_alignment": 16, "gpus": [
 {"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
  "channels": [{"channel_type": "memory", "connected_to": [1]}], "remote_buffers": [],
  "threadblocks": [{"id": 0, "ops": [{"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
     "dst_buff": [{"type": "o", "index": 0, "size": 1}]}, {"name": "nop"},
    {"name": "wait", "channel_type": "memory", "channel_ids": [0]}],
   "channels": [{"channel_type": "memory", "channel_ids": [0]}], "remote_buffer_refs": []}]},
 {"id": 1, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
  "channels": [{"channel_type": "memory", "connected_to": [0]}], "remote_buffers": [],
  "threadblocks": [{"id": 0, "ops": [{"name": "nop"}], "channels": [], "remote_buffer_refs": []}]}]}`

func openPlan(t *testing.T, text string, size uint64, cfg gpu.Config, opts executor.Options) (executor.Session, *executor.BufferLayout) {
	t.Helper()
	p, err := plan.Load([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	l, err := executor.PlanLayout(p, size, executor.Float32, p.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(p, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	if opts.DType == nil {
		opts.DType = executor.Float32
	}
	s, err := gpu.New(cfg).Open(inst, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, l
}

var emuConfig = gpu.Config{Name: "gpu-emu", Open: Open, Threads: 2}

// TestWatchdogReportsDeadlock: a launch that cannot complete ends with the
// watchdog's report naming the blocked block, its op and what it waits
// for; the session is unusable afterwards.
func TestWatchdogReportsDeadlock(t *testing.T) {
	s, l := openPlan(t, deadlockPlan, 1024, emuConfig, executor.Options{DeadlockTimeout: 100 * time.Millisecond})
	bufs := l.Alloc()
	err := s.Launch(context.Background(), bufs)
	var dl *executor.DeadlockError
	if !errors.As(err, &dl) {
		t.Fatalf("got %v, want a deadlock", err)
	}
	want := executor.BlockedTB{Rank: 0, TB: 0, Op: "op 2 wait", Waiting: "memory channel 0 from rank 1 expects signal 1, has 0"}
	if len(dl.Blocked) != 1 || dl.Blocked[0] != want {
		t.Errorf("blocked = %+v, want [%+v]", dl.Blocked, want)
	}
	if err := s.Launch(context.Background(), bufs); !errors.Is(err, executor.ErrUnusable) {
		t.Errorf("launch after a deadlock: got %v, want ErrUnusable", err)
	}
}

// TestCancel: cancelling the context stops a launch that waits forever.
func TestCancel(t *testing.T) {
	s, l := openPlan(t, deadlockPlan, 1024, emuConfig, executor.Options{DeadlockTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	err := s.Launch(ctx, l.Alloc())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// limited is the emulated device with a small device's limits.
type limited struct {
	gpu.Driver
	resident, shmem int
}

func (d limited) Info() gpu.DeviceInfo {
	i := d.Driver.Info()
	i.MaxSharedPerBlock = d.shmem
	return i
}

func (d limited) Occupancy(block, shmem int) (int, error) { return d.resident, nil }

// TestRefusesWhatCannotBeResident: a plan whose blocks cannot all be
// resident at once (they spin on each other) or whose ops do not fit in
// shared memory is refused at Open with the figures.
func TestRefusesWhatCannotBeResident(t *testing.T) {
	plan, err := executor.LoadFile(filepath.Join("..", "..", "tests", "ports", "single_node", "allreduce.plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := executor.PlanLayout(plan, 1<<12, executor.Float32, plan.Inplace)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := executor.Instantiate(plan, l.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name            string
		resident, shmem int
		want            string
	}{
		{"occupancy", 3, 1 << 20, "must all be resident at once"},
		{"shared memory", 1 << 10, 64, "bytes of shared memory, the device allows 64"},
	} {
		cfg := gpu.Config{Name: "small", Threads: 2, Open: func() (gpu.Driver, error) {
			d, err := Open()
			return limited{Driver: d, resident: c.resident, shmem: c.shmem}, err
		}}
		_, err := gpu.New(cfg).Open(inst, executor.Options{DType: executor.Float32})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestBadBuffers: buffers that do not match the instance fail the launch
// before anything runs, as on the CPU backend, and the session goes on.
func TestBadBuffers(t *testing.T) {
	s, l := openPlan(t, deadlockPlan, 1024, emuConfig, executor.Options{})
	bufs := l.Alloc()
	bufs[0].Input = bufs[0].Input[:16]
	if err := s.Launch(context.Background(), bufs); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("short input: got %v", err)
	}
	if err := s.Launch(context.Background(), bufs[:1]); err == nil || !strings.Contains(err.Error(), "buffers for 1 ranks") {
		t.Errorf("one rank's buffers: got %v", err)
	}
}

// TestGraphCapture runs plans through sessions that capture their launch
// into a graph at the first launch and replay it after (Config.Graph),
// against the CPU backend: LL packets (the flag changes per launch and
// reaches the replay through the staged arguments), memory channels,
// port channels, double-buffered scratch; in-place and out-of-place
// buffers that move between the session's launches change the rank table
// outside the graph.
func TestGraphCapture(t *testing.T) {
	for _, name := range []string{"allreduce_packet", "allreduce_rsag", "allreduce_hier"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defines := map[string]string{"world_size": "4", "min_message_size": "0"}
			if name == "allreduce_hier" {
				defines["ranks_per_node"] = "2"
				defines["instances"] = "1"
			}
			plan := gputest.AlgorithmPlan(t, name, defines)
			var calls counting
			be := gpu.New(gpu.Config{Name: "gpu-emu", Threads: 4, Graph: true, Open: func() (gpu.Driver, error) {
				d, err := Open()
				return &countingDriver{Driver: d, c: &calls}, err
			}})
			sizes := harness.CheckSizes(plan, executor.Float32, 1<<14, 2)
			if len(sizes) == 0 {
				t.Fatal("no valid size")
			}
			for _, size := range sizes {
				for _, ll8 := range []bool{false, true} {
					c := gputest.Case{Plan: plan, Size: size, DType: executor.Float32, InPlace: plan.Inplace, LL8: ll8,
						Launches: 3, Timeout: 2 * time.Second}
					out, err := gputest.Run(context.Background(), be, c)
					if err != nil {
						t.Fatalf("%s: %v", c, err)
					}
					if out != gputest.Same {
						t.Fatalf("%s: outcome %v, want identical buffers", c, out)
					}
				}
			}
			// One capture per session (one kernel launch recorded), a
			// replay per launch.
			sessions := 2 * len(sizes)
			if calls.launches.Load() != int64(sessions) || calls.replays.Load() != int64(3*sessions) {
				t.Errorf("%d launches and %d replays for %d sessions of 3 launches: want one captured launch per session",
					calls.launches.Load(), calls.replays.Load(), sessions)
			}
		})
	}
}

type counting struct{ launches, replays atomic.Int64 }

// countingDriver counts the kernel launches and graph replays.
type countingDriver struct {
	gpu.Driver
	c *counting
}

func (d *countingDriver) Launch(grid, block, shmem int, args gpu.DevPtr) error {
	d.c.launches.Add(1)
	return d.Driver.Launch(grid, block, shmem, args)
}

func (d *countingDriver) Replay(g gpu.Graph) error {
	d.c.replays.Add(1)
	return d.Driver.Replay(g)
}
