//go:build cuda

package cuda

// comm_test.go runs collectives through devcomm.Comm on this driver: each
// rank's call launched on a CUstream of its own (the caller's stream),
// its buffers from cuMemAlloc (registered by cuMemGetAddressRange), Wait
// on the event recorded after the kernel; outputs against the CPU
// backend.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
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
)

func TestComm(t *testing.T) {
	plan := gputest.AlgorithmPlan(t, "allreduce_packet", map[string]string{"world_size": "2"})
	lay, err := harness.PlanLayout(plan, 1<<12, executor.Float32, true)
	if err != nil {
		t.Fatal(err)
	}
	const launches = 3
	want, err := gputest.SingleCPU(context.Background(), gputest.RankCase{Plan: plan, Layout: lay,
		Opts: executor.Options{DType: executor.Float32}, Launches: launches})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return testNode.Open(0) }, Threads: testThreads(),
		SetupTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "rank0.addr")
	n := len(plan.GPUs)
	outs := make([][]byte, n)
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
				defer comm.Close()
				drv, err := testNode.Open(0)
				if err != nil {
					return err
				}
				defer drv.Close()
				d := drv.(*driver)
				var st cu.Stream
				if err := d.do("making a stream", func() (err error) { st, err = cu.MakeStream(cu.NonBlocking); return err }); err != nil {
					return err
				}
				defer func() { _ = d.do("destroying a stream", st.Destroy) }()
				sync := func() error { return d.do("synchronizing the caller's stream", st.Synchronize) }
				size := lay.RankBytes(r)
				p, err := d.Alloc(size)
				if err != nil {
					return err
				}
				defer d.Free(p)
				call := devcomm.Call{
					Key: "allreduce", Desc: "allreduce of 4096 bytes",
					Open: func() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
						inst, err := executor.Instantiate(plan, lay.Sizes)
						return inst, lay.BufferLayout, executor.Options{DType: executor.Float32}, err
					},
					In: p, Out: p, Stream: gpu.Stream(*(*uintptr)(unsafe.Pointer(&st))),
				}
				for seq := range launches {
					in := make([]byte, size)
					lay.FillRank(in, r, seq)
					if err := d.HtoD(p, in); err != nil {
						return err
					}
					if err := comm.Enqueue(ctx, call); err != nil {
						return err
					}
					if err := sync(); err != nil {
						return err
					}
					if err := comm.Quiet(time.Minute); err != nil {
						return err
					}
				}
				if err := comm.AsyncError(); err != nil {
					return err
				}
				outs[r] = make([]byte, size)
				if err := d.DtoH(outs[r], p); err != nil {
					return err
				}
				if comm.Registered() != 1 {
					return fmt.Errorf("%d registrations, want 1 (the peer's allocation)", comm.Registered())
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range want {
		if !bytes.Equal(outs[r], want[r]) {
			t.Errorf("rank %d: the output differs from the CPU backend's", r)
		}
	}
}
