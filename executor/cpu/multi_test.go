package cpu_test

// multi_test.go runs plans with one rank session per rank, connected by
// package bootstrap over loopback TCP in this test process (each rank with its
// own session, instance and shared mappings, as separate processes would
// have), and compares every rank's output with the single-process run.
// The real multi-process runs (mpirun, torchrun variables, network
// namespaces, killed ranks) are the CLI's tests.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// connectWorld connects n ranks in this process.
func connectWorld(t *testing.T, n int) []*bootstrap.Bootstrap {
	t.Helper()
	bs, err := bootstrap.ConnectLocal(context.Background(), n, t.TempDir(), bootstrap.Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { bootstrap.CloseAll(bs) })
	return bs
}

// runRanks runs launches launches of p on every rank of bs in parallel,
// each rank in its own session (OpenRank), as processes of one job
// would, and returns each rank's output and error.
func runRanks(t *testing.T, bs []*bootstrap.Bootstrap, p *plan.Plan, lay *harness.Layout, hosts []int, o executor.Options, launches int, tag uint32) ([][]byte, []error) {
	return eachRank(t, bs, p, lay, hosts, o, tag, func(ctx context.Context, r int, rs *cpu.RankSession) ([]byte, error) {
		for seq := range launches {
			lay.FillRank(rs.Buffers().Input, r, seq)
			// Every rank finishes a launch before anyone refills,
			// and learns how the others' went.
			if err := exchangeResult(ctx, bs[r], rs.Launch(ctx)); err != nil {
				return nil, err
			}
		}
		return append([]byte(nil), rs.Buffers().Output...), nil
	})
}

// eachRank opens a session of p for every rank of bs in parallel and
// runs body on it (under a minute's deadline); after body, the ranks
// meet at a barrier. It returns what body returned on each rank.
func eachRank(t *testing.T, bs []*bootstrap.Bootstrap, p *plan.Plan, lay *harness.Layout, hosts []int, o executor.Options, tag uint32,
	body func(ctx context.Context, r int, rs *cpu.RankSession) ([]byte, error)) ([][]byte, []error) {
	t.Helper()
	n := len(bs)
	outs := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			errs[r] = func() error {
				inst, err := executor.Instantiate(p, lay.Sizes)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				rs, err := cpu.OpenRank(ctx, inst, lay.BufferLayout, o, rankwire.World{Net: bs[r], Host: hosts, Tag: tag})
				if err != nil {
					return err
				}
				defer rs.Close()
				if outs[r], err = body(ctx, r, rs); err != nil {
					return err
				}
				return bs[r].Barrier(ctx)
			}()
		})
	}
	wg.Wait()
	return outs, errs
}

// exchangeResult all-gathers each rank's launch result and returns the
// first failure of any rank (this rank's own error as is).
func exchangeResult(ctx context.Context, b *bootstrap.Bootstrap, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	parts, gerr := b.AllGather(ctx, []byte(msg))
	if err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	for r, p := range parts {
		if len(p) > 0 {
			return fmt.Errorf("rank %d: %s", r, p)
		}
	}
	return nil
}

// singleProcess runs plan on the ordinary session for launches launches.
func singleProcess(t *testing.T, p *plan.Plan, lay *harness.Layout, o executor.Options, launches int) [][]byte {
	inst, err := executor.Instantiate(p, lay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cpu.New().Open(inst, o)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	bufs := lay.Alloc()
	for seq := range launches {
		lay.FillInputs(bufs, seq)
		if err := sess.Launch(context.Background(), bufs); err != nil {
			t.Fatal(err)
		}
	}
	outs := make([][]byte, len(bufs))
	for r, b := range bufs {
		outs[r] = b.Output
	}
	return outs
}

// TestRankSessions runs plans with memory channels, port channels, NVLS,
// LL packets and Simple across rank sessions and compares the outputs
// with one process's, byte for byte.
func TestRankSessions(t *testing.T) {
	plans := []struct {
		file  string
		hosts []int // nil: one host
	}{
		{file: "single_node/allreduce.plan.json"},
		{file: "single_node/allreduce_nvls_zero_copy.plan.json"},
		{file: "single_node/allgather.plan.json"},
		{file: "single_node/allgather_pkt.plan.json"},
		{file: "single_node/allreduce_pipeline.plan.json"},
		{file: "single_node/allgather_nvls_zero_copy_pkt.plan.json"},
		{file: "unit_tests/put/put_with_signal_test.plan.json"},
		{file: "unit_tests/put/put_with_signal_and_flush_test.plan.json"},
		{file: "unit_tests/flush/flush_test.plan.json"},
	}
	for _, pc := range plans {
		t.Run(strings.TrimSuffix(filepath.Base(pc.file), ".plan.json"), func(t *testing.T) {
			path := filepath.Join("../../tests/ports", pc.file)
			plan, err := executor.LoadFile(path)
			if err != nil {
				t.Skipf("%s: %v", path, err)
			}
			dt := f32Type(t)
			lay, _, err := instantiate(plan, dt)
			if err != nil {
				t.Fatal(err)
			}
			n := len(plan.GPUs)
			hosts := pc.hosts
			if hosts == nil {
				hosts = make([]int, n)
			}
			o := executor.Options{DType: dt}
			want := singleProcess(t, plan, lay, o, 3)
			bs := connectWorld(t, n)
			got, errs := runRanks(t, bs, plan, lay, hosts, o, 3, 1000)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := range n {
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d output differs from the single-process run (-want +got):\n%.2000s", r, diff)
				}
				if lay.Checked() {
					if w, err := lay.CheckRank(got[r], r, 2); err != nil || w != 0 {
						t.Errorf("rank %d: %d wrong elements, %v", r, w, err)
					}
				}
			}
		})
	}
}

func f32Type(*testing.T) executor.Numeric { return executor.Float32 }

// TestRankSessionsPortAcrossHosts puts the two ranks of port-channel
// plans on different hosts: only the TCP transport connects them.
func TestRankSessionsPortAcrossHosts(t *testing.T) {
	for _, file := range []string{"unit_tests/put/put_with_signal_test.plan.json", "unit_tests/flush/flush_test.plan.json"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			plan, err := executor.LoadFile(filepath.Join("../../tests/ports", file))
			if err != nil {
				t.Fatal(err)
			}
			dt := f32Type(t)
			lay, _, err := instantiate(plan, dt)
			if err != nil {
				t.Fatal(err)
			}
			o := executor.Options{DType: dt}
			want := singleProcess(t, plan, lay, o, 2)
			n := len(plan.GPUs)
			hosts := make([]int, n)
			for r := range hosts {
				hosts[r] = r
			}
			got, errs := runRanks(t, connectWorld(t, n), plan, lay, hosts, o, 2, 2000)
			for r := range n {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if diff := cmp.Diff(want[r], got[r]); diff != "" {
					t.Errorf("rank %d differs (-want +got):\n%.2000s", r, diff)
				}
			}
		})
	}
}

// TestRankSessionsRefuse: a world size that differs from the plan's, and
// memory channels between hosts, are errors on every rank.
func TestRankSessionsRefuse(t *testing.T) {
	plan, err := executor.LoadFile("../../tests/ports/single_node/allgather.plan.json")
	if err != nil {
		t.Fatal(err)
	}
	dt := f32Type(t)
	lay, _, err := instantiate(plan, dt)
	if err != nil {
		t.Fatal(err)
	}
	n := len(plan.GPUs)
	bs := connectWorld(t, n)
	hosts := make([]int, n)
	hosts[n-1] = 1
	_, errs := runRanks(t, bs, plan, lay, hosts, executor.Options{DType: dt}, 1, 3000)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "on another host") {
			t.Errorf("rank %d: got %v, want an error about a memory channel to another host", r, err)
		}
	}

	small := connectWorld(t, n-1)
	inst, err := executor.Instantiate(plan, lay.Sizes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cpu.OpenRank(context.Background(), inst, lay.BufferLayout, executor.Options{DType: dt}, rankwire.World{Net: small[0], Host: make([]int, n-1)})
	want := fmt.Sprintf("the plan has %d ranks and the job %d processes", n, n-1)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// TestRankSessionsDeadlock: rank 0 waits for a signal rank 1 never
// sends; every rank's launch ends with a deadlock report that lists the
// blocked thread block.
func TestRankSessionsDeadlock(t *testing.T) {
	p, err := executor.LoadFile("../../tests/ports/unit_tests/signal_wait/signal_wait_test.plan.json")
	if err != nil {
		t.Skip(err)
	}
	// Drop rank 1's signals: its waits' partners never come.
	for i := range p.GPUs[1].ThreadBlocks {
		tb := &p.GPUs[1].ThreadBlocks[i]
		var keep []plan.Op
		for _, op := range tb.Ops {
			if op.Type != plan.OpSignal {
				keep = append(keep, op)
			}
		}
		tb.Ops = keep
	}
	dt := f32Type(t)
	lay, _, err := instantiate(p, dt)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.GPUs)
	o := executor.Options{DType: dt, DeadlockTimeout: 200 * time.Millisecond}
	_, errs := runRanks(t, connectWorld(t, n), p, lay, make([]int, n), o, 1, 4000)
	for r, err := range errs {
		var de *executor.DeadlockError
		if r == 0 && !errors.As(err, &de) {
			t.Errorf("rank %d: got %v, want a deadlock", r, err)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "rank 0 tb 0") || !strings.Contains(err.Error(), "expects signal") {
			t.Errorf("rank %d: the report does not show rank 0 waiting for a signal:\n%v", r, err)
		}
	}
}
