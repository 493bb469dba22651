package cpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// errStop unwinds a thread block or proxy goroutine once its launch has
// stopped (deadlock, cancellation, another goroutine's error); the
// launch's own error says why.
var errStop = errors.New("cpu: launch stopped")

// launch is one execute() of a session on every rank.
type launch struct {
	s    *session
	flag uint32      // LL flag (docs/semantics.md §3.2)
	so   uint64      // scratch offset of the double-buffer half (docs/semantics.md §3.4)
	bufs [][3][]byte // per rank: input, output, scratch
	tbs  []*tbRun    // every thread block, by rank then TB
	pkt  [][3]pktWait

	// The monitor's bookkeeping, guarded by s.mu.
	running   int  // TB goroutines not finished
	blocked   int  // TB goroutines parked
	proxyBusy int  // triggers pushed and not yet completed
	tbsDone   bool // every TB finished: proxies drain and exit
	err       error

	stop     atomic.Bool   // set with err: running goroutines unwind
	progress atomic.Uint64 // bumped by every op, block, wake-up and trigger

	race   *raceState  // nil unless Options.Race
	ranges *rangeLocks // without race detection

	// operands resolves the operands of the ops of each rank that runs
	// here against bufs (nil for the others).
	operands []*executor.RankOperands

	// ctx ends when the launch stops (multi-process: bounds the proxy's
	// network operations); cancel is called by abort.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// pktWait are the thread blocks waiting for packets of one buffer. n is
// read without the monitor by packet writers: they take the monitor to
// wake readers only when someone waits (see awaitPackets for the
// ordering argument).
type pktWait struct {
	n  atomic.Int32
	wl waitList
}

// tbRun is the goroutine state of one thread block in one launch.
type tbRun struct {
	l   *launch
	r   *rankState
	tb  *executor.TBInstance
	tid int

	// Guarded by s.mu.
	cond     sync.Cond
	parked   bool
	finished bool
	why      func() string               // what a parked TB waits for
	pkt      func() *executor.PacketWait // the packet slot it waits on, if any
	ready    func() bool                 // the condition a parked TB waits for

	// The current op and its pipeline iteration (-1 outside pipelines):
	// atomic, as the watchdog reads them while the TB runs.
	op   atomic.Pointer[executor.OpInstance]
	iter atomic.Int64

	bufs *tbBufs // block buffers of reductions and packets (the session's)
	rng  *rand.Rand

	// Race detection; touched only by the TB's own goroutine, except inbox
	// (written by a barrier's last arrival under s.mu before the wake-up).
	vc    vclock
	inbox vclock
}

// waitList is a set of parked thread blocks waiting for one object.
type waitList struct {
	ws []*tbRun
}

func (w *waitList) add(t *tbRun) { w.ws = append(w.ws, t) }

// wake makes every waiter runnable again (s.mu held). The waker, not the
// waiter, takes the waiter off the blocked count, so that the monitor never
// sees "all blocked" while a woken thread block is about to run.
func (w *waitList) wake(l *launch) {
	if len(w.ws) == 0 {
		return
	}
	for _, t := range w.ws {
		t.unpark()
	}
	clear(w.ws)
	w.ws = w.ws[:0]
	l.progress.Add(1)
}

func (t *tbRun) unpark() {
	if t.parked {
		t.parked = false
		t.l.blocked--
		t.cond.Signal()
	}
}

// park blocks t until ready() holds (both with s.mu held), re-evaluating it
// after every wake-up, and returns errStop if the launch stops first. why
// describes the wait for deadlock reports.
func (t *tbRun) park(wl *waitList, ready func() bool, why func() string) error {
	return t.parkOn(wl, ready, why, nil)
}

// parkOn is park for a wait that pkt, when not nil, describes as a packet
// slot for the deadlock report.
func (t *tbRun) parkOn(wl *waitList, ready func() bool, why func() string, pkt func() *executor.PacketWait) error {
	l := t.l
	for {
		if l.err != nil {
			return errStop
		}
		if ready() {
			return nil
		}
		wl.add(t)
		t.why, t.pkt, t.ready = why, pkt, ready
		t.parked = true
		l.blocked++
		l.checkDeadlock()
		for t.parked {
			t.cond.Wait()
		}
	}
}

// checkDeadlock stops the launch when every unfinished thread block is
// parked and no proxy has work left (s.mu held).
func (l *launch) checkDeadlock() {
	if l.s.mp != nil {
		// Another process may still release a parked thread block:
		// watch.go decides, over the whole job.
		return
	}
	if l.err == nil && l.running > 0 && l.blocked == l.running && l.proxyBusy == 0 {
		l.abort(l.deadlock(""))
	}
}

// deadlock describes every unfinished thread block (s.mu held). A running
// one (only possible from the watchdog) is described by stalled.
func (l *launch) deadlock(stalled string) *executor.DeadlockError {
	e := &executor.DeadlockError{}
	for _, t := range l.tbs {
		if t.finished {
			continue
		}
		b := executor.BlockedTB{Rank: t.r.id, TB: t.tb.ID, Op: "start"}
		if op := t.op.Load(); op != nil {
			b.Op = opName(op)
		}
		switch {
		case t.parked && t.why != nil:
			b.Waiting = t.why()
			if t.pkt != nil {
				b.Packet = t.pkt()
			}
		case stalled != "":
			b.Waiting = stalled
		default:
			continue
		}
		if it := t.iter.Load(); it >= 0 {
			b.Waiting += fmt.Sprintf(" (pipeline iteration %d)", it)
		}
		e.Blocked = append(e.Blocked, b)
	}
	return e
}

// abort stops the launch with err unless it already stopped (s.mu held):
// every parked goroutine wakes up and unwinds.
func (l *launch) abort(err error) {
	if l.err == nil {
		l.err = err
	}
	l.stop.Store(true)
	if l.cancel != nil {
		l.cancel(l.err)
	}
	if l.s.mp != nil {
		l.s.mp.ringSelf()
	}
	for _, t := range l.tbs {
		t.unpark()
	}
	for _, rs := range l.s.ranks {
		rs.proxy.cond.Broadcast()
	}
}

func newLaunch(s *session, bufs []executor.RankBuffers, flag uint32) *launch {
	l := &launch{s: s, flag: flag}
	if s.double && flag%2 == 0 {
		l.so = s.half
	}
	l.bufs = make([][3][]byte, len(s.ranks))
	l.pkt = make([][3]pktWait, len(s.ranks))
	if s.opts.Race {
		l.race = newRaceState(s.launches)
	} else {
		l.ranges = newRangeLocks()
	}
	for r, rs := range s.ranks {
		if s.mp != nil {
			l.bufs[r] = s.mp.bufs[r]
			if r != s.mp.rank {
				continue
			}
			if bufs != nil {
				// RankSession.LaunchDirect: the caller's own input or
				// output, which no other rank reaches.
				if b := bufs[r].Input; b != nil {
					l.bufs[r][plan.Input] = b
				}
				if b := bufs[r].Output; b != nil {
					l.bufs[r][plan.Output] = b
				}
			}
		} else {
			l.bufs[r] = [3][]byte{bufs[r].Input, bufs[r].Output, rs.scratch}
		}
		var joined vclock // the rank's clock at the end of the last launch
		if l.race != nil && s.carry != nil {
			joined = s.carry.rankClock(rs, s.ntid)
		}
		for i := range rs.ri.TBs {
			t := &tbRun{l: l, r: rs, tb: &rs.ri.TBs[i], tid: rs.tid0 + i, bufs: &s.bufs[rs.tid0+i]}
			t.iter.Store(-1)
			t.cond.L = &s.mu
			if s.sched.yield {
				t.rng = rand.New(rand.NewPCG(uint64(s.sched.seed), uint64(t.tid)))
			}
			if l.race != nil {
				if s.carry != nil {
					// Launch k+1 of a rank follows the rank's launch k, and
					// nothing else (race.go).
					t.vc = joined.clone()
					t.vc[t.tid]++
				} else {
					t.vc = newClock(s.ntid, t.tid)
				}
			}
			l.tbs = append(l.tbs, t)
		}
	}
	if l.race != nil && s.carry != nil {
		s.carry.adopt(l.race, l.bufs)
	}
	ops := s.prep.Operands(executor.LaunchView{Bufs: l.bufs, Upper: l.so != 0})
	l.operands = make([]*executor.RankOperands, len(s.ranks))
	for r := range s.ranks {
		if s.mp == nil || r == s.mp.rank {
			l.operands[r] = ops.Rank(r)
		}
	}
	return l
}

// precheck checks every operand of this launch's thread blocks against
// its buffers (executor.CheckOperands), so that a buffer that is too
// small fails the launch before anything runs (and leaves the session
// usable).
func (l *launch) precheck() error {
	v := executor.LaunchView{Bufs: l.bufs, Upper: l.so != 0}
	if l.s.mp != nil {
		v.Ranks = []int{l.s.mp.rank}
	}
	if err := l.s.prep.CheckOperands(v); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	return nil
}

// opName is the report name of an op: its path and plan name, "op 7 wait".
func opName(op *executor.OpInstance) string { return op.Describe() }

func (t *tbRun) opError(op *executor.OpInstance, iter int, err error) error {
	it := ""
	if iter >= 0 {
		it = fmt.Sprintf(" (pipeline iteration %d)", iter)
	}
	return fmt.Errorf("cpu: rank %d tb %d %s%s: %w", t.r.id, t.tb.ID, opName(op), it, err)
}

// run starts every goroutine, waits for all of them and returns the
// launch's result.
func (l *launch) run(ctx context.Context) error {
	s := l.s
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	defer l.cancel(nil)
	s.mu.Lock()
	l.running = len(l.tbs)
	l.tbsDone = l.running == 0
	s.startLaunch(l)
	s.cur = l
	if s.mp != nil {
		s.mp.launches++
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
	}()

	var wg sync.WaitGroup
	for _, rs := range s.ranks {
		if s.isRemote(rs.id) {
			continue
		}
		wg.Add(1)
		go l.proxyMain(rs, &wg)
	}
	for _, t := range l.tbs {
		wg.Add(1)
		go t.main(&wg)
	}
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	if s.mp == nil {
		go l.watchdog(stopWatch, watchDone)
	} else {
		// Across processes the job-wide watch (watch.go) replaces the
		// watchdog; the poller sees what same-host peers change.
		go l.poll(stopWatch, watchDone)
	}
	ctxDone := make(chan struct{})
	stopCtx := context.AfterFunc(ctx, func() {
		defer close(ctxDone)
		s.mu.Lock()
		l.abort(fmt.Errorf("cpu: launch canceled: %w", context.Cause(ctx)))
		s.mu.Unlock()
	})

	wg.Wait()
	s.mu.Lock()
	err := l.err
	s.mu.Unlock()
	if !stopCtx() && ctx.Err() != nil {
		<-ctxDone
	}
	close(stopWatch)
	<-watchDone
	if err != nil {
		return err
	}
	if l.race != nil {
		return l.race.result()
	}
	return nil
}

// main is the goroutine of one thread block.
func (t *tbRun) main(wg *sync.WaitGroup) {
	defer wg.Done()
	err := t.runOps()
	l, s := t.l, t.l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && !errors.Is(err, errStop) {
		l.abort(err)
	}
	t.finished = true
	l.running--
	if l.running == 0 {
		l.tbsDone = true
		if s.mp != nil {
			s.mp.ringSelf()
		}
		for _, rs := range s.ranks {
			rs.proxy.cond.Broadcast()
		}
		return
	}
	l.checkDeadlock()
}

func (t *tbRun) runOps() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cpu: rank %d tb %d: internal error: %v", t.r.id, t.tb.ID, p)
		}
	}()
	for i := range t.tb.Ops {
		op := &t.tb.Ops[i]
		if op.Type == plan.OpPipeline {
			for it := 0; it < op.Iterations; it++ {
				o := uint64(it) * op.UnitSize
				for j := range op.Body {
					if err := t.exec(&op.Body[j], o, op.UnitSize, it); err != nil {
						return err
					}
				}
			}
			continue
		}
		if err := t.exec(op, 0, noUnit, -1); err != nil {
			return err
		}
	}
	return nil
}

// exec runs one op at pipeline offset o with unit u (0 and noUnit outside
// pipelines).
func (t *tbRun) exec(op *executor.OpInstance, o, u uint64, iter int) error {
	l := t.l
	if l.stop.Load() {
		return errStop
	}
	l.progress.Add(1)
	t.op.Store(op)
	t.iter.Store(int64(iter))
	l.s.rec.begin(t, op, iter)
	if t.rng != nil {
		switch t.rng.IntN(4) {
		case 0:
			runtime.Gosched()
		case 1:
			time.Sleep(time.Duration(t.rng.IntN(50)) * time.Microsecond)
		}
	}
	var err error
	switch ty := op.Type; {
	case ty == plan.OpNop:
	case ty == plan.OpBarrier:
		err = t.barrier(op)
	case ty.IsDataSync() && ty.Signals():
		err = t.signal(op)
	case ty.Waits():
		err = t.wait(op)
	case ty == plan.OpFlush:
		err = t.flush(op)
	case ty == plan.OpSemAcquire:
		err = t.semAcquire(op)
	case ty == plan.OpSemRelease:
		err = t.semRelease(op)
	default:
		err = t.data(op, o, u)
	}
	l.s.rec.end(t)
	if err != nil && !errors.Is(err, errStop) {
		return t.opError(op, iter, err)
	}
	return err
}

// watchdog is the backstop of deadlock detection: if no goroutine makes
// progress for the deadlock timeout, the launch stops with a
// DeadlockError describing every unfinished thread block.
func (l *launch) watchdog(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	timeout := l.s.timeout
	tick := timeout / 8
	if tick < time.Millisecond {
		tick = time.Millisecond
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last, since := l.progress.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tk.C:
			if p := l.progress.Load(); p != last {
				last, since = p, now
				continue
			}
			if now.Sub(since) < timeout {
				continue
			}
			l.s.mu.Lock()
			if l.err == nil && !l.tbsDone {
				l.abort(l.deadlock(fmt.Sprintf("no progress for %v", timeout)))
			}
			l.s.mu.Unlock()
			return
		}
	}
}
