package main

// custom.go: the Go side of mscclgo's own communicator (include/mscclgo.h,
// custom.c): plans registered by the program, a selector it may set, and
// execution of a named or selected plan.

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/planset"
)

// customState is what a custom communicator adds to comm.
type customState struct {
	mu       sync.Mutex
	sources  []planset.Source // registered, in order
	tmp      []string         // directories made for single plan files
	selector C.mscclgoSelector_t
	user     unsafe.Pointer
}

// customOf is the custom part of the communicator of h, made on first use.
func customOf(h C.uintptr_t) (*comm, *customState) {
	c := commOf(h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.custom == nil {
		c.custom = &customState{}
	}
	return c, c.custom
}

//export mgoCustomInitEnv
func mgoCustomInitEnv(dev C.int, out *C.uintptr_t, rank, size *C.int) (res C.int) {
	const fn = "mscclgoCommInitEnv"
	defer guard(fn, &res)
	w, ok, err := bootstrap.FromEnv(os.Getenv)
	if err != nil {
		return answer(fn, &ncclError{code: resultInvalidArgument, err: err})
	}
	if !ok {
		w = bootstrap.World{Rank: 0, Size: 1}
	}
	timeout, err := initTimeout()
	if err != nil {
		return answer(fn, &ncclError{code: resultInvalidArgument, err: err})
	}
	c, err := connect(context.Background(), w, nil, int(dev), timeout)
	if err != nil {
		return answer(fn, err)
	}
	if err := c.setUpHost("", func() *hostHub { return newHostHub(c.size) }); err != nil {
		c.boot.Close()
		return answer(fn, err)
	}
	*out = newHandle(c)
	*rank, *size = C.int(c.rank), C.int(c.size)
	return C.ncclSuccess
}

//export mgoCustomRegister
func mgoCustomRegister(h C.uintptr_t, path *C.char, count *C.int) (res C.int) {
	const fn = "mscclgoRegisterPlan"
	defer guard(fn, &res)
	_, cs := customOf(h)
	n, err := cs.register(C.GoString(path))
	if err != nil {
		return answer(fn, &ncclError{code: resultInvalidArgument, err: err})
	}
	*count = C.int(n)
	return C.ncclSuccess
}

// register adds the plans of path (a plan file, or a plan-set directory)
// and returns how many.
func (cs *customState) register(path string) (int, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a plan file or a plan-set directory (%s)", path, fileKind(st.Mode()))
	}
	dir := path
	if !st.IsDir() {
		// A file is scanned as the only plan of a directory of its own.
		abs, err := filepath.Abs(path)
		if err != nil {
			return 0, err
		}
		if dir, err = os.MkdirTemp("", "mscclgo-plan-"); err != nil {
			return 0, err
		}
		cs.mu.Lock()
		cs.tmp = append(cs.tmp, dir)
		cs.mu.Unlock()
		if err := os.Symlink(abs, filepath.Join(dir, filepath.Base(abs))); err != nil {
			return 0, err
		}
	}
	idx, err := planset.ReadIndex(dir)
	if errors.Is(err, planset.ErrNoIndex) {
		idx, err = planset.ScanDir(dir)
	}
	if err != nil {
		if dir != path {
			// Name the caller's file, not the directory made for it.
			abs, _ := filepath.Abs(path)
			msg := strings.ReplaceAll(err.Error(), filepath.Join(dir, filepath.Base(abs)), path)
			return 0, errors.New(strings.ReplaceAll(msg, dir, path))
		}
		return 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.sources = append(cs.sources, planset.Source{Dir: dir, Index: idx})
	return len(idx.Plans), nil
}

// fileKind names a file that is neither regular nor a directory.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

// close removes the directories made for plan files.
func (cs *customState) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, d := range cs.tmp {
		os.RemoveAll(d)
	}
	cs.tmp = nil
}

//export mgoCustomSetSelector
func mgoCustomSetSelector(h C.uintptr_t, selector C.mscclgoSelector_t, user unsafe.Pointer) (res C.int) {
	defer guard("mscclgoSetSelector", &res)
	_, cs := customOf(h)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.selector, cs.user = selector, user
	return C.ncclSuccess
}

// customCall is the call of mscclgoSelect or mscclgoExecute.
func customCall(fn string, collectiveName *C.char, send, recv unsafe.Pointer, count C.size_t, dtype C.int) (call, error) {
	k := call{fn: fn, sendPtr: send, recvPtr: recv, send: uintptr(send), recv: uintptr(recv), count: uint64(count), dtype: int(dtype), op: -1, peer: -1}
	switch name := C.GoString(collectiveName); name {
	case "allreduce":
		k.coll, k.op = collAllReduce, 0
	case "allgather":
		k.coll = collAllGather
	case "reducescatter":
		k.coll, k.op = collReduceScatter, 0
	default:
		return k, errorf(resultInvalidArgument, "collective %q: mscclgo runs allreduce, allgather and reducescatter", name)
	}
	if !planElem(k.dtype) {
		return k, errorf(resultInvalidArgument, "%s: plans compute float16, bfloat16, float32 and int32", dtypeName(k.dtype))
	}
	return k, nil
}

// choose finds the plan of call k: the registered plan named plan, else
// the selector's choice, else select's rules over the registered plans.
func (c *comm) choose(cs *customState, k call, plan string) (decision, error) {
	cs.mu.Lock()
	sources, selector, user := cs.sources, cs.selector, cs.user
	cs.mu.Unlock()
	req := planset.Request{Collective: k.coll.planName(), WorldSize: c.size, RanksPerNode: c.ranksPerNode,
		Size: k.size(c.size), InPlace: k.inPlace(c.rank), ElementSize: int(elemSize(k.dtype))}
	if plan == "" && selector != nil {
		cname := C.CString(req.Collective)
		defer C.free(unsafe.Pointer(cname))
		creq := C.mscclgoRequest_t{collective: cname, size: C.size_t(req.Size), worldSize: C.int(req.WorldSize),
			ranksPerNode: C.int(req.RanksPerNode), dtype: C.ncclDataType_t(k.dtype)}
		if req.InPlace {
			creq.inPlace = 1
		}
		got := C.mscclgo_call_selector(selector, &creq, user)
		if got == nil {
			return decision{}, errorf(resultInvalidUsage, "the selector chose no plan for %s of %d bytes (%s)", req.Collective, req.Size, placeName(req.InPlace))
		}
		plan = C.GoString(got)
		if plan == "" {
			// Not a silent fall back to select's rules: "" names no plan.
			return decision{}, errorf(resultInvalidUsage, "the selector returned an empty plan name for %s of %d bytes (%s): return a registered plan's name, or NULL to refuse the call", req.Collective, req.Size, placeName(req.InPlace))
		}
	}
	if plan == "" {
		callInPlace := req.InPlace
		if c.gpu != nil && !k.hostMem {
			// Every rank's plan from what they share (decide).
			req.InPlace = devicePlace(k.coll)
		}
		choice, planInPlace, err := selectEitherPlace(sources, req)
		if err != nil {
			return decision{}, &ncclError{code: resultInvalidUsage, err: err}
		}
		return decision{plan: choice.Entry.Name, path: filepath.Join(choice.Dir, choice.Entry.File), why: choice.Why,
			planInPlace: planInPlace, viaCopy: planInPlace && !callInPlace, viaStage: !planInPlace && callInPlace}, nil
	}
	for _, s := range sources {
		for _, e := range s.Index.Plans {
			if e.Name != plan {
				continue
			}
			if e.Collective != req.Collective || e.WorldSize != c.size {
				return decision{}, errorf(resultInvalidUsage, "plan %s is a %s plan for %d ranks, not %s for %d", plan, e.Collective, e.WorldSize, req.Collective, c.size)
			}
			// A plan of the other placement runs after a copy of the
			// input (an out-of-place plan reads a staged copy).
			return decision{plan: plan, path: filepath.Join(s.Dir, e.File), why: "named", viaCopy: e.InPlace && !req.InPlace,
				viaStage: !e.InPlace && req.InPlace, planInPlace: e.InPlace}, nil
		}
	}
	return decision{}, errorf(resultInvalidUsage, "no registered plan is named %q (mscclgoRegisterPlan)", plan)
}

//export mgoCustomSelect
func mgoCustomSelect(h C.uintptr_t, collective, plan *C.char, send, recv unsafe.Pointer, count C.size_t, dtype C.int, name *C.char, capacity C.size_t) (res C.int) {
	const fn = "mscclgoSelect"
	defer guard(fn, &res)
	c, cs := customOf(h)
	k, err := customCall(fn, collective, send, recv, count, dtype)
	if err == nil {
		err = c.checkCall(k)
	}
	if err != nil {
		return answer(fn, err)
	}
	d, err := c.choose(cs, k, goStringOrEmpty(plan))
	if err != nil {
		return answer(fn, err)
	}
	if uint64(len(d.plan)) >= uint64(capacity) {
		return answer(fn, errorf(resultInvalidArgument, "plan name %q does not fit in %d bytes", d.plan, capacity))
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(name)), int(capacity))
	copy(out, d.plan)
	out[len(d.plan)] = 0
	return C.ncclSuccess
}

//export mgoCustomExecute
func mgoCustomExecute(h C.uintptr_t, collective, plan *C.char, send, recv unsafe.Pointer, count C.size_t, dtype C.int, stream C.uintptr_t, host C.int) (res C.int) {
	fn := "mscclgoExecute"
	if host != 0 {
		fn = "mscclgoExecuteHost"
	}
	defer guard(fn, &res)
	c, cs := customOf(h)
	if err := c.use(); err != nil {
		return answer(fn, err)
	}
	k, err := customCall(fn, collective, send, recv, count, dtype)
	if err == nil {
		err = c.checkCall(k)
	}
	if err != nil {
		return answer(fn, err)
	}
	k.stream = uintptr(stream)
	k.hostMem = host != 0
	d, err := c.choose(cs, k, goStringOrEmpty(plan))
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	var ran bool
	var reason string
	if !k.hostMem {
		ran, err, reason = c.runOnDevice(k, d)
		if ran {
			if logging() {
				logInfo("%s: plan %s on %s, enqueued", c.describe(k), d.plan, deviceBackend)
			}
			return answer(fn, err)
		}
	}
	if reason == "" {
		ran, err, reason = c.runOnHost(k, d)
	}
	if !ran {
		return answer(fn, errorf(resultInvalidUsage, "rank %d of %d: plan %s: %s", c.rank, c.size, d.plan, reason))
	}
	if logging() {
		logInfo("%s: plan %s on host memory (CPU backend)", c.describe(k), d.plan)
	}
	return answer(fn, err)
}

func goStringOrEmpty(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
