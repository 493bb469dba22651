//go:build cuda

package cuda

// gate_test.go checks the driver's holds (gate.go) and the fake driver's
// stream memory operations: a steady-state call of a communicator
// returns before its peers make it, a mismatch is named and writes
// nothing, Abort ends a hold whose peer never calls, and the driver
// refuses a wait on memory the device cannot address.

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

	"gorgonia.org/cu"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/devcomm"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// gateRank is one rank of a gate test: its communicator, a driver for
// its buffer, its stream and its buffer (in place).
type gateRank struct {
	rank int
	comm *devcomm.Comm
	d    *driver
	st   cu.Stream
	p    gpu.DevPtr
	size uint64
	call devcomm.Call
}

func (gr *gateRank) sync() error {
	return gr.d.do("synchronizing the caller's stream", gr.st.Synchronize)
}

func (gr *gateRank) fill(lay *harness.Layout, seq int) error {
	in := make([]byte, gr.size)
	lay.FillRank(in, gr.rank, seq)
	return gr.d.HtoD(gr.p, in)
}

func (gr *gateRank) read() ([]byte, error) {
	b := make([]byte, gr.size)
	return b, gr.d.DtoH(b, gr.p)
}

// gatePlan is a 2-rank in-place packet allreduce of 4 KiB.
func gatePlan(t *testing.T) (*plan.Plan, *harness.Layout, func(launches int) [][]byte) {
	pl := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"})
	lay, err := harness.PlanLayout(pl, 1<<12, executor.Float32, true)
	if err != nil {
		t.Fatal(err)
	}
	want := func(launches int) [][]byte {
		w, err := gputest.SingleCPU(context.Background(), gputest.RankCase{Plan: pl, Layout: lay,
			Opts: executor.Options{DType: executor.Float32}, Launches: launches})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	return pl, lay, want
}

// withGateRanks runs body on 2 ranks, threads of this process on the fake
// device, each with a communicator of cfg (setup bounds its set-up).
func withGateRanks(t *testing.T, pl *plan.Plan, lay *harness.Layout, setup time.Duration, body func(gr *gateRank) error) []error {
	t.Helper()
	cfg := gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return testNode.Open(0) }, Threads: testThreads(),
		SetupTimeout: setup}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "rank0.addr")
	const n = 2
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				b, err := bootstrap.Connect(ctx, bootstrap.World{Rank: r, Size: n, RendezvousFile: file, RendezvousHost: "127.0.0.1"},
					bootstrap.Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
				if err != nil {
					return err
				}
				defer b.Close()
				comm, err := devcomm.Open(ctx, cfg, rankwire.World{Net: b, Host: make([]int, n), Tag: 1000})
				if err != nil {
					return err
				}
				drv, err := testNode.Open(0)
				if err != nil {
					_ = comm.Close()
					return err
				}
				gr := &gateRank{rank: r, comm: comm, d: drv.(*driver), size: lay.RankBytes(r)}
				if err := gr.d.do("making a stream", func() (err error) { gr.st, err = cu.MakeStream(cu.NonBlocking); return err }); err != nil {
					return errors.Join(err, comm.Close(), drv.Close())
				}
				if gr.p, err = gr.d.Alloc(gr.size); err != nil {
					return errors.Join(err, comm.Close(), gr.d.do("destroying a stream", gr.st.Destroy), drv.Close())
				}
				// The communicator ends first (its held launches
				// released), then the stream's work, then the memory it
				// uses.
				defer func() {
					_ = comm.Close()
					_ = gr.d.do("destroying a stream", gr.st.Destroy)
					_ = gr.d.Free(gr.p)
					_ = drv.Close()
				}()
				gr.call = devcomm.Call{
					Key: "allreduce", Desc: "allreduce of 4096 bytes",
					Open: func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
						inst, err := executor.Instantiate(pl, lay.Sizes)
						return inst, lay.BufferLayout, executor.Options{DType: executor.Float32}, err
					},
					In: gr.p, Out: gr.p, Stream: gpu.Stream(*(*uintptr)(unsafe.Pointer(&gr.st))),
				}
				return body(gr)
			}()
		}()
	}
	wg.Wait()
	return errs
}

func gateNoErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestGateSteadyReturns: rank 1 makes its steady-state calls only once
// rank 0's same calls have returned (three), so a call that waited for its peers
// on the host would never return (the test then fails after 10 s); the
// values are the CPU backend's. Three calls are held at once on rank 0's
// stream, released in order.
func TestGateSteadyReturns(t *testing.T) { steadyCalls(t, 3) }

// TestGateManyHolds: more steady calls over the run than the gate has
// staging slots (gateSlots), rank 1 starting once 16 of rank 0's have
// returned: the slots are reused, the holds released in order, and the
// last call's values are right.
func TestGateManyHolds(t *testing.T) { steadyCalls(t, gateSlots+72) }

// steadyCalls makes steady steady-state calls on both ranks, rank 1's
// only once rank 0's first 16 (or all) have returned, and checks the last
// one's output.
func steadyCalls(t *testing.T, steady int) {
	pl, lay, want := gatePlan(t)
	exp := want(1 + steady)
	returned := make(chan struct{})
	outs := make([][]byte, 2)
	errs := withGateRanks(t, pl, lay, 20*time.Second, func(gr *gateRank) error {
		// Call 0 opens the plan's session (the ranks meet).
		if err := gr.fill(lay, 0); err != nil {
			return err
		}
		if err := gr.comm.Enqueue(context.Background(), gr.call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := gr.sync(); err != nil {
			return err
		}
		if err := gr.comm.Quiet(time.Minute); err != nil {
			return err
		}
		// The steady calls each fill their input on the stream first,
		// after the previous call's kernel (the copy waits its turn).
		ins := make([][]byte, steady)
		for i := range ins {
			ins[i] = make([]byte, gr.size)
			lay.FillRank(ins[i], gr.rank, 1+i)
		}
		if gr.rank == 1 {
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				return errors.New("rank 0's steady calls have not returned within 10 s while rank 1 had made none: they wait for their peer on the host")
			}
		}
		for i := range steady {
			if err := gr.d.do("filling the input on the stream", func() error {
				return cu.MemcpyHtoDAsync(cu.DevicePtr(gr.p), unsafe.Pointer(&ins[i][0]), int64(gr.size), gr.st)
			}); err != nil {
				return err
			}
			if err := gr.comm.Enqueue(context.Background(), gr.call); err != nil {
				return fmt.Errorf("call %d: %w", 1+i, err)
			}
			// At most 64 launches of a session are in flight: rank 1
			// starts after 16 of rank 0's calls have returned.
			if gr.rank == 0 && i == min(steady, 16)-1 {
				close(returned)
			}
		}
		if err := gr.sync(); err != nil {
			return err
		}
		if err := gr.comm.Quiet(time.Minute); err != nil {
			return err
		}
		if err := gr.comm.AsyncError(); err != nil {
			return err
		}
		var err error
		outs[gr.rank], err = gr.read()
		return err
	})
	gateNoErrors(t, errs)
	if t.Failed() {
		return
	}
	// The reference: the last launch's inputs are those of call
	// steady, each launch reading fresh inputs (Fill of its sequence).
	for r := range exp {
		if !bytes.Equal(outs[r], exp[r]) {
			t.Errorf("rank %d: the output of the last steady call differs from the CPU backend's", r)
		}
	}
}

// TestGateSteadyMismatch: mismatched steady calls return at once; every
// rank's asynchronous error names both calls and the output is untouched.
func TestGateSteadyMismatch(t *testing.T) {
	pl, lay, _ := gatePlan(t)
	errs := withGateRanks(t, pl, lay, 20*time.Second, func(gr *gateRank) error {
		if err := gr.fill(lay, 0); err != nil {
			return err
		}
		call := gr.call
		if err := gr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := gr.sync(); err != nil {
			return err
		}
		if err := gr.comm.Quiet(time.Minute); err != nil {
			return err
		}
		if err := gr.fill(lay, 1); err != nil {
			return err
		}
		before, err := gr.read()
		if err != nil {
			return err
		}
		if gr.rank == 1 {
			call.Desc = "ncclAllReduce count 7"
		}
		if err := gr.comm.Enqueue(context.Background(), call); err != nil {
			return fmt.Errorf("call 1 failed at once (it should return, its mismatch found later): %w", err)
		}
		if err := gr.sync(); err != nil {
			return err
		}
		if err := gr.comm.Quiet(time.Minute); err != nil {
			return err
		}
		aerr := gr.comm.AsyncError()
		if aerr == nil || !strings.Contains(aerr.Error(), "mismatched calls: rank 0 called allreduce of 4096 bytes, rank 1 called ncclAllReduce count 7") {
			return fmt.Errorf("async error %v, want the mismatch named", aerr)
		}
		after, err := gr.read()
		if err != nil {
			return err
		}
		if !bytes.Equal(before, after) {
			return errors.New("the mismatched launch wrote the output")
		}
		if err := gr.comm.Enqueue(context.Background(), call); err == nil || !strings.Contains(err.Error(), "failed earlier") {
			return fmt.Errorf("a call after the mismatch: %v, want the earlier failure", err)
		}
		return nil
	})
	gateNoErrors(t, errs)
}

// TestGateSteadyAbort: a steady call whose peer never makes it returns at
// once and its stream waits on the hold; Abort releases the hold long
// before the set-up timeout (10 minutes), the stream drains and the
// kernel writes nothing.
func TestGateSteadyAbort(t *testing.T) {
	pl, lay, _ := gatePlan(t)
	errs := withGateRanks(t, pl, lay, 10*time.Minute, func(gr *gateRank) error {
		if err := gr.fill(lay, 0); err != nil {
			return err
		}
		if err := gr.comm.Enqueue(context.Background(), gr.call); err != nil {
			return fmt.Errorf("call 0: %w", err)
		}
		if err := gr.sync(); err != nil {
			return err
		}
		if err := gr.comm.Quiet(time.Minute); err != nil {
			return err
		}
		if err := gr.fill(lay, 1); err != nil {
			return err
		}
		before, err := gr.read()
		if err != nil {
			return err
		}
		var waited error
		if gr.rank == 0 {
			// A call that waited for its peer on the host would return
			// only at the abort below.
			ret := make(chan error, 1)
			go func() { ret <- gr.comm.Enqueue(context.Background(), gr.call) }()
			select {
			case err := <-ret:
				if err != nil {
					return fmt.Errorf("call 1 failed at once: %w", err)
				}
			case <-time.After(10 * time.Second):
				waited = errors.New("call 1 has not returned within 10 s: it waits for its peer on the host")
				defer func() { <-ret }()
			}
		}
		done := make(chan error, 1)
		go func() { done <- gr.comm.Abort() }()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("abort: %w", err)
			}
		case <-time.After(time.Minute):
			return errors.New("abort has not returned within a minute")
		}
		if waited != nil {
			return waited
		}
		if err := gr.sync(); err != nil {
			return err
		}
		// Rank 0's call fails either by its own abort (cancelled) or,
		// when rank 1's abort reaches the mailbox first, because its peer
		// said it ended its communicator before making the call.
		if aerr := gr.comm.AsyncError(); gr.rank == 0 && (aerr == nil ||
			!strings.Contains(aerr.Error(), "canceled") && !strings.Contains(aerr.Error(), "ended its communicator")) {
			return fmt.Errorf("async error %v, want the cancelled call or the peer's end", aerr)
		}
		after, err := gr.read()
		if err != nil {
			return err
		}
		if !bytes.Equal(before, after) {
			return errors.New("the aborted launch wrote the output")
		}
		return nil
	})
	gateNoErrors(t, errs)
}

// TestFakeStreamMemOps: the fake driver refuses the stream memory
// operations CUDA refuses: a wait on a host address the device does not
// map (pageable memory), a misaligned one, flags the device does not
// support, unknown flags, the V1 entry (disabled by default), and
// cuMemHostGetDevicePointer of memory cuMemHostAlloc did not map; a wait
// on mapped pinned memory and on device memory is taken.
func TestFakeStreamMemOps(t *testing.T) {
	drv, err := testNode.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	d := drv.(*driver)
	dev, err := d.Alloc(256)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(dev)
	var pageable [16]uint32
	err = d.do("the checks", func() error {
		p, mapped, err := hostAlloc(64)
		if err != nil {
			return err
		}
		defer freeHost(p)
		st := d.launch
		code := func(err error) int {
			var e *Error
			if errors.As(err, &e) {
				return e.Code
			}
			return -1
		}
		cases := []struct {
			name  string
			addr  uint64
			flags uint32
			v1    bool
			want  int // 0: taken
		}{
			{"mapped pinned memory", mapped, waitGEQFlag, false, 0},
			{"device memory", uint64(dev), waitGEQFlag, false, 0},
			{"pageable host memory", uint64(uintptr(unsafe.Pointer(&pageable[4]))), waitGEQFlag, false, errInvalidValue},
			{"an address past the pinned allocation", mapped + 4096, waitGEQFlag, false, errInvalidValue},
			{"a misaligned address", mapped + 2, waitGEQFlag, false, errInvalidValue},
			{"the nor condition", mapped, waitNOR, false, errNotSupported},
			{"a flush", mapped, waitGEQFlag | waitFlush, false, errNotSupported},
			{"unknown flags", mapped, 7, false, errInvalidValue},
			{"the V1 entry", mapped, waitGEQFlag, true, errNotSupported},
		}
		for _, c := range cases {
			got := 0
			if err := waitValue(st, c.addr, 0, c.flags, c.v1); err != nil {
				got = code(err)
			}
			if got != c.want {
				t.Errorf("a wait on %s (flags %#x): CUresult %d, want %d", c.name, c.flags, got, c.want)
			}
		}
		if _, err := devicePointer(unsafe.Pointer(&pageable[0])); code(err) != errInvalidValue {
			t.Errorf("cuMemHostGetDevicePointer of pageable memory: %v, want CUDA_ERROR_INVALID_VALUE", err)
		}
		if got, err := devicePointer(p); err != nil || got != mapped {
			t.Errorf("cuMemHostGetDevicePointer of mapped pinned memory: %#x, %v; want %#x", got, err, mapped)
		}
		return st.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
}
