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
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
)

// Host-memory runs execute the chosen plan on the CPU reference backend
// on buffers in host memory, synchronously, in the calling thread (the
// call returns when the collective is done; the stream is ignored). Two
// kinds of call take them:
//   - a call of mscclgo's own communicator on host memory
//     (mscclgoExecuteHost: the Python package's CPU tensors), always;
//   - an NCCL call or mscclgoExecute with MSCCLGO_NCCL_HOSTMEM=1, where
//     "device" pointers are host memory (the fake CUDA driver, tests).
//
// Where every rank of the communicator is a thread of this process they
// meet in a hostHub and the last to arrive runs the plan for all, on the
// callers' buffers. Where the ranks are processes (torchrun, mpirun) each
// runs its own rank over the CPU backend's multi-process transport
// (cpu.OpenRank, the one `mscclgo run` uses under mpirun): the peers on
// this host share the session's buffers through shared memory, and the
// call copies its input in and its output out, except a buffer that no
// peer reaches, which the run takes where the caller has it
// (directParts, RankSession.LaunchDirect). Either way each plan
// instance (plan, size, element type, in place or not) keeps one CPU
// session, at most MSCCLGO_NCCL_MAX_SESSIONS of them per communicator
// (as on the device): opening one more first closes the least recently
// called one. Every rank makes the same calls in the same order, so every
// rank closes the same one, without a message; no run is under way on it
// then (a hub runs one call at a time; a process's call opens a session
// only after every rank has met, so their earlier runs have ended).

// hostMemEnabled reports whether MSCCLGO_NCCL_HOSTMEM asks for host-memory
// runs of NCCL calls.
func hostMemEnabled() bool {
	v := os.Getenv("MSCCLGO_NCCL_HOSTMEM")
	return v != "" && v != "0"
}

// hostTag is the first bootstrap message tag of a communicator's
// multi-process host sessions (deviceTag's sessions count up from 1<<20).
const hostTag = 1 << 28

// arrivalTag is the bootstrap message tag of the ranks' arrivals at each
// call of their multi-process host sessions (hostProcs.arrive).
const arrivalTag = genericTag + 1

// setUpHost prepares c's host-memory runs, on every rank of c at once:
// when all its ranks are threads of this process, they share the hub
// that hub returns (taken under the token key, "" for a hub of c's
// own); otherwise each runs its rank over the multi-process
// transport.
func (c *comm) setUpHost(key string, hub func() *hostHub) error {
	max, err := maxSessions()
	if err != nil {
		return errorf(resultInvalidArgument, "rank %d of %d: %v", c.rank, c.size, err)
	}
	local, err := c.allInProcess()
	if err != nil {
		return err
	}
	if local {
		c.hub, c.hubKey = hub(), key
		c.hub.join(max)
	} else {
		c.procs = &hostProcs{max: max}
		c.procs.openBoard(c)
	}
	return nil
}

// openBoard gives p the arrival board of c's ranks in shared memory
// (cpu.OpenBoard), on every rank of c at once, where every rank is on
// this host and MSCCLGO_NCCL_ARRIVAL is not "sockets": each call's
// arrival (arrive) is then a store in the rank's slot and loads of its
// peers', no message. Where it cannot be made (on any rank) the ranks
// arrive through the bootstrap, as across hosts.
func (p *hostProcs) openBoard(c *comm) {
	if c.size < 2 || len(c.boot.Hosts()) != 1 || os.Getenv("MSCCLGO_NCCL_ARRIVAL") == "sockets" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	b, err := cpu.OpenBoard(ctx, c.boot, "")
	if err != nil {
		if logging() {
			logInfo("rank %d of %d: no arrival board in shared memory, the calls' arrivals go through the bootstrap: %v", c.rank, c.size, err)
		}
		return
	}
	p.board = b
}

// hostLRU is the bound on a communicator's host sessions: which plan
// instance was called when, and how many were closed to make room.
type hostLRU struct {
	max     int               // sessions kept open; 0 is gpu.DefaultMaxSessions
	calls   uint64            // calls so far
	used    map[string]uint64 // each open instance's last call
	evicted int               // sessions closed to make room
}

// touch records a call of instance key.
func (l *hostLRU) touch(key string) {
	l.calls++
	if l.used == nil {
		l.used = map[string]uint64{}
	}
	l.used[key] = l.calls
}

// victim is the open instance to close before one more opens, "" while
// there is room: the least recently called one (ties, which cannot
// happen, by key).
func (l *hostLRU) victim(open int) string {
	max := l.max
	if max <= 0 {
		max = gpu.DefaultMaxSessions
	}
	if open < max {
		return ""
	}
	var oldest string
	for k, at := range l.used {
		if oldest == "" || at < l.used[oldest] || (at == l.used[oldest] && k < oldest) {
			oldest = k
		}
	}
	return oldest
}

// forget drops instance key (closed).
func (l *hostLRU) forget(key string) { delete(l.used, key) }

// closeHost ends c's host sessions (ncclCommDestroy, ncclCommAbort).
func (c *comm) closeHost() {
	if c.hub != nil {
		c.hub.leave()
	}
	if c.procs != nil {
		if err := c.procs.close(); err != nil && logging() {
			logInfo("rank %d of %d: closing its host sessions: %v", c.rank, c.size, err)
		}
	}
}

// hostHub is where the ranks of one communicator, all threads of this
// process, meet for each call: the last to arrive runs the plan for all.
type hostHub struct {
	size  int
	mu    sync.Mutex
	round *hostRound
	plans planFiles
	// members counts the communicators using the hub; the last to leave
	// closes the sessions.
	members int

	// run serializes the plans' runs; sessions are the CPU sessions by
	// plan instance (instanceKey), at most lru.max of them. Both guarded
	// by run.
	run      sync.Mutex
	sessions map[string]executor.Session
	lru      hostLRU

	// stages are the ranks' host staging buffers (padded or scaled
	// calls), by rank: one round runs at a time, all its ranks waiting
	// in it, so no two runs use one.
	stages [][]byte
}

func newHostHub(size int) *hostHub {
	return &hostHub{size: size, stages: make([][]byte, size)}
}

// join adds a member that keeps at most max sessions open (every rank
// reads the same MSCCLGO_NCCL_MAX_SESSIONS).
func (h *hostHub) join(max int) {
	h.mu.Lock()
	h.members++
	h.mu.Unlock()
	h.run.Lock()
	h.lru.max = max
	h.run.Unlock()
}

// evictions is how many sessions the hub closed to make room, and how
// many are open.
func (h *hostHub) evictions() (open, evicted int) {
	h.run.Lock()
	defer h.run.Unlock()
	return len(h.sessions), h.lru.evicted
}

// leave drops one member; the last closes the hub's sessions.
func (h *hostHub) leave() {
	h.mu.Lock()
	h.members--
	last := h.members <= 0
	h.mu.Unlock()
	if !last {
		return
	}
	h.run.Lock()
	defer h.run.Unlock()
	for k, s := range h.sessions {
		s.Close()
		delete(h.sessions, k)
		h.lru.forget(k)
	}
}

// hostRound is one call being gathered.
type hostRound struct {
	sig   string   // the call, as every rank must make it
	sigs  []string // each rank's, for the error of a mismatch
	parts []hostPart
	n     int
	done  chan struct{}
	err   error
	order []int // ranks in arrival order
	// stopRun stops the run once every rank came (nil before): a rank
	// that gives up waiting stops it and waits for it to end, so that no
	// call returns while the run still holds its buffers.
	stopRun context.CancelCauseFunc
}

// hostProcs is one rank's multi-process host sessions.
type hostProcs struct {
	mu       sync.Mutex // one call at a time
	calls    uint64     // the calls so far (arrive)
	sessions map[string]*cpu.RankSession
	next     uint32 // the next session's tag offset from hostTag
	max      int    // MSCCLGO_NCCL_MAX_SESSIONS
	lru      hostLRU
	// board is the ranks' arrival board in shared memory (openBoard),
	// nil where they arrive through the bootstrap.
	board *cpu.Board
}

// evictions is how many sessions p closed to make room, and how many
// are open. The caller holds p.mu (runOnHost holds it for the whole
// call, from its arrival on).
func (p *hostProcs) evictions() (open, evicted int) {
	return len(p.sessions), p.lru.evicted
}

func (p *hostProcs) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.board != nil {
		p.board.Leave()
		p.board.Close()
		p.board = nil
	}
	var first error
	for k, s := range p.sessions {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
		delete(p.sessions, k)
		p.lru.forget(k)
	}
	return first
}

// hostRefusal is why call k cannot run on host memory, "" when it can.
func (c *comm) hostRefusal(k call) string {
	switch {
	case !k.hostMem && !hostMemEnabled():
		if deviceBackend == "" {
			return "this build has no device backend to launch plans on the caller's device buffers (make nccl NCCL_BACKEND=cuda builds one; MSCCLGO_NCCL_HOSTMEM=1 runs plans on the CPU backend where device memory is host memory)"
		}
		return "the device backend did not take the call and MSCCLGO_NCCL_HOSTMEM is not set"
	case c.hub == nil && c.procs == nil:
		return "host-memory runs were not set up for this communicator"
	case k.groupDepth > 0 && !k.deferred:
		return "a call inside a group runs at the group's end"
	}
	return ""
}

// hostRunnable reports whether call k can run on host memory here (its
// group aside: such calls are deferred to the group's end).
func (c *comm) hostRunnable(k call) bool {
	return (k.hostMem || hostMemEnabled()) && (c.hub != nil || c.procs != nil)
}

// runOnHost runs the plan of d for call k on host memory, or, for a
// generic decision, the built-in path (generic.go). ran is false, with
// the reason, when k cannot run there.
func (c *comm) runOnHost(k call, d decision) (ran bool, err error, reason string) {
	if why := c.hostRefusal(k); why != "" {
		return false, nil, why
	}
	if k.recvParts != nil && (c.procs == nil || d.generic) {
		return c.runOnHostParts(k, d)
	}
	if k.sendPtr == nil || (k.recvPtr == nil && k.recvParts == nil) {
		return true, errorf(resultInvalidArgument, "%s: a NULL buffer (send %p, receive %p)", k.fn, k.sendPtr, k.recvPtr), ""
	}
	red, err := reductionOf(k, c.size)
	if err != nil {
		return true, err, ""
	}
	size := k.size(c.size)
	in, out := size, size
	switch k.coll {
	case collAllGather:
		in = size / uint64(c.size)
	case collReduceScatter:
		out = size / uint64(c.size)
	}
	send := unsafe.Slice((*byte)(k.sendPtr), in)
	var recv []byte // nil for an allgather into parts (k.recvParts)
	if k.recvParts == nil {
		recv = unsafe.Slice((*byte)(k.recvPtr), out)
	}
	sig := hostSig(k)
	if c.procs != nil {
		// One call at a time; every rank first says it has come, and
		// which call it makes.
		c.procs.mu.Lock()
		defer c.procs.mu.Unlock()
		if err := c.procs.arrive(c, sig); err != nil {
			return true, err, ""
		}
	}
	if d.generic {
		if c.procs != nil {
			return true, c.genericProcs(k, red, sig, send, recv), ""
		}
		mine := hostPart{coll: k.coll, send: send, recv: recv, d: d, red: red}
		return true, c.hub.meet(c.rank, sig, mine, c.timeout, c.stop, func(ctx context.Context, all []hostPart) error {
			return genericLocal(ctx, k.coll, k.dtype, k.count, all)
		}), ""
	}
	l := c.layoutOf(k, d)
	if d.padded() && logging() && !(c.hub != nil && c.procs == nil && d.bulkCount > 0 && red.preMul == nil) {
		logInfo("%s: plan %s runs %d elements per rank block, padded from %d (host copies through a staging buffer)", c.describe(k), d.plan, d.padCount, k.count)
	}
	if c.procs != nil {
		// Session buffers of its own: the caller's placement is
		// irrelevant to the run (decide chose the plan without it).
		key := instanceKey(d.path, l.planSize(), planDType(k.dtype), d.planInPlace, red.op)
		err = c.procs.run(c, k, d, key, sig+" with plan "+d.plan, send, recv, l, red)
		c.logHostEvictions(k, c.procs.evictions)
		return true, err, ""
	}
	mine := hostPart{coll: k.coll, send: send, recv: recv, callInPlace: k.inPlace(c.rank), d: d, red: red, dtype: k.dtype, l: l, stage: &c.hub.stages[c.rank]}
	if d.bulkCount > 0 && red.preMul == nil {
		// The bulk on the callers' buffers, the rest on the built-in
		// path: no staging copy of the whole.
		return true, c.hub.meet(c.rank, sig, mine, c.timeout, c.stop, func(ctx context.Context, all []hostPart) error {
			return c.hub.runBulk(ctx, k, all)
		}), ""
	}
	err = c.hub.meet(c.rank, sig, mine, c.timeout, c.stop, func(ctx context.Context, all []hostPart) error {
		return c.hub.runParts(ctx, l.planSize(), planDType(k.dtype), all)
	})
	c.logHostEvictions(k, c.hub.evictions)
	return true, err, ""
}

// runOnHostParts runs an allgather into one buffer per rank (k.recvParts)
// where the run writes one output buffer of the caller's (ranks as
// threads of one hub, and the built-in path): into a buffer of its own,
// each rank's block then copied to its part. A rank's multi-process
// session copies its output to the parts directly (hostProcs.run).
func (c *comm) runOnHostParts(k call, d decision) (bool, error, string) {
	parts := k.recvParts
	whole := make([]byte, k.size(c.size))
	k.recvParts = nil
	k.recvPtr = unsafe.Pointer(unsafe.SliceData(whole))
	k.recv = uintptr(k.recvPtr)
	ran, err, reason := c.runOnHost(k, d)
	if ran && err == nil {
		for j, p := range parts {
			copy(p, whole[j*len(p):])
		}
	}
	return ran, err, reason
}

// logHostEvictions tells the INFO log, after call k, how many host
// sessions are open and how many were closed to make room, when that
// count changed since the last time.
func (c *comm) logHostEvictions(k call, evictions func() (open, evicted int)) {
	if !logging() {
		return
	}
	open, evicted := evictions()
	if int64(evicted) != c.hostEvictLogged.Swap(int64(evicted)) {
		logInfo("%s: %d plan instances open on host memory, %d closed so far to make room (%s bounds them)", c.describe(k), open, evicted, maxSessionsEnv)
	}
}

// hostSig is call k as every rank must make it: its placement is each
// rank's own (NCCL's rule), and so is the plan that placement chose.
//
// An allgather into parts (mscclgoExecuteHostGather) is the same call as
// mscclgoExecuteHost's allgather into one buffer: ranks may make either.
func hostSig(k call) string {
	op := ""
	if k.op >= 0 {
		op = " " + k.opLabel()
	}
	fn := k.fn
	if fn == gatherFn {
		fn = "mscclgoExecuteHost"
	}
	return fmt.Sprintf("%s count %d %s%s", fn, k.count, dtypeName(k.dtype), op)
}

// hostPart is one rank's part of a call on a hub: its buffers, its
// placement and the plan its placement chose.
type hostPart struct {
	coll        collective
	send, recv  []byte
	callInPlace bool
	d           decision
	// red is the rank's reduction (its PREMUL_SUM scalar is its own);
	// dtype the call's type; l its layout under the plan of d.
	red   reduction
	dtype int
	l     layout
	// stage is the rank's host staging buffer (hostHub.stages), for a
	// padded or scaled call.
	stage *[]byte
}

// staged reports whether the part runs through its staging buffer under
// decision d: padded, or scaled before the plan's sum.
func (p hostPart) staged(d decision) bool { return d.padded() || p.red.preMul != nil }

// stagedBuffers lays the part out in its staging buffer for the plan of
// d (rank's layout padded to d's count), its input staged (pre-multiplied
// where the reduction says); done copies the output back and divides it
// where the reduction says.
func (p hostPart) stagedBuffers(rank int, d decision) (b executor.RankBuffers, done func()) {
	l := p.l
	l.rank = rank
	l.padded = l.count
	if d.padCount != 0 {
		l.padded = d.padCount
	}
	need := l.stageBytes(d.planInPlace)
	if uint64(len(*p.stage)) < need {
		*p.stage = make([]byte, need)
	}
	in, out := l.stageBuffers((*p.stage)[:need], d.planInPlace)
	l.stageIn(plainCopy, p.dtype, p.red, in, p.send)
	return executor.RankBuffers{Input: in, Output: out}, func() { l.stageOut(plainCopy, p.dtype, p.red, p.recv, out) }
}

// buffers are the part's buffers laid out for a plan of placement
// planInPlace: the caller's own where the placements agree; otherwise
// the input copied first (host copy), into the receive buffer
// (allreduce, allgather: an in-place plan for an out-of-place call) or
// into a staging copy (reducescatter's in-place plan, whose receive
// buffer cannot hold its input, and any out-of-place plan for an
// in-place call). done copies a staged output back, nil where there is
// none.
func (p hostPart) buffers(rank int, planInPlace bool) (b executor.RankBuffers, done func()) {
	in, out := uint64(len(p.send)), uint64(len(p.recv))
	switch {
	case p.callInPlace == planInPlace:
		return executor.RankBuffers{Input: p.send, Output: p.recv}, nil
	case p.callInPlace:
		return executor.RankBuffers{Input: slices.Clone(p.send), Output: p.recv}, nil
	}
	switch p.coll {
	case collAllGather:
		at := uint64(rank) * in
		copy(p.recv[at:at+in], p.send)
		return executor.RankBuffers{Input: p.recv[at : at+in], Output: p.recv}, nil
	case collReduceScatter:
		staged := slices.Clone(p.send)
		at := uint64(rank) * out
		return executor.RankBuffers{Input: staged, Output: staged[at : at+out]}, func() { copy(p.recv, staged[at:at+out]) }
	}
	copy(p.recv, p.send)
	return executor.RankBuffers{Input: p.recv, Output: p.recv}, nil
}

// runParts runs one call of every rank of the hub (all, by rank). Every
// rank runs one plan: the one its placement chose where all chose the
// same, otherwise rank 0's (placements that differ across ranks are
// legal in NCCL); a rank whose placement is not the plan's copies its
// input first (hostPart.buffers).
func (h *hostHub) runParts(ctx context.Context, size uint64, dt executor.ElemType, all []hostPart) error {
	d := all[0].d
	bufs := make([]executor.RankBuffers, len(all))
	var after []func()
	for r, p := range all {
		var done func()
		switch {
		case p.staged(d):
			bufs[r], done = p.stagedBuffers(r, d)
		default:
			bufs[r], done = p.buffers(r, d.planInPlace)
			if p.callInPlace != d.planInPlace && logging() {
				logInfo("rank %d of %d: plan %s is %s and the call is not: the input is copied first (host copy)", r, len(all), d.plan, placeName(d.planInPlace))
			}
			if p.red.postDiv > 0 {
				first, dt, div, recv := done, p.dtype, p.red.postDiv, p.recv
				done = func() {
					if first != nil {
						first()
					}
					divide(dt, recv, div)
				}
			}
		}
		if done != nil {
			after = append(after, done)
		}
	}
	op := all[0].red.op
	if err := h.execute(ctx, instanceKey(d.path, size, dt, d.planInPlace, op), d.path, all[0].coll, size, dt, d.planInPlace, op, bufs); err != nil {
		return err
	}
	for _, f := range after {
		f()
	}
	return nil
}

// runBulk runs an allreduce of every rank of the hub (all, by rank) whose
// count no plan takes whole: the first bulkCount elements by the plan of
// rank 0's decision, on the callers' buffers, the rest by the built-in
// path (genericLocal).
func (h *hostHub) runBulk(ctx context.Context, k call, all []hostPart) error {
	d0 := all[0].d
	es := elemSize(k.dtype)
	b := d0.bulkCount * es
	bulk, tail := make([]hostPart, len(all)), make([]hostPart, len(all))
	for r, p := range all {
		bp := p
		bp.send, bp.recv = p.send[:b], p.recv[:b]
		bp.d = decision{plan: d0.plan, path: d0.path, planInPlace: d0.bulkInPlace}
		bp.l.count, bp.l.padded = d0.bulkCount, d0.bulkCount
		bulk[r] = bp
		tp := p
		tp.send, tp.recv = p.send[b:], p.recv[b:]
		tail[r] = tp
	}
	if logging() {
		logInfo("%s: plan %s runs the first %d elements on the callers' buffers, the built-in path the last %d", hostSig(k), d0.plan, d0.bulkCount, k.count-d0.bulkCount)
	}
	if err := h.runParts(ctx, b, planDType(k.dtype), bulk); err != nil {
		return err
	}
	return genericLocal(ctx, collAllReduce, k.dtype, k.count-d0.bulkCount, tail)
}

// instanceKey names a plan instance: the plan's file laid out for one
// size, element type and placement.
func instanceKey(file string, size uint64, dt executor.ElemType, inPlace bool, op executor.ReduceOp) string {
	return fmt.Sprintf("%s|%d|%s|%v|%v", file, size, dt.Name(), inPlace, op)
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
func (h *hostHub) meet(rank int, sig string, mine hostPart, timeout time.Duration, stop <-chan struct{}, exec func(context.Context, []hostPart) error) error {
	h.mu.Lock()
	r := h.round
	if r == nil {
		r = &hostRound{sig: sig, sigs: make([]string, h.size), parts: make([]hostPart, h.size), done: make(chan struct{})}
		h.round = r
	}
	if r.sigs[rank] != "" {
		h.mu.Unlock()
		return errorf(resultInternal, "rank %d joined the call %q twice", rank, sig)
	}
	r.sigs[rank], r.parts[rank] = sig, mine
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
		err := exec(ctx, r.parts)
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

// execute runs the plan instance key (the plan in file) on every rank's
// buffers with the CPU backend, in the instance's session, opened on
// first use.
func (h *hostHub) execute(ctx context.Context, key, file string, coll collective, size uint64, dt executor.ElemType, inPlace bool, op executor.ReduceOp, bufs []executor.RankBuffers) error {
	h.run.Lock()
	defer h.run.Unlock()
	sess := h.sessions[key]
	if sess == nil {
		if old := h.lru.victim(len(h.sessions)); old != "" {
			// No run is under way: they hold h.run.
			h.sessions[old].Close()
			delete(h.sessions, old)
			h.lru.forget(old)
			h.lru.evicted++
		}
		inst, layout, err := h.plans.instantiate(file, coll, len(bufs), size, dt, inPlace, true)
		if err != nil {
			return err
		}
		if got := []uint64{uint64(len(bufs[0].Input)), uint64(len(bufs[0].Output))}; !slices.Equal(got, []uint64{layout.Sizes.Input, layout.Sizes.Output}) {
			return errorf(resultInternal, "%s: buffers of %v bytes, the plan's layout has %d and %d", file, got, layout.Sizes.Input, layout.Sizes.Output)
		}
		if sess, err = cpu.New().Open(inst, executor.Options{DType: dt, Reduce: op}); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if h.sessions == nil {
			h.sessions = map[string]executor.Session{}
		}
		h.sessions[key] = sess
	}
	h.lru.touch(key)
	if err := sess.Launch(ctx, bufs); err != nil {
		// A stopped or failed run may leave the session unusable: the
		// next call opens a new one.
		sess.Close()
		delete(h.sessions, key)
		h.lru.forget(key)
		return err
	}
	return nil
}

// run runs this rank of call k (plan instance key of d) in the
// instance's multi-process session, opened on first use: the input is
// copied into the session's buffers, the output out of them (an
// allgather into parts, k.recvParts: each rank's block into its part).
// The input is staged into the plan's layout l (padded where d says)
// and pre-multiplied, the output copied back and divided, as red says.
// The caller holds p.mu, and every rank has arrived (arrive).
func (p *hostProcs) run(c *comm, k call, d decision, key, sig string, send, recv []byte, l layout, red reduction) error {
	s := p.sessions[key]
	if s == nil {
		var err error
		if s, err = p.open(c, k, d, key, sig, l.planSize(), red.op); err != nil {
			return err
		}
	}
	p.lru.touch(key)
	b := s.Buffers()
	if uint64(len(b.Input)) != l.inBytes() || uint64(len(b.Output)) != l.outBytes() {
		return errorf(resultInternal, "%s: a layout of %d and %d bytes, the plan's has %d and %d", d.path, l.inBytes(), l.outBytes(), len(b.Input), len(b.Output))
	}
	in, out := directParts(s, k, d, l, red, c.rank, send, recv)
	if in == nil {
		l.stageIn(s.Copy, k.dtype, red, b.Input, send)
	}
	if err := s.LaunchDirect(context.Background(), in, out); err != nil {
		return fmt.Errorf("rank %d of %d: %s: %w", c.rank, c.size, sig, err)
	}
	switch {
	case k.recvParts != nil:
		l.stageOutParts(s.Copy, k.recvParts, b.Output)
	case out == nil:
		l.stageOut(s.Copy, k.dtype, red, recv, b.Output)
	case red.postDiv > 0:
		divide(k.dtype, recv, red.postDiv)
	}
	return nil
}

// directParts are the caller's send and recv as the session's input and
// output for LaunchDirect, each nil where it must be staged: where
// another rank reaches it (RankSession.Direct), where the plan's layout
// is not the call's (padded, pre-multiplied, or in place where the call
// is not), and where the bytes lie at another offset from a 64-byte
// boundary than the session's. An in-place plan takes both or neither;
// an out-of-place plan takes both only where they do not overlap.
func directParts(s *cpu.RankSession, k call, d decision, l layout, red reduction, rank int, send, recv []byte) (in, out []byte) {
	din, dout := s.Direct()
	b := s.Buffers()
	if d.padded() || l.block() != l.padBlock() || k.inPlace(rank) != d.planInPlace {
		return nil, nil
	}
	fits := func(mine, own []byte) bool {
		return len(mine) == len(own) && (len(own) == 0 || (addrOf(mine)-addrOf(own))%64 == 0)
	}
	din = din && red.preMul == nil && fits(send, b.Input)
	dout = dout && fits(recv, b.Output)
	switch {
	case d.planInPlace && !(din && dout):
		return nil, nil
	case !d.planInPlace && din && dout && overlap(send, recv):
		dout = false
	}
	if din {
		in = send
	}
	if dout {
		out = recv
	}
	return in, out
}

// addrOf is the address of b's first byte.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// overlap reports whether a and b share a byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	return addrOf(a) < addrOf(b)+uintptr(len(b)) && addrOf(b) < addrOf(a)+uintptr(len(a))
}

// open opens the session of plan instance key on every rank at once.
// The ranks first compare their calls (one exchange per new instance,
// none per call), so that mismatched calls are named on every rank.
func (p *hostProcs) open(c *comm, k call, d decision, key, sig string, size uint64, op executor.ReduceOp) (*cpu.RankSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	all, err := c.boot.AllGather(ctx, []byte(sig))
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: %s: meeting the peers: %w", c.rank, c.size, sig, err)
	}
	for r, s := range all {
		if string(s) != sig {
			return nil, errorf(resultInvalidUsage, "mismatched calls: rank %d called %s, rank %d called %s", c.rank, sig, r, s)
		}
	}
	// Every rank has met, so every earlier run has ended everywhere: the
	// least recently called session may close.
	p.lru.max = p.max
	if old := p.lru.victim(len(p.sessions)); old != "" {
		if err := p.sessions[old].Close(); err != nil && logging() {
			logInfo("rank %d of %d: closing the host session of %s to make room: %v", c.rank, c.size, old, err)
		}
		delete(p.sessions, old)
		p.lru.forget(old)
		p.lru.evicted++
	}
	dt := planDType(k.dtype)
	inst, layout, err := c.plansRun.instantiate(d.path, k.coll, c.size, size, dt, d.planInPlace, true)
	if err != nil {
		return nil, err
	}
	hosts := make([]int, c.size)
	for i, h := range c.boot.Hosts() {
		for _, r := range h.Ranks {
			hosts[r] = i
		}
	}
	w := rankwire.World{Net: c.boot, Host: hosts, Tag: hostTag + p.next}
	p.next += rankwire.TagsPerSession
	s, err := cpu.OpenRank(ctx, inst, layout, executor.Options{DType: dt, Reduce: op}, w)
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: %s: %w", c.rank, c.size, sig, err)
	}
	if p.sessions == nil {
		p.sessions = map[string]*cpu.RankSession{}
	}
	p.sessions[key] = s
	return s, nil
}
