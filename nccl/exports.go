package main

// exports.go: the Go functions shim.c calls (declared in shim.h). Each one
// turns C arguments into Go values, does its work, sets the last error on
// failure and returns an ncclResult_t. A panic becomes ncclInternalError
// with its message, never a crash of the caller's process.

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/bootstrap"
)

// cResult is the C value of r.
func cResult(r result) C.int {
	switch r {
	case resultSuccess:
		return C.ncclSuccess
	case resultSystem:
		return C.ncclSystemError
	case resultInvalidArgument:
		return C.ncclInvalidArgument
	case resultInvalidUsage:
		return C.ncclInvalidUsage
	case resultRemote:
		return C.ncclRemoteError
	}
	return C.ncclInternalError
}

// setError makes msg the last error (ncclGetLastError), logged at INFO.
func setError(msg string) { setErrorLogged(msg, true) }

// setErrorLogged is setError, logging msg only if log is set (for an
// error whose call was logged already).
func setErrorLogged(msg string, log bool) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	l := C.int(0)
	if log {
		l = 1
	}
	C.mscclgo_set_error(cs, l)
}

// logging reports whether the INFO log is on (MSCCLGO_NCCL_DEBUG=INFO).
// Once the setting was read, the answer is a load of the shim's word, not
// a call into C (every steady call asks).
func logging() bool {
	if v := atomic.LoadInt32((*int32)(unsafe.Pointer(&C.mscclgo_log_state))); v >= 0 {
		return v != 0
	}
	return C.mscclgo_log_enabled() != 0
}

// logInfo writes one line to the INFO log.
func logInfo(format string, args ...any) {
	if !logging() {
		return
	}
	cs := C.CString(fmt.Sprintf(format, args...))
	defer C.free(unsafe.Pointer(cs))
	C.mscclgo_log(cs)
}

// answer sets the last error of a failed call of fn and returns its code.
func answer(fn string, err error) C.int {
	if err == nil {
		return C.ncclSuccess
	}
	setError(fmt.Sprintf("mscclgo: %s: %v", fn, err))
	return cResult(codeOf(err))
}

// guard turns a panic of an export into ncclInternalError, or, for the
// panic of commOf, its error.
func guard(fn string, out *C.int) {
	if p := recover(); p != nil {
		*out = answer(fn, panicError(p))
	}
}

// panicError is the error of a recovered panic p.
func panicError(p any) error {
	if e, ok := p.(*ncclError); ok {
		return e
	}
	return errorf(resultInternal, "internal error: %v", p)
}

// commOf is the communicator of handle h. A handle of a communicator
// that was ended (a caller racing its own destroy) panics with an
// ncclInvalidUsage error (a call in the wrong state), which guard
// returns.
func commOf(h C.uintptr_t) *comm {
	c := theLibrary.comm(uintptr(h))
	if c == nil {
		panic(errorf(resultInvalidUsage, "the communicator was destroyed or aborted (its handle %d is no longer valid)", uintptr(h)))
	}
	return c
}

// fnName is one NCCL function's name, and the address of the shim's
// string constant it was read from.
type fnName struct {
	at   uintptr
	name string
}

// fnName returns the name at p, a call's function as the shim gives it:
// always one of the shim's string constants, so the name is read once
// per function, not made anew (an allocation) at every call.
func (l *library) fnName(p *C.char) string {
	at := uintptr(unsafe.Pointer(p))
	if n := l.lastFn.Load(); n != nil && n.at == at {
		return n.name
	}
	n := &fnName{at: at, name: C.GoString(p)}
	l.lastFn.Store(n)
	return n.name
}

func newHandle(c *comm) C.uintptr_t { return C.uintptr_t(theLibrary.addComm(c)) }

//export mgoCheckRanks
func mgoCheckRanks(fn, what *C.char, n C.int) (res C.int) {
	name := C.GoString(fn)
	defer guard(name, &res)
	if n < 1 || int(n) > bootstrap.MaxWorldSize {
		return answer(name, errorf(resultInvalidArgument, "%s %d: a communicator has 1 to %d ranks", C.GoString(what), n, bootstrap.MaxWorldSize))
	}
	return C.ncclSuccess
}

//export mgoCheckInit
func mgoCheckInit(fn *C.char, nranks, rank C.int) (res C.int) {
	name := C.GoString(fn)
	defer guard(name, &res)
	return answer(name, checkRanks(int(nranks), int(rank)))
}

//export mgoRedOp
func mgoRedOp(h C.uintptr_t, op, created C.int) {
	defer func() { _ = recover() }() // an ended communicator has no ops to track
	commOf(h).addOp(int(op), created != 0)
}

//export mgoUniqueID
func mgoUniqueID(id *C.char) (res C.int) {
	const fn = "ncclGetUniqueId"
	defer guard(fn, &res)
	u, ln, err := newID(bootstrapHost())
	if err != nil {
		return answer(fn, err)
	}
	b, err := u.encode()
	if err != nil {
		ln.Close()
		return answer(fn, err)
	}
	theLibrary.keepRoot(u, ln)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(id)), idBytes), b[:])
	logInfo("ncclGetUniqueId: rank 0 will listen at %s", u.addr)
	return C.ncclSuccess
}

// mgoReleaseIDs closes the listeners this process opened for unique ids
// that will not be used (ncclCommInitRankScalable's roots after the
// first: one listener is enough for mscclgo's bootstrap). Ids from other
// processes, or not mscclgo's, are left alone.
//
//export mgoReleaseIDs
func mgoReleaseIDs(ids *C.char, n C.int) {
	all := unsafe.Slice((*byte)(unsafe.Pointer(ids)), int(n)*idBytes)
	for i := range int(n) {
		u, err := decodeID(all[i*idBytes : (i+1)*idBytes])
		if err != nil {
			continue
		}
		if ln := theLibrary.takeRoot(u); ln != nil {
			_ = ln.Close()
		}
	}
}

//export mgoCommInit
func mgoCommInit(nranks, rank C.int, id *C.char, dev, hasReal C.int, realID *C.char, out *C.uintptr_t) (res C.int) {
	return commInit(context.Background(), nranks, rank, id, dev, hasReal, realID, out)
}

// mgoCommInitAbortable is mgoCommInit for a nonblocking init: it gives up
// once *abort is set (by its ncclCommAbort, on another thread), which it
// reads every few milliseconds while the ranks meet.
//
//export mgoCommInitAbortable
func mgoCommInitAbortable(nranks, rank C.int, id *C.char, dev, hasReal C.int, realID *C.char, abort *C.int, out *C.uintptr_t) C.int {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if atomic.LoadInt32((*int32)(unsafe.Pointer(abort))) != 0 {
					cancel(errorf(resultInvalidUsage, "rank %d of %d: ncclCommAbort during its nonblocking init", rank, nranks))
					return
				}
			}
		}
	}()
	return commInit(ctx, nranks, rank, id, dev, hasReal, realID, out)
}

func commInit(abort context.Context, nranks, rank C.int, id *C.char, dev, hasReal C.int, realID *C.char, out *C.uintptr_t) (res C.int) {
	const fn = "ncclCommInitRank"
	defer guard(fn, &res)
	handlersOnStack()
	ids := unsafe.Slice((*byte)(unsafe.Pointer(id)), idBytes)
	real := unsafe.Slice((*byte)(unsafe.Pointer(realID)), idBytes)
	c, err := initRank(abort, int(nranks), int(rank), ids, int(dev), hasReal != 0, real)
	if err != nil {
		return answer(fn, ofRank(int(rank), int(nranks), err))
	}
	*out = newHandle(c)
	logInfo("rank %d of %d: bootstrap up, %d ranks per node, plan set %s", c.rank, c.size, c.ranksPerNode, c.plans.describe())
	return C.ncclSuccess
}

//export mgoCommInitAll
func mgoCommInitAll(ndev C.int, devs *C.int, out *C.uintptr_t) (res C.int) {
	const fn = "ncclCommInitAll"
	defer guard(fn, &res)
	handlersOnStack()
	if err := checkRanks(int(ndev), 0); err != nil {
		return answer(fn, err)
	}
	ds := make([]int, int(ndev))
	for i, d := range unsafe.Slice(devs, int(ndev)) {
		ds[i] = int(d)
	}
	comms, err := initAll(ds)
	if err != nil {
		return answer(fn, err)
	}
	outs := unsafe.Slice(out, int(ndev))
	for i, c := range comms {
		outs[i] = newHandle(c)
	}
	logInfo("ncclCommInitAll: %d ranks in this process, plan set %s", ndev, comms[0].plans.describe())
	return C.ncclSuccess
}

//export mgoCommSplit
func mgoCommSplit(parent C.uintptr_t, color, key, dev C.int, out *C.uintptr_t, rank, size *C.int) (res C.int) {
	const fn = "ncclCommSplit"
	defer guard(fn, &res)
	p := commOf(parent)
	if err := p.use(); err != nil {
		return answer(fn, err)
	}
	c, err := p.split(int(color), int(key))
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", p.rank, p.size, err))
	}
	if c == nil {
		*out = 0
		return C.ncclSuccess
	}
	*out = newHandle(c)
	*rank, *size = C.int(c.rank), C.int(c.size)
	return C.ncclSuccess
}

//export mgoCommFinalize
func mgoCommFinalize(h C.uintptr_t) (res C.int) {
	const fn = "ncclCommFinalize"
	defer guard(fn, &res)
	return answer(fn, commOf(h).finalize())
}

//export mgoCommDestroy
func mgoCommDestroy(h C.uintptr_t) C.int { return endComm(h, "ncclCommDestroy") }

//export mgoCommAbort
func mgoCommAbort(h C.uintptr_t) C.int { return endComm(h, "ncclCommAbort") }

// endComm ends the communicator of h and frees the handle; a second end,
// concurrent or later, is refused with ncclInvalidUsage.
func endComm(h C.uintptr_t, fn string) (res C.int) {
	defer guard(fn, &res)
	if err := commOf(h).end(fn); err != nil {
		return answer(fn, err)
	}
	theLibrary.dropComm(uintptr(h))
	return C.ncclSuccess
}

//export mgoCommAsyncError
func mgoCommAsyncError(h C.uintptr_t, out *C.int) (res C.int) {
	const fn = "ncclCommGetAsyncError"
	defer guard(fn, &res)
	err := commOf(h).asyncError()
	*out = cResult(codeOf(err))
	if err != nil {
		setError(fmt.Sprintf("mscclgo: %v", err))
	}
	return C.ncclSuccess
}

//export mgoDecide
func mgoDecide(h C.uintptr_t, k *C.struct_mscclgo_call, out *C.int) C.int {
	return takeCall(h, k, out, false)
}

// takeCall answers call k of communicator h: MSCCLGO_DONE with its
// result in *out, MSCCLGO_FORWARD, or, for a call inside a group whose
// plan will run, MSCCLGO_DEFER. deferred is set when the call is one a
// group deferred, now run at the group's end.
func takeCall(h C.uintptr_t, k *C.struct_mscclgo_call, out *C.int, deferred bool) (res C.int) {
	fn := theLibrary.fnName(k.fn)
	defer func() {
		if p := recover(); p != nil {
			*out = answer(fn, panicError(p))
			res = C.MSCCLGO_DONE
		}
	}()
	c := commOf(h)
	if err := c.use(); err != nil {
		*out = answer(fn, err)
		return C.MSCCLGO_DONE
	}
	kc := callOf(k, fn)
	kc.deferred = deferred
	if err := c.checkCall(kc); err != nil {
		*out = answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
		return C.MSCCLGO_DONE
	}
	if c.emptyCall(kc) {
		*out = C.ncclSuccess
		return C.MSCCLGO_DONE
	}
	d := c.decideCached(kc)
	if !deferred && kc.groupDepth > 0 && c.defers(kc, d) {
		// Run at the end of the group, when every call of the group is
		// known: the ranks of one thread's group meet concurrently there.
		return C.MSCCLGO_DEFER
	}
	return c.settle(kc, d, out)
}

// callOf is the Go view of a call from the C side (fn: its function's
// name, k.fn read once).
func callOf(k *C.struct_mscclgo_call, fn string) call {
	return call{
		fn: fn, coll: collective(k.coll), sendPtr: unsafe.Pointer(k.send), recvPtr: k.recv,
		send: uintptr(unsafe.Pointer(k.send)), recv: uintptr(k.recv), count: uint64(k.count),
		dtype: int(k.dtype), op: int(k.op), peer: int(k.peer), stream: uintptr(k.stream),
		hasFallback: k.has_fallback != 0, groupDepth: int(k.group_depth),
	}
}

//export mgoRunGroup
func mgoRunGroup(n C.int, hs *C.uintptr_t, ks *C.struct_mscclgo_call, verdicts *C.int, results *C.int) {
	handles := unsafe.Slice(hs, int(n))
	calls := unsafe.Slice(ks, int(n))
	vs := unsafe.Slice(verdicts, int(n))
	rs := unsafe.Slice(results, int(n))
	// Each communicator's calls in order, the communicators at once: one
	// thread's group may hold several ranks of a job, which must meet.
	byComm := map[C.uintptr_t][]int{}
	var order []C.uintptr_t
	for i, h := range handles {
		if _, ok := byComm[h]; !ok {
			order = append(order, h)
		}
		byComm[h] = append(byComm[h], i)
	}
	var wg sync.WaitGroup
	for _, h := range order {
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			for _, i := range idx {
				vs[i] = takeCall(h, &calls[i], &rs[i], true)
			}
		}(byComm[h])
	}
	wg.Wait()
}

// settle runs call k as decision d says, or says why it goes to the
// fallback (or fails without one).
func (c *comm) settle(kc call, d decision, out *C.int) C.int {
	fn := kc.fn
	why := d.why
	if d.generic {
		done, res, reason := c.runGeneric(kc, d)
		if done {
			*out = res
			return C.MSCCLGO_DONE
		}
		why += ", and " + reason
	}
	if d.plan != "" {
		ran, err, reason := c.runOnDevice(kc, d)
		switch {
		case ran:
			if logging() {
				logInfo("%s: plan %s on %s, enqueued", c.describe(kc), d.plan, deviceBackend)
			}
			*out = answer(fn, err)
			return C.MSCCLGO_DONE
		case reason == "":
			if ran, err, reason = c.runOnHost(kc, d); ran {
				if logging() {
					logInfo("%s: plan %s on host memory (CPU backend)", c.describe(kc), d.plan)
				}
				*out = answer(fn, err)
				return C.MSCCLGO_DONE
			}
		}
		why += ", but " + reason
	}
	if !kc.hasFallback {
		if logging() {
			logInfo("%s: refused: %s; no fallback NCCL", c.describe(kc), why)
		}
		setErrorLogged(fmt.Sprintf("mscclgo: %s: rank %d of %d: %s, and there is no fallback NCCL: %s",
			fn, c.rank, c.size, why, C.GoString(C.mscclgo_fallback_why())), false)
		*out = C.ncclInvalidUsage
		return C.MSCCLGO_DONE
	}
	if logging() {
		logInfo("%s: fallback: %s", c.describe(kc), why)
	}
	return C.MSCCLGO_FORWARD
}
