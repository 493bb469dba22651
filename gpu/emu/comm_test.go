//go:build cgo

package emu

// comm_test.go runs collectives through devcomm.Comm, a communicator's rank
// on the caller's device buffers and stream: ranks as goroutines of this
// process, each with its own bootstrap over loopback TCP, its buffers in
// emulated device memory and its stream of an emu.Streams; every output
// is compared byte for byte with the CPU backend's run of the same plan.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/devcomm"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// commRank is one rank of a communicator test: its comm, stream and
// device buffers.
type commRank struct {
	rank   int
	boot   *bootstrap.Bootstrap
	comm   *devcomm.Comm
	st     gpu.Stream
	dev    gpu.Driver // allocates the user buffers
	mem    gpu.DevPtr
	in     gpu.DevPtr
	out    gpu.DevPtr
	inLen  int
	outLen int
}

// drain waits (a minute at most each) until the rank's stream has run
// everything enqueued and its communicator has served every launch.
func (cr *commRank) drain(ss *Streams) error {
	if err := ss.Synchronize(cr.st, time.Minute); err != nil {
		return err
	}
	return cr.comm.Quiet(time.Minute)
}

// settled drains the rank and returns its communicator's asynchronous
// error, if any.
func (cr *commRank) settled(ss *Streams) error {
	if err := cr.drain(ss); err != nil {
		return err
	}
	return cr.comm.AsyncError()
}

// commCase is one plan at one size on a communicator.
type commCase struct {
	name     string
	plan     *plan.Plan
	size     uint64
	dt       executor.Numeric
	inPlace  bool
	launches int
	timeout  time.Duration // the deadlock timeout
}

// withRanks runs body on every rank of a communicator of n ranks, each in
// a goroutine with its own bootstrap, comm and stream, and returns each
// rank's error.
func withRanks(t testing.TB, ss *Streams, n int, timeout time.Duration, body func(cr *commRank) error) []error {
	t.Helper()
	return withRanksConfig(t, ss, n, func(cfg *gpu.Config) { cfg.SetupTimeout = timeout }, body)
}

// withRanksConfig is withRanks with the communicators' configuration
// changed by set (from a set-up timeout of 20 s).
func withRanksConfig(t testing.TB, ss *Streams, n int, set func(cfg *gpu.Config), body func(cr *commRank) error) []error {
	t.Helper()
	return withHosts(t, ss, make([]int, n), set, body)
}

// withHosts is withRanksConfig with rank r on pretend host hosts[r].
func withHosts(t testing.TB, ss *Streams, hosts []int, set func(cfg *gpu.Config), body func(cr *commRank) error) []error {
	t.Helper()
	n := len(hosts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "rank0.addr")
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				b, err := bootstrap.Connect(ctx, bootstrap.World{Rank: r, Size: n, RendezvousFile: file, RendezvousHost: "127.0.0.1", Host: fmt.Sprintf("host%d", hosts[r])},
					bootstrap.Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
				if err != nil {
					return fmt.Errorf("connect: %w", err)
				}
				defer b.Close()
				cfg := gpu.Config{Name: "gpu-emu", Open: ss.Open, Threads: 2, SetupTimeout: 20 * time.Second}
				set(&cfg)
				comm, err := devcomm.Open(ctx, cfg, rankwire.World{Net: b, Host: hosts, Tag: 1000})
				if err != nil {
					return err
				}
				st, err := ss.New()
				if err != nil {
					return err
				}
				dev, err := ss.Open()
				if err != nil {
					return err
				}
				defer dev.Close()
				cr := &commRank{rank: r, boot: b, comm: comm, st: st, dev: dev}
				err = body(cr)
				if cerr := comm.Close(); err == nil {
					err = cerr
				}
				return err
			}()
		}()
	}
	wg.Wait()
	return errs
}

// place allocates the rank's buffers of layout l (input and output at
// their relative positions when in place).
func (cr *commRank) place(l *executor.BufferLayout) error {
	n := l.RankBytes(cr.rank)
	p, err := cr.dev.Alloc(max(n, 8))
	if err != nil {
		return err
	}
	cr.mem = p
	img := make([]byte, n)
	want, err := l.Place(cr.rank, img)
	if err != nil {
		return err
	}
	at := func(sub []byte) gpu.DevPtr {
		if len(sub) == 0 {
			return p
		}
		return p + gpu.DevPtr(uintptr(unsafe.Pointer(unsafe.SliceData(sub)))-uintptr(unsafe.Pointer(unsafe.SliceData(img))))
	}
	cr.in, cr.out = at(want.Input), at(want.Output)
	cr.inLen, cr.outLen = len(want.Input), len(want.Output)
	return nil
}

// layout returns c's buffer layout.
func (c commCase) layout(t testing.TB) *harness.Layout {
	t.Helper()
	lay, err := harness.PlanLayout(c.plan, c.size, c.dt, c.inPlace)
	if err != nil {
		t.Fatal(err)
	}
	return lay
}

// matchCPU fails t where a rank's output (outs[rank]) is not the CPU
// backend's after launches launches of c's plan; what names the outputs
// in the message.
func (c commCase) matchCPU(t testing.TB, launches int, outs [][]byte, what string) {
	t.Helper()
	want, err := gputest.SingleCPU(context.Background(), gputest.RankCase{Plan: c.plan, Layout: c.layout(t),
		Opts: executor.Options{DType: c.dt}, Launches: launches})
	if err != nil {
		t.Fatal(err)
	}
	for r := range want {
		if !bytes.Equal(outs[r], want[r]) {
			t.Errorf("%srank %d: the output differs from the CPU backend's", what, r)
		}
	}
}

// noErrors fails t with every rank's error.
func noErrors(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func (c commCase) call(l *harness.Layout, cr *commRank, opts executor.Options) devcomm.Call {
	return devcomm.Call{
		Key:  fmt.Sprintf("%s/%d/%s/%v", c.name, c.size, c.dt.Name(), c.inPlace),
		Desc: fmt.Sprintf("%s of %d bytes %s", c.name, c.size, c.dt.Name()),
		Open: func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
			inst, err := executor.Instantiate(c.plan, l.Sizes)
			return inst, l.BufferLayout, opts, err
		},
		In: cr.in, Out: cr.out, Stream: cr.st,
	}
}

// runComm runs c on a communicator and returns every rank's output after
// the last launch. The first call is enqueued behind a piece of work
// that holds the stream until every rank's call has returned: a call
// that waited for its kernel would never return.
func runComm(t *testing.T, ss *Streams, c commCase) ([][]byte, []error) {
	lay := c.layout(t)
	n := len(c.plan.GPUs)
	outs := make([][]byte, n)
	var returned sync.WaitGroup
	returned.Add(n)
	errs := withRanks(t, ss, n, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		opts := executor.Options{DType: c.dt, DeadlockTimeout: c.timeout}
		hold := make(chan struct{})
		if err := ss.Do(cr.st, func() { <-hold }); err != nil {
			return err
		}
		for seq := range c.launches {
			input := make([]byte, cr.inLen)
			lay.FillRank(input, cr.rank, seq)
			// The input is written in stream order: the previous
			// launch may still read it.
			if err := ss.Do(cr.st, func() { _ = cr.dev.HtoD(cr.in, input) }); err != nil {
				return err
			}
			err := cr.comm.Enqueue(context.Background(), c.call(lay, cr, opts))
			if seq == 0 {
				returned.Done()
				go func() {
					returned.Wait()
					close(hold)
				}()
			}
			if err != nil {
				return err
			}
		}
		if err := cr.settled(ss); err != nil {
			return err
		}
		out := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(out, cr.out); err != nil {
			return err
		}
		outs[cr.rank] = out
		return nil
	})
	return outs, errs
}

// TestComm runs every bundled collective through communicators, in place
// and out of place, over several calls, against the CPU backend.
func TestComm(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	cases := []commCase{
		{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "4"}), size: 1 << 12, dt: executor.Float32, inPlace: true},
		{name: "allreduce_packet out", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2", "inplace": "false"}), size: 1 << 14, dt: executor.Int32},
		{name: "allreduce_rsag", plan: gputest.AlgorithmPlan(t, "allreduce_rsag", map[string]string{"world_size": "2", "min_message_size": "0"}), size: 1 << 14, dt: executor.Float16, inPlace: true},
		{name: "allgather", plan: gputest.AlgorithmPlan(t, "allgather", map[string]string{"world_size": "4"}), size: 1 << 14, dt: executor.Float32, inPlace: true},
		{name: "allgather out", plan: gputest.AlgorithmPlan(t, "allgather", map[string]string{"world_size": "2", "inplace": "false"}), size: 1 << 12, dt: executor.BFloat16},
		{name: "reducescatter", plan: gputest.AlgorithmPlan(t, "reducescatter", map[string]string{"world_size": "4"}), size: 1 << 14, dt: executor.Float32, inPlace: true},
		{name: "reducescatter out", plan: gputest.AlgorithmPlan(t, "reducescatter", map[string]string{"world_size": "2", "inplace": "false"}), size: 1 << 12, dt: executor.Float32},
		{name: "alltoall", plan: gputest.AlgorithmPlan(t, "alltoall", map[string]string{"world_size": "2"}), size: 1 << 12, dt: executor.Float32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.launches = 3
			if c.inPlace != c.plan.Inplace {
				t.Skipf("the plan is in-place %v", c.plan.Inplace)
			}
			outs, errs := runComm(t, ss, c)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			c.matchCPU(t, c.launches, outs, "")
		})
	}
}

// TestCommRegistration: a call on buffers the peers have seen registers
// nothing; a buffer in a new range registers once.
func TestCommRegistration(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		opts := executor.Options{DType: c.dt}
		var counts []int
		for i := range 3 {
			if i != 1 { // calls 0 and 1 on the same buffers, call 2 on new ones
				if err := cr.place(lay.BufferLayout); err != nil {
					return err
				}
			}
			if err := cr.comm.Enqueue(context.Background(), c.call(lay, cr, opts)); err != nil {
				return err
			}
			counts = append(counts, cr.comm.Registered())
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		if counts[0] == 0 || counts[1] != counts[0] || counts[2] != counts[0]+1 {
			return fmt.Errorf("registrations after each call %v: want n, n, n+1 with n > 0", counts)
		}
		return cr.comm.AsyncError()
	})
	noErrors(t, errs)
}

// TestCommMismatch: ranks that make different calls all fail, naming
// both calls, before anything is launched.
func TestCommMismatch(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if cr.rank == 1 {
			call.Desc = "ncclAllReduce count 7"
		}
		return cr.comm.Enqueue(context.Background(), call)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "mismatched calls: rank 0 called allreduce_packet of 4096 bytes float, rank 1 called ncclAllReduce count 7") {
			t.Errorf("rank %d: %v, want the mismatch named", r, err)
		}
	}
}

// TestCommSteadyMismatch: in the steady state (the session open) a call
// returns at once, without meeting its peers; a call that differs on one
// rank becomes every rank's asynchronous error, naming both calls, and
// its launch is stopped before its kernel runs: the output keeps what
// the first call wrote.
func TestCommSteadyMismatch(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		first := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(first, cr.out); err != nil {
			return err
		}
		if cr.rank == 1 {
			call.Desc = "ncclAllReduce count 7"
		}
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 1 failed at once (it should return, its mismatch found later): %w", err)
		}
		if err := cr.drain(ss); err != nil {
			return err
		}
		aerr := cr.comm.AsyncError()
		if aerr == nil || !strings.Contains(aerr.Error(), "mismatched calls: rank 0 called allreduce_packet of 4096 bytes float, rank 1 called ncclAllReduce count 7") {
			return fmt.Errorf("async error %v, want the mismatch named", aerr)
		}
		after := make([]byte, cr.outLen)
		if err := cr.dev.DtoH(after, cr.out); err != nil {
			return err
		}
		if !bytes.Equal(first, after) {
			return errors.New("the mismatched launch wrote the output")
		}
		if err := cr.comm.Enqueue(context.Background(), call); err == nil || !strings.Contains(err.Error(), "failed earlier") {
			return fmt.Errorf("a call after the mismatch: %v, want the earlier failure", err)
		}
		return nil
	})
	noErrors(t, errs)
}

// TestCommSteadyAbort: a steady-state call whose peer never makes it
// returns at once and waits on its stream; Abort ends that wait long
// before the set-up timeout, and the stream drains.
func TestCommSteadyAbort(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	errs := withRanksConfig(t, ss, 2, func(cfg *gpu.Config) { cfg.SetupTimeout = 10 * time.Minute }, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		if cr.rank == 0 {
			if err := cr.comm.Enqueue(context.Background(), call); err != nil {
				return fmt.Errorf("call 1 failed at once: %w", err)
			}
		}
		if err := abortWithin(cr.comm, time.Minute); err != nil {
			return err
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		if aerr := cr.comm.AsyncError(); cr.rank == 0 && (aerr == nil || !strings.Contains(aerr.Error(), "canceled")) {
			return fmt.Errorf("async error %v, want the cancelled launch", aerr)
		}
		return nil
	})
	noErrors(t, errs)
}

// captureCall makes call on cr's stream while the stream captures, and
// returns what was recorded; the error is the call's or the capture's.
func (cr *commRank) captureCall(ss *Streams, call devcomm.Call) (*StreamGraph, error) {
	if err := ss.BeginCapture(cr.st); err != nil {
		return nil, err
	}
	err := cr.comm.Enqueue(context.Background(), call)
	g, eerr := ss.EndCapture(cr.st)
	return g, errors.Join(err, eerr)
}

// hangCommCase is hangCase's plan as a communicator's case.
func hangCommCase(t *testing.T) (commCase, *harness.Layout) {
	plan, lay := hangCase(t)
	return commCase{name: "hang", plan: plan, size: lay.Sizes.Input, dt: executor.Float32, inPlace: plan.Inplace}, lay
}

// hangCase is a plan whose rank 1 never signals: rank 0 waits for ever.
func hangCase(t *testing.T) (*plan.Plan, *harness.Layout) {
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
	return c.Plan, c.Layout
}

// TestCommDeadlock: a hung launch becomes the communicator's
// asynchronous error, with the job-wide deadlock report; later calls are
// refused with it.
func TestCommDeadlock(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c, lay := hangCommCase(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt, DeadlockTimeout: 200 * time.Millisecond})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("the call failed at once: %w", err)
		}
		if err := cr.drain(ss); err != nil {
			return err
		}
		aerr := cr.comm.AsyncError()
		var de *executor.DeadlockError
		if cr.rank == 1 {
			// Its kernel ended; it keeps its communicator (and its share
			// of the job-wide watch) until rank 0 has its report.
			if aerr != nil {
				return fmt.Errorf("rank 1's launch ended, yet: %w", aerr)
			}
			return cr.boot.Barrier(context.Background())
		}
		defer func() { _ = cr.boot.Barrier(context.Background()) }()
		if !errors.As(aerr, &de) || !strings.Contains(aerr.Error(), "rank 0 tb 0") || !strings.Contains(aerr.Error(), "expects signal") {
			return fmt.Errorf("async error %v, want the deadlock report of rank 0 waiting for a signal", aerr)
		}
		if err := cr.comm.Enqueue(context.Background(), call); err == nil || !errors.As(err, &de) {
			return fmt.Errorf("a call after the deadlock: %v, want it refused with the report", err)
		}
		return nil
	})
	noErrors(t, errs)
}

// abortWithin aborts comm and fails if Abort has not returned within
// bound (the tests' deadlock timeout is much longer).
func abortWithin(comm *devcomm.Comm, bound time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- comm.Abort() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("abort: %w", err)
		}
		return nil
	case <-time.After(bound):
		return fmt.Errorf("abort has not returned within %v", bound)
	}
}

// TestCommAbort: Abort ends a hung launch long before the deadlock
// timeout would.
func TestCommAbort(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c, lay := hangCommCase(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt, DeadlockTimeout: 10 * time.Minute})
		if err := cr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("the call failed at once: %w", err)
		}
		if err := abortWithin(cr.comm, time.Minute); err != nil {
			return err
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return err
		}
		// Rank 1's kernel (which only waits for rank 0's signals) may have
		// ended before the abort; rank 0's could not.
		if aerr := cr.comm.AsyncError(); cr.rank == 0 && (aerr == nil || !strings.Contains(aerr.Error(), "canceled")) {
			return fmt.Errorf("async error %v, want the cancelled launch", aerr)
		}
		return nil
	})
	noErrors(t, errs)
}

// TestCommCapture: a call on a stream being captured is recorded, not
// run; each replay of the graph runs it on the buffers it was captured
// with, with new data, and gives the CPU backend's output for that many
// launches. LL plans with double-buffered scratch (allreduce_packet)
// would read the previous replay's packets if the flag or the scratch
// half did not advance on the device. Calls outside the graph, before
// and after the replays, share the session.
func TestCommCapture(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	cases := []commCase{
		{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "4"}), size: 1 << 12, dt: executor.Float32, inPlace: true},
		{name: "allreduce_packet out", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2", "inplace": "false"}), size: 1 << 13, dt: executor.Int32},
		{name: "allgather", plan: gputest.AlgorithmPlan(t, "allgather", map[string]string{"world_size": "2"}), size: 1 << 12, dt: executor.Float32, inPlace: true},
	}
	const replays = 3
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lay, err := harness.PlanLayout(c.plan, c.size, c.dt, c.inPlace)
			if err != nil {
				t.Fatal(err)
			}
			n := len(c.plan.GPUs)
			// outs[k][r]: rank r's output after launch k (launch 0 before
			// the capture, 1..replays the replays, the last after them).
			outs := make([][][]byte, replays+2)
			for k := range outs {
				outs[k] = make([][]byte, n)
			}
			errs := withRanks(t, ss, n, 20*time.Second, func(cr *commRank) error {
				if err := cr.place(lay.BufferLayout); err != nil {
					return err
				}
				call := c.call(lay, cr, executor.Options{DType: c.dt})
				fill := func(seq int) error {
					input := make([]byte, cr.inLen)
					lay.FillRank(input, cr.rank, seq)
					return ss.Do(cr.st, func() { _ = cr.dev.HtoD(cr.in, input) })
				}
				read := func(k int) error {
					if err := ss.Synchronize(cr.st, time.Minute); err != nil {
						return fmt.Errorf("after launch %d: %w", k, err)
					}
					if err := cr.comm.Quiet(time.Minute); err != nil {
						return err
					}
					outs[k][cr.rank] = make([]byte, cr.outLen)
					return cr.dev.DtoH(outs[k][cr.rank], cr.out)
				}
				// A first call outside the graph (as PyTorch warms up).
				if err := fill(0); err != nil {
					return err
				}
				if err := cr.comm.Enqueue(context.Background(), call); err != nil {
					return err
				}
				if err := read(0); err != nil {
					return err
				}
				g, err := cr.captureCall(ss, call)
				if err != nil {
					return fmt.Errorf("the captured call: %w", err)
				}
				if len(g.work) == 0 {
					return errors.New("the capture recorded nothing")
				}
				for k := 1; k <= replays; k++ {
					if err := fill(k); err != nil {
						return err
					}
					if err := ss.Replay(g, cr.st); err != nil {
						return err
					}
					if err := read(k); err != nil {
						return err
					}
				}
				if err := fill(replays + 1); err != nil {
					return err
				}
				if err := cr.comm.Enqueue(context.Background(), call); err != nil {
					return fmt.Errorf("the call after the replays: %w", err)
				}
				if err := read(replays + 1); err != nil {
					return err
				}
				return cr.comm.AsyncError()
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for k := range outs {
				c.matchCPU(t, k+1, outs[k], fmt.Sprintf("launch %d, ", k))
			}
		})
	}
}

// TestCommCaptureRefused: a plan with port channels needs the host's
// proxy at every launch, so a call on a capturing stream fails with
// ErrNotCapturable on every rank, before the ranks meet, and records
// nothing.
func TestCommCaptureRefused(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_hier", plan: gputest.AlgorithmPlan(t, "allreduce_hier", map[string]string{"world_size": "4", "ranks_per_node": "2", "min_message_size": "0"}),
		size: 1 << 14, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	errs := withRanks(t, ss, 4, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		g, err := cr.captureCall(ss, c.call(lay, cr, executor.Options{DType: c.dt}))
		if g != nil && len(g.work) != 0 {
			return fmt.Errorf("%d pieces of work recorded", len(g.work))
		}
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, devcomm.ErrNotCapturable) || !strings.Contains(err.Error(), "port channels") {
			t.Errorf("rank %d: %v, want ErrNotCapturable naming the port channels", r, err)
		}
	}
}

// TestCommAbortReplay: nothing on the host watches a replayed launch;
// Abort stops one that hangs and makes what its blocks waited for the
// asynchronous error.
func TestCommAbortReplay(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c, lay := hangCommCase(t)
	errs := withRanks(t, ss, 2, 20*time.Second, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt, DeadlockTimeout: 10 * time.Minute})
		g, err := cr.captureCall(ss, call)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if err := ss.Replay(g, cr.st); err != nil {
			return err
		}
		if cr.rank == 1 {
			// Its kernel only waits for rank 0's signals: it ends.
			if err := ss.Synchronize(cr.st, time.Minute); err != nil {
				return err
			}
			return cr.boot.Barrier(context.Background())
		}
		defer func() { _ = cr.boot.Barrier(context.Background()) }()
		// Rank 0's replay waits for ever; let it start waiting.
		time.Sleep(200 * time.Millisecond)
		if err := abortWithin(cr.comm, time.Minute); err != nil {
			return err
		}
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return fmt.Errorf("the aborted replay has not ended: %w", err)
		}
		aerr := cr.comm.AsyncError()
		var de *executor.DeadlockError
		if !errors.As(aerr, &de) || !strings.Contains(aerr.Error(), "a replayed launch was running at the abort") || !strings.Contains(aerr.Error(), "expects signal") {
			return fmt.Errorf("async error %v, want the replay's report of rank 0 waiting for a signal", aerr)
		}
		return nil
	})
	noErrors(t, errs)
}

// TestCommQueued: calls of one plan instance return without waiting for
// the previous launch (NCCL's semantics): every rank's stream is held
// until all its calls have returned, so a call that waited would never
// return. The calls alternate between two sets of buffers, so later
// launches' rank tables are written while earlier launches wait on the
// stream; each set's output is the CPU backend's after its last launch.
func TestCommQueued(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c := commCase{name: "allreduce_packet", plan: gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "4"}),
		size: 1 << 12, dt: executor.Float32, inPlace: true}
	lay := c.layout(t)
	const calls = 7
	n := len(c.plan.GPUs)
	outs := make([][2][]byte, n)
	var returned sync.WaitGroup
	returned.Add(n)
	errs := withRanks(t, ss, n, 20*time.Second, func(cr *commRank) error {
		type set struct{ in, out gpu.DevPtr }
		var sets [2]set
		for i := range sets {
			if err := cr.place(lay.BufferLayout); err != nil {
				return err
			}
			sets[i] = set{cr.in, cr.out}
		}
		hold := make(chan struct{})
		if err := ss.Do(cr.st, func() { <-hold }); err != nil {
			return err
		}
		for seq := range calls {
			cr.in, cr.out = sets[seq%2].in, sets[seq%2].out
			input := make([]byte, cr.inLen)
			lay.FillRank(input, cr.rank, seq)
			in := cr.in
			if err := ss.Do(cr.st, func() { _ = cr.dev.HtoD(in, input) }); err != nil {
				return err
			}
			if err := cr.comm.Enqueue(context.Background(), c.call(lay, cr, executor.Options{DType: c.dt})); err != nil {
				close(hold)
				return fmt.Errorf("call %d: %w", seq, err)
			}
		}
		returned.Done()
		returned.Wait()
		close(hold)
		if err := cr.settled(ss); err != nil {
			return err
		}
		for i, st := range sets {
			outs[cr.rank][i] = make([]byte, cr.outLen)
			if err := cr.dev.DtoH(outs[cr.rank][i], st.out); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for i := range 2 {
		last := calls - 1 - (calls-1-i)%2 // the last call on set i
		set := make([][]byte, len(outs))
		for r := range outs {
			set[r] = outs[r][i]
		}
		c.matchCPU(t, last+1, set, fmt.Sprintf("buffer set %d (last call %d), ", i, last))
	}
}

// TestCommReplayWatch: a replayed launch that hangs, with nobody calling
// Abort, is stopped by the communicator's replay watch once it has made
// no progress for the replay timeout, and its report becomes the
// asynchronous error.
func TestCommReplayWatch(t *testing.T) {
	ss := NewStreams()
	defer ss.Close()
	c, lay := hangCommCase(t)
	errs := withRanksConfig(t, ss, 2, func(cfg *gpu.Config) { cfg.ReplayTimeout = 300 * time.Millisecond }, func(cr *commRank) error {
		if err := cr.place(lay.BufferLayout); err != nil {
			return err
		}
		call := c.call(lay, cr, executor.Options{DType: c.dt, DeadlockTimeout: 10 * time.Minute})
		g, err := cr.captureCall(ss, call)
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		if err := ss.Replay(g, cr.st); err != nil {
			return err
		}
		// The stream ends once the replay is stopped (rank 0) or done.
		if err := ss.Synchronize(cr.st, time.Minute); err != nil {
			return fmt.Errorf("the replay has not ended: %w", err)
		}
		defer func() { _ = cr.boot.Barrier(context.Background()) }()
		aerr := cr.comm.AsyncError()
		if cr.rank == 1 {
			if aerr != nil {
				return fmt.Errorf("rank 1's replay ended, yet: %w", aerr)
			}
			return nil
		}
		var de *executor.DeadlockError
		if !errors.As(aerr, &de) || !strings.Contains(aerr.Error(), "a replayed launch made no progress for 300ms") || !strings.Contains(aerr.Error(), "expects signal") {
			return fmt.Errorf("async error %v, want the replay's report of rank 0 waiting for a signal", aerr)
		}
		return nil
	})
	noErrors(t, errs)
}
