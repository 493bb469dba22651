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
	"math/bits"
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

// customCall is the call of mscclgoSelect or mscclgoExecute (a sum; see
// customOp for the others).
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
	if k.dtype < 0 || k.dtype >= len(dtypeNames) {
		return k, errorf(resultInvalidArgument, "data type %d is not an ncclDataType_t (0 to %d)", k.dtype, len(dtypeNames)-1)
	}
	return k, nil
}

// customOp sets call k's reduction to op (mscclgoExecuteOp), with scalar
// (one element of k's type in host memory) for MSCCLGO_PREMUL_SUM.
// Allgather ignores op.
func customOp(k *call, op C.int, scalar unsafe.Pointer) error {
	if !k.coll.hasOp() {
		return nil
	}
	switch {
	case op < 0 || op > opPreMulSum:
		return errorf(resultInvalidArgument, "reduction %d: want ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg (0 to 4) or MSCCLGO_PREMUL_SUM (5)", op)
	case op == opPreMulSum && scalar == nil:
		return errorf(resultInvalidArgument, "MSCCLGO_PREMUL_SUM with a NULL scalar (want one %s in host memory)", dtypeName(k.dtype))
	case op == opPreMulSum:
		k.premul = true
		k.scalar = C.GoBytes(scalar, C.int(elemSize(k.dtype)))
	}
	k.op = int(op)
	return nil
}

// checkCustom is checkCall for a custom call (whose MSCCLGO_PREMUL_SUM
// is no op created on the communicator).
func (c *comm) checkCustom(k call) error {
	if k.premul {
		k.op = opSum
	}
	return c.checkCall(k)
}

// choose finds the plan of call k: the registered plan named plan, else
// the selector's choice, else select's rules over the registered plans.
func (c *comm) choose(cs *customState, k call, plan string) (decision, error) {
	cs.mu.Lock()
	sources, selector, user := cs.sources, cs.selector, cs.user
	cs.mu.Unlock()
	req := planset.Request{Collective: k.coll.planName(), WorldSize: c.size, RanksPerNode: c.ranksPerNode,
		Size: k.size(c.size), InPlace: k.inPlace(c.rank), ElementSize: int(elemSize(k.dtype)), Host: c.gpu == nil || k.hostMem}
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
	if plan == builtinName {
		// What mscclgoSelect answers where no plan serves the call.
		return decision{generic: true, why: "named " + builtinName}, nil
	}
	if plan == "" {
		callInPlace := req.InPlace
		if c.gpu != nil && !k.hostMem {
			// Every rank's plan from what they share (decide).
			req.InPlace = devicePlace(k.coll)
		}
		if !planElem(k.dtype) {
			return decision{generic: true, why: fmt.Sprintf("%s: plans compute float16, bfloat16, float32 and int32", dtypeName(k.dtype))}, nil
		}
		choice, planInPlace, padBlock, err := selectPadded(sources, req, k.coll, k.count*elemSize(k.dtype))
		if errors.Is(err, planset.ErrNoPlan) {
			why := "no plan is registered (mscclgoRegisterPlan)"
			if len(sources) > 0 {
				why = noPlanWhy(sources, req, err)
			}
			return decision{generic: true, why: why}, nil
		}
		if err != nil {
			return decision{}, &ncclError{code: resultInvalidUsage, err: err}
		}
		d := decision{plan: choice.Entry.Name, path: filepath.Join(choice.Dir, choice.Entry.File), why: choice.Why, planInPlace: planInPlace}
		if padBlock != 0 {
			d.padCount = padBlock / elemSize(k.dtype)
			return d, nil
		}
		d.viaCopy, d.viaStage = planInPlace && !callInPlace, !planInPlace && callInPlace
		return d, nil
	}
	for _, s := range sources {
		for _, e := range s.Index.Plans {
			if e.Name != plan {
				continue
			}
			if e.Collective != req.Collective || e.WorldSize != c.size {
				return decision{}, errorf(resultInvalidUsage, "plan %s is a %s plan for %d ranks, not %s for %d", plan, e.Collective, e.WorldSize, req.Collective, c.size)
			}
			if !planElem(k.dtype) {
				return decision{}, errorf(resultInvalidUsage, "plan %s: %s: plans compute float16, bfloat16, float32 and int32 (name no plan to take the built-in path)", plan, dtypeName(k.dtype))
			}
			d := decision{plan: plan, path: filepath.Join(s.Dir, e.File), why: "named", planInPlace: e.InPlace}
			if req.Size < e.MinMessageSize || req.Size > e.MaxMessageSize || !fitsWhole(e, k.coll, uint64(c.size), elemSize(k.dtype), k.count*elemSize(k.dtype)) {
				// Padded to the plan's next size (pad.go).
				named := planset.Source{Dir: s.Dir, Index: &planset.Index{Plans: []planset.Entry{e}}}
				pr := req
				pr.RanksPerNode, pr.NVLS = e.RanksPerNode, e.NVLS
				_, pb, ok := paddedSize([]planset.Source{named}, pr, k.coll, k.count*elemSize(k.dtype))
				if !ok {
					return decision{}, errorf(resultInvalidUsage, "plan %s takes %s of [%d, %d] bytes, not %d, nor any padded size above it", plan, e.Collective, e.MinMessageSize, e.MaxMessageSize, req.Size)
				}
				d.padCount = pb / elemSize(k.dtype)
				return d, nil
			}
			// A plan of the other placement runs after a copy of the
			// input (an out-of-place plan reads a staged copy).
			d.viaCopy, d.viaStage = e.InPlace && !req.InPlace, !e.InPlace && req.InPlace
			return d, nil
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
		err = c.checkCustom(k)
	}
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	d, err := c.choose(cs, k, goStringOrEmpty(plan))
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	got := d.plan
	if d.generic {
		got = builtinName
	}
	if uint64(len(got)) >= uint64(capacity) {
		return answer(fn, errorf(resultInvalidArgument, "plan name %q does not fit in %d bytes", got, capacity))
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(name)), int(capacity))
	copy(out, got)
	out[len(got)] = 0
	return C.ncclSuccess
}

//export mgoCustomExecute
func mgoCustomExecute(h C.uintptr_t, collective, plan *C.char, send, recv unsafe.Pointer, count C.size_t, dtype C.int, stream C.uintptr_t, host C.int) (res C.int) {
	fn := "mscclgoExecute"
	if host != 0 {
		fn = "mscclgoExecuteHost"
	}
	defer guard(fn, &res)
	return customExecute(fn, h, collective, plan, send, recv, count, dtype, opSum, nil, stream, host)
}

// mgoCustomExecuteOp is mscclgoExecuteOp and mscclgoExecuteHostOp
// (declared in custom.c).
//
//export mgoCustomExecuteOp
func mgoCustomExecuteOp(h C.uintptr_t, collective, plan *C.char, send, recv unsafe.Pointer, count C.size_t, dtype, op C.int, scalar unsafe.Pointer, stream C.uintptr_t, host C.int) (res C.int) {
	fn := "mscclgoExecuteOp"
	if host != 0 {
		fn = "mscclgoExecuteHostOp"
	}
	defer guard(fn, &res)
	return customExecute(fn, h, collective, plan, send, recv, count, dtype, op, scalar, stream, host)
}

// customExecute runs a call of the custom communicator: its plan (named,
// the selector's or select's, padded where no plan takes the count
// whole), or the built-in path on host memory where none serves it.
func customExecute(fn string, h C.uintptr_t, collective, plan *C.char, send, recv unsafe.Pointer, count C.size_t, dtype, op C.int, scalar unsafe.Pointer, stream C.uintptr_t, host C.int) C.int {
	c, cs := customOf(h)
	if err := c.use(); err != nil {
		return answer(fn, err)
	}
	k, err := customCall(fn, collective, send, recv, count, dtype)
	if err == nil {
		err = customOp(&k, op, scalar)
	}
	if err == nil {
		err = c.checkCustom(k)
	}
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	k.stream = uintptr(stream)
	k.hostMem = host != 0
	return c.customRun(fn, cs, k, plan)
}

// gatherFn is the C name of mgoCustomExecuteGather.
const gatherFn = "mscclgoExecuteHostGather"

// mgoCustomExecuteGather is mscclgoExecuteHostGather (declared in
// custom.c): an allgather on host memory whose rank j's block lands in
// recvs[j] (an array of one pointer per rank, each to count elements),
// as mscclgoExecuteHost's allgather into one buffer would hold it. A
// rank's multi-process session copies its output to them directly; so
// a list of tensors is gathered with one copy, not two.
//
//export mgoCustomExecuteGather
func mgoCustomExecuteGather(h C.uintptr_t, plan *C.char, send, recvs unsafe.Pointer, count C.size_t, dtype C.int) (res C.int) {
	const fn = gatherFn
	defer guard(fn, &res)
	c, cs := customOf(h)
	if err := c.use(); err != nil {
		return answer(fn, err)
	}
	k := call{fn: fn, coll: collAllGather, sendPtr: send, send: uintptr(send), count: uint64(count), dtype: int(dtype), op: -1, peer: -1, hostMem: true}
	err := c.checkCustom(k)
	if err == nil && k.count > 0 { // zero elements succeed at once, as every call's
		k.recvParts, err = gatherParts(recvs, c.size, k.count*elemSize(k.dtype))
	}
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	return c.customRun(fn, cs, k, plan)
}

// gatherParts is the n buffers of block bytes that recvs points to (an
// array of n pointers), or an error naming the one that is NULL or runs
// past the end of the address space.
func gatherParts(recvs unsafe.Pointer, n int, block uint64) ([][]byte, error) {
	if recvs == nil {
		return nil, errorf(resultInvalidArgument, "recvbuffs is NULL (want an array of %d pointers, one per rank)", n)
	}
	parts := make([][]byte, n)
	for j, p := range unsafe.Slice((*unsafe.Pointer)(recvs), n) {
		if p == nil {
			return nil, errorf(resultInvalidArgument, "recvbuffs[%d] is NULL (want %d buffers of %d bytes)", j, n, block)
		}
		if _, carry := bits.Add64(uint64(uintptr(p)), block, 0); carry != 0 {
			return nil, errorf(resultInvalidArgument, "recvbuffs[%d], %p of %d bytes, runs past the end of the address space", j, p, block)
		}
		parts[j] = unsafe.Slice((*byte)(p), block)
	}
	return parts, nil
}

// customRun runs call k (checked) of the custom communicator: plan
// (NULL for the selector's or select's choice), or the built-in path on
// host memory where none serves it.
func (c *comm) customRun(fn string, cs *customState, k call, plan *C.char) C.int {
	if c.emptyCall(k) {
		return C.ncclSuccess
	}
	d, err := c.choose(cs, k, goStringOrEmpty(plan))
	if err != nil {
		return answer(fn, fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err))
	}
	if d.generic {
		done, res, reason := c.runGeneric(k, d)
		if !done {
			return answer(fn, errorf(resultInvalidUsage, "rank %d of %d: %s, and %s", c.rank, c.size, d.why, reason))
		}
		return res
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
