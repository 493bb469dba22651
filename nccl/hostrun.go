package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
)

// Host-memory runs (MSCCLGO_NCCL_HOSTMEM=1) execute the chosen plan on the
// CPU reference backend, reading and writing the caller's buffers
// directly, synchronously, in the calling thread. They are right only
// where "device" pointers are host memory (the fake CUDA driver, the
// emulated device, tests) and every rank of the communicator is a thread
// of this process. They exist to run the plan path end to end without a
// GPU; they are not NCCL's semantics (the call returns when the
// collective is done, the stream is ignored).

// hostMemEnabled reports whether MSCCLGO_NCCL_HOSTMEM asks for host-memory
// runs.
func hostMemEnabled() bool {
	v := os.Getenv("MSCCLGO_NCCL_HOSTMEM")
	return v != "" && v != "0"
}

// hostHub is where the ranks of one communicator, all threads of this
// process, meet for each call: the last to arrive runs the plan for all.
type hostHub struct {
	size  int
	mu    sync.Mutex
	round *hostRound
	plans planFiles
}

func newHostHub(size int) *hostHub {
	return &hostHub{size: size}
}

// hostRound is one call being gathered.
type hostRound struct {
	sig   string   // the call, as every rank must make it
	sigs  []string // each rank's, for the error of a mismatch
	bufs  []executor.RankBuffers
	n     int
	done  chan struct{}
	err   error
	order []int // ranks in arrival order
	// stopRun stops the run once every rank came (nil before): a rank
	// that gives up waiting stops it and waits for it to end, so that no
	// call returns while the run still holds its buffers.
	stopRun context.CancelCauseFunc
}

// runOnHost runs the plan of d for call k when host-memory runs are on.
// ran is false, with the reason, when they are off or cannot take k.
func (c *comm) runOnHost(k call, d decision) (ran bool, err error, reason string) {
	switch {
	case c.hub == nil:
		return false, nil, "this build cannot launch plans on the caller's device buffers yet (MSCCLGO_NCCL_HOSTMEM=1 runs them where device memory is host memory)"
	case k.groupDepth > 0:
		return false, nil, "host-memory runs take no calls inside a group (they run synchronously)"
	}
	if k.sendPtr == nil || k.recvPtr == nil {
		return true, errorf(resultInvalidArgument, "%s: a NULL buffer (send %p, receive %p)", k.fn, k.sendPtr, k.recvPtr), ""
	}
	dt := planDType(k.dtype)
	size := k.size(c.size)
	inPlace := k.inPlace(c.rank)
	in, out := size, size
	switch k.coll {
	case collAllGather:
		in = size / uint64(c.size)
	case collReduceScatter:
		out = size / uint64(c.size)
	}
	mine := executor.RankBuffers{
		Input:  unsafe.Slice((*byte)(k.sendPtr), in),
		Output: unsafe.Slice((*byte)(k.recvPtr), out),
	}
	op := ""
	if k.op >= 0 {
		op = " " + opName(k.op)
	}
	sig := fmt.Sprintf("%s count %d %s%s (%s) with plan %s", k.fn, k.count, dtypeName(k.dtype), op, placeName(inPlace), d.plan)
	err = c.hub.meet(c.rank, sig, mine, c.timeout, c.stop, func(ctx context.Context, all []executor.RankBuffers) error {
		return c.hub.execute(ctx, d.path, size, dt, inPlace, all)
	})
	return true, err, ""
}

func placeName(inPlace bool) string {
	if inPlace {
		return "in-place"
	}
	return "out-of-place"
}

// planDType is the executor's element type of an ncclDataType_t that
// plans compute (planElem).
func planDType(d int) executor.ElemType {
	switch d {
	case 6:
		return executor.Float16
	case 9:
		return executor.BFloat16
	case 2:
		return executor.Int32
	}
	return executor.Float32
}

// meet hands rank's buffers for the call sig to the round; the rank that
// completes it runs exec on every rank's buffers. Every rank gets exec's
// error, or the error of a rank that called something else, or, after
// timeout or once stop is closed (the communicator ended), an error
// naming the ranks that did not call. A rank that gives up while the run
// is under way stops it and returns only once it has ended: a call that
// returns has stopped touching its buffers.
func (h *hostHub) meet(rank int, sig string, mine executor.RankBuffers, timeout time.Duration, stop <-chan struct{}, exec func(context.Context, []executor.RankBuffers) error) error {
	h.mu.Lock()
	r := h.round
	if r == nil {
		r = &hostRound{sig: sig, sigs: make([]string, h.size), bufs: make([]executor.RankBuffers, h.size), done: make(chan struct{})}
		h.round = r
	}
	if r.sigs[rank] != "" {
		h.mu.Unlock()
		return errorf(resultInternal, "rank %d joined the call %q twice", rank, sig)
	}
	r.sigs[rank], r.bufs[rank] = sig, mine
	r.order = append(r.order, rank)
	r.n++
	if sig != r.sig {
		first := r.order[0]
		r.err = errorf(resultInvalidUsage, "mismatched calls: rank %d called %s, rank %d called %s", first, r.sig, rank, sig)
		h.round = nil
		close(r.done)
		h.mu.Unlock()
		return r.err
	}
	if r.n == h.size {
		h.round = nil
		ctx, cancel := context.WithCancelCause(context.Background())
		r.stopRun = cancel
		h.mu.Unlock()
		ended := make(chan struct{})
		go func() {
			select {
			case <-stop:
				cancel(errorf(resultInvalidUsage, "rank %d's communicator ended during the call", rank))
			case <-ended:
			}
		}()
		err := exec(ctx, r.bufs)
		close(ended)
		h.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		close(r.done)
		h.mu.Unlock()
		cancel(nil)
		return r.err
	}
	h.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	why := fmt.Sprintf("waited %v (MSCCLGO_NCCL_TIMEOUT)", timeout)
	select {
	case <-r.done:
		return r.err
	case <-t.C:
	case <-stop:
		why = "ended its communicator (ncclCommDestroy or ncclCommAbort) while it waited"
	}
	h.mu.Lock()
	if r.stopRun != nil {
		// Every rank came and the run is under way: stop it, and return
		// once it no longer touches the buffers.
		select {
		case <-r.done:
		default:
			if r.err == nil {
				r.err = errorf(resultInvalidUsage, "rank %d %s for %s, and stopped its run", rank, why, sig)
			}
			r.stopRun(r.err)
		}
		h.mu.Unlock()
		<-r.done
		return r.err
	}
	defer h.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	default:
	}
	var missing []int
	for q, s := range r.sigs {
		if s == "" {
			missing = append(missing, q)
		}
	}
	r.err = errorf(resultInvalidUsage, "rank %d %s for ranks %v to call %s", rank, why, missing, sig)
	if h.round == r {
		h.round = nil
	}
	close(r.done)
	return r.err
}

// execute runs the plan in file on every rank's buffers with the CPU
// backend.
func (h *hostHub) execute(ctx context.Context, file string, size uint64, dt executor.ElemType, inPlace bool, bufs []executor.RankBuffers) error {
	inst, layout, err := h.plans.instantiate(file, size, dt, inPlace)
	if err != nil {
		return err
	}
	if got := []uint64{uint64(len(bufs[0].Input)), uint64(len(bufs[0].Output))}; !slices.Equal(got, []uint64{layout.Sizes.Input, layout.Sizes.Output}) {
		return errorf(resultInternal, "%s: buffers of %v bytes, the plan's layout has %d and %d", file, got, layout.Sizes.Input, layout.Sizes.Output)
	}
	sess, err := cpu.New().Open(inst, executor.Options{DType: dt})
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer sess.Close()
	return sess.Launch(ctx, bufs)
}
