//go:build cgo

package emu

// rank_test.go runs plans with one GPU rank session per rank on the
// emulated device (IPC handles between the sessions' memory files, the
// port proxy over loopback TCP) and compares every rank's output with the
// CPU backend's single-process run, byte for byte.

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

func rankConfig() gpu.Config { return gpu.Config{Name: "gpu-emu", Open: OpenIPC, Threads: 2} }

// rankCase loads a plan of tests/ports and lays it out at the first of a
// few sizes that fits.
func rankCase(t *testing.T, file string, dt executor.Numeric) gputest.RankCase {
	t.Helper()
	plan, err := executor.LoadFile(filepath.Join("../../tests/ports", file))
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for _, size := range []uint64{1 << 14, 1 << 16, 1 << 18} {
		lay, err := harness.PlanLayout(plan, size, dt, plan.Inplace)
		if err == nil {
			if _, err = executor.Instantiate(plan, lay.Sizes); err == nil {
				return gputest.RankCase{Plan: plan, Layout: lay, Opts: executor.Options{DType: dt}, Launches: 3, Dir: t.TempDir()}
			}
		}
		last = err
	}
	t.Fatalf("%s: no size fits: %v", file, last)
	return gputest.RankCase{}
}

// TestRankSessions covers memory channels, NVLS, LL packets, pipelines
// and port channels (on one host and across hosts), fp32 and fp16.
func TestRankSessions(t *testing.T) {
	cases := []struct {
		file   string
		dt     executor.Numeric
		ll8    bool
		hostOf func(r int) int // nil: one host
	}{
		{file: "single_node/allreduce.plan.json", dt: executor.Float32},
		{file: "single_node/allreduce.plan.json", dt: executor.Float16},
		{file: "single_node/allreduce_nvls_zero_copy.plan.json", dt: executor.Float32},
		{file: "single_node/allgather.plan.json", dt: executor.Float32},
		{file: "single_node/allgather_pkt.plan.json", dt: executor.Float32},
		{file: "single_node/allgather_pkt.plan.json", dt: executor.Float32, ll8: true},
		{file: "single_node/allreduce_pipeline.plan.json", dt: executor.Float32},
		{file: "single_node/allgather_nvls_zero_copy_pkt.plan.json", dt: executor.Float32},
		{file: "unit_tests/put/put_with_signal_test.plan.json", dt: executor.Float32},
		{file: "unit_tests/put/put_with_signal_and_flush_test.plan.json", dt: executor.Float32},
		{file: "unit_tests/flush/flush_test.plan.json", dt: executor.Float32},
		{file: "unit_tests/put/put_with_signal_test.plan.json", dt: executor.Float32, hostOf: func(r int) int { return r }},
		{file: "unit_tests/flush/flush_test.plan.json", dt: executor.Float32, hostOf: func(r int) int { return r }},
	}
	for _, tc := range cases {
		name := strings.TrimSuffix(filepath.Base(tc.file), ".plan.json") + "/" + tc.dt.Name()
		if tc.ll8 {
			name += "/ll8"
		}
		if tc.hostOf != nil {
			name += "/hosts"
		}
		t.Run(name, func(t *testing.T) {
			c := rankCase(t, tc.file, tc.dt)
			c.Opts.LL8 = tc.ll8
			if tc.hostOf != nil {
				c.Hosts = make([]int, len(c.Plan.GPUs))
				for r := range c.Hosts {
					c.Hosts[r] = tc.hostOf(r)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			want, err := gputest.SingleCPU(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			got, errs := gputest.RunRanks(ctx, rankConfig(), c)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := range want {
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d output differs from the CPU backend's (-want +got):\n%.2000s", r, diff)
				}
				if c.Layout.Checked() {
					if w, err := c.Layout.CheckRank(got[r], r, c.Launches-1); err != nil || w != 0 {
						t.Errorf("rank %d: %d wrong elements, %v", r, w, err)
					}
				}
			}
		})
	}
}

// TestRankSessionsRefuse: memory channels between hosts are refused on
// every rank.
func TestRankSessionsRefuse(t *testing.T) {
	c := rankCase(t, "single_node/allgather.plan.json", executor.Float32)
	n := len(c.Plan.GPUs)
	c.Hosts = make([]int, n)
	c.Hosts[n-1] = 1
	c.Launches = 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, errs := gputest.RunRanks(ctx, rankConfig(), c)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "on another host") {
			t.Errorf("rank %d: got %v, want an error about a memory channel to another host", r, err)
		}
	}
}

// TestRankSessionsDeadlock: rank 0 waits for signals rank 1 never sends;
// the job-wide watch ends rank 0's launch with a report of its blocked
// thread block.
func TestRankSessionsDeadlock(t *testing.T) {
	c := rankCase(t, "unit_tests/signal_wait/signal_wait_test.plan.json", executor.Float32)
	for i := range c.Plan.GPUs[1].ThreadBlocks {
		tb := &c.Plan.GPUs[1].ThreadBlocks[i]
		var keep []plan.Op
		for _, op := range tb.Ops {
			if op.Type != plan.OpSignal {
				keep = append(keep, op)
			}
		}
		tb.Ops = keep
	}
	c.Launches = 1
	c.Opts.DeadlockTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, errs := gputest.RunRanks(ctx, rankConfig(), c)
	var de *executor.DeadlockError
	if !errors.As(errs[0], &de) {
		t.Fatalf("rank 0: got %v, want a deadlock", errs[0])
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 0 tb 0") || !strings.Contains(err.Error(), "expects signal") {
			t.Errorf("rank %d: the report does not show rank 0 waiting for a signal:\n%v", r, err)
		}
	}
}

// TestIPC: memory exported by one OpenIPC device and opened by another is
// the same memory both ways; Open's memory, foreign handles and closing
// what was not opened are errors.
func TestIPC(t *testing.T) {
	a, _ := OpenIPC()
	b, _ := OpenIPC()
	p, err := a.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free(p)
	want := []byte("written by the exporter")
	if err := a.HtoD(p, want); err != nil {
		t.Fatal(err)
	}
	h, err := a.IpcGet(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.IpcOpen(h)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := b.DtoH(got, q); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the opener reads (-want +got):\n%s", diff)
	}
	back := []byte("written by the opener")
	if err := b.HtoD(q, back); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len(back))
	if err := a.DtoH(got, p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(back, got); diff != "" {
		t.Errorf("the exporter reads (-want +got):\n%s", diff)
	}
	if err := b.IpcClose(q); err != nil {
		t.Error(err)
	}

	plain, _ := Open()
	r, err := plain.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Free(r)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"export from Open", func() error { _, err := plain.IpcGet(r); return err }(), "opened without IPC"},
		{"export inside an allocation", func() error { _, err := a.IpcGet(p + 8); return err }(), "not the start of an exportable allocation"},
		{"foreign handle", func() error { _, err := b.IpcOpen(gpu.IpcHandle{1, 2, 3}); return err }(), "not a handle of the emulated device"},
		{"close twice", b.IpcClose(q), "was not opened by IpcOpen"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
}
