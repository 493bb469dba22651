package cpu

import (
	"fmt"
	"sync/atomic"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// counter is one end of a memory or port channel (docs/semantics.md §4.2, §4.3): the
// inbound word is incremented by the paired end's signals, expected by
// this end's waits. Both persist across launches. The inbound word is
// accessed atomically: in a multi-process session it lives in the rank's
// shared mapping, where a peer process on the same host increments it.
type counter struct {
	in       *uint64
	expected uint64
	wl       waitList
	// Race detection: clocks[k] is the join of the clocks of this
	// launch's signals 1..k+1 (signal base+k+1 overall). Entries are
	// never written once appended, so they may be the signallers'
	// snapshots themselves. from is the thread of every signal of this
	// launch so far while single holds.
	base   uint64
	clocks []vclock
	from   int
	single bool
}

// signal adds one to c (s.mu held); snap is the signaller's clock and tid
// its thread (snap nil: a peer process's signal, which carries no clock).
// While one thread signals c, each snapshot holds every earlier one (a
// thread's clock only grows), so it is the join itself and is kept
// without a copy.
func (c *counter) signal(l *launch, snap vclock, tid int) {
	atomic.AddUint64(c.in, 1)
	if l.race != nil {
		n := len(c.clocks)
		switch {
		case snap != nil && (n == 0 || c.single && c.from == tid):
			c.clocks = append(c.clocks, snap)
			c.from, c.single = tid, true
		default:
			var nv vclock
			if n > 0 {
				nv = c.clocks[n-1].clone()
			} else {
				nv = make(vclock, l.s.ntid)
			}
			nv.join(snap)
			c.clocks = append(c.clocks, nv)
			c.single = false
		}
	}
	c.wl.wake(l)
}

// signalIdle counts a signal that arrives between launches (a peer
// process's port FLAG): nobody waits and no clock is kept.
func (c *counter) signalIdle() { atomic.AddUint64(c.in, 1) }

// inbound returns the signals received so far.
func (c *counter) inbound() uint64 { return atomic.LoadUint64(c.in) }

// semaphore is a device semaphore (docs/semantics.md §4.6): persistent, may go negative.
type semaphore struct {
	v  int64
	wl waitList
	vc vclock // join of this launch's releases (race)
}

// barrier is one of a rank's 16 device barriers: cyclic, for the
// participant count of its first arrival.
type barrier struct {
	need, arrived int
	gen           uint64
	wl            waitList
	vc            vclock   // join of this generation's arrivals (race)
	waiting       []*tbRun // this generation's parked arrivals (race)
}

// startLaunch clears the per-launch parts of the persistent objects (s.mu
// held): wait lists, and the release clocks of signals, semaphores and
// barriers, which a wait of this launch acquires only from this launch's
// releases; the threads' clocks carry over (race.go, raceCarry).
func (s *session) startLaunch(l *launch) {
	for _, rs := range s.ranks {
		for _, cs := range [][]counter{rs.mem, rs.port} {
			for i := range cs {
				cs[i].base, cs[i].clocks, cs[i].wl.ws = cs[i].inbound(), nil, nil
			}
		}
		for i := range rs.sems {
			rs.sems[i].vc, rs.sems[i].wl.ws = nil, nil
		}
		for i := range rs.barriers {
			b := &rs.barriers[i]
			b.vc, b.waiting, b.wl.ws = nil, nil, nil
		}
		p := &rs.proxy
		p.cond.L = &s.mu
		p.q, p.wl.ws, p.vc = nil, nil, nil
		if l.race != nil {
			if s.carry != nil {
				// The proxy's FIFO order carries across launches.
				p.vc = s.carry.clocks[p.tid].clone()
				p.vc[p.tid]++
			} else {
				p.vc = newClock(s.ntid, p.tid)
			}
		}
	}
}

// release returns a snapshot of t's clock for a release operation and
// advances t's own component (nil without race detection).
func (t *tbRun) release() vclock {
	if t.l.race == nil {
		return nil
	}
	snap := t.vc.clone()
	t.vc[t.tid]++
	return snap
}

func (t *tbRun) acquire(vc vclock) {
	if t.l.race != nil {
		t.vc.join(vc)
	}
}

func (s *session) channelEnd(rank int, ct plan.ChannelType, c int) (executor.ChannelEnd, *counter) {
	rs := s.ranks[rank]
	if ct == plan.Port {
		return rs.ri.PortChannels[c], &rs.port[c]
	}
	return rs.ri.MemoryChannels[c], &rs.mem[c]
}

// signal: memory channels add to the paired end's inbound at once; port
// channels push a FLAG trigger that the proxy applies after every earlier
// trigger (docs/semantics.md §4.3). A signal on an unpaired channel is lost. Switch channels
// do nothing (docs/semantics.md §2.5).
func (t *tbRun) signal(op *executor.OpInstance) error {
	if op.ChannelType == plan.Switch {
		return nil
	}
	s := t.l.s
	snap := t.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range op.Channels {
		if op.ChannelType == plan.Port {
			t.push(&trigger{kind: trigFlag, ch: c, vc: snap, from: t, op: opName(op)})
			continue
		}
		end, _ := s.channelEnd(t.r.id, plan.Memory, c)
		if end.PeerIndex >= 0 {
			_, peer := s.channelEnd(end.Peer, plan.Memory, end.PeerIndex)
			s.rec.signal(t, peer)
			peer.signal(t.l, snap, t.tid)
			if s.isRemote(end.Peer) {
				s.mp.ringBell(end.Peer)
			}
		}
	}
	return nil
}

// wait: e = ++expected, then park until inbound >= e; the k-th wait
// acquires the clocks of signals 1..k. One thread per channel does this on
// the device, so every channel's expected count is taken before any wait.
func (t *tbRun) wait(op *executor.OpInstance) error {
	if op.ChannelType == plan.Switch {
		return nil
	}
	s := t.l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	es := make([]uint64, len(op.Channels))
	for i, ci := range op.Channels {
		_, c := s.channelEnd(t.r.id, op.ChannelType, ci)
		c.expected++
		es[i] = c.expected
	}
	for i, ci := range op.Channels {
		end, c := s.channelEnd(t.r.id, op.ChannelType, ci)
		e := es[i]
		err := t.park(&c.wl, func() bool { return c.inbound() >= e }, func() string {
			if end.PeerIndex < 0 {
				return fmt.Sprintf("unpaired channel: rank %d declares no channel to rank %d paired with %s channel %d",
					end.Peer, t.r.id, op.ChannelType, ci)
			}
			return fmt.Sprintf("%s channel %d from rank %d expects signal %d, has %d", op.ChannelType, ci, end.Peer, e, c.inbound())
		})
		if err != nil {
			return err
		}
		s.rec.wait(t, c, e)
		if t.l.race != nil && e > c.base {
			t.acquire(c.clocks[e-c.base-1])
		}
	}
	return nil
}

// flush pushes a SYNC trigger per port channel and waits for it: every
// earlier transfer of the rank is then complete (Q1: the intended flush).
// Memory and switch channels have nothing to flush.
func (t *tbRun) flush(op *executor.OpInstance) error {
	if op.ChannelType != plan.Port {
		return nil
	}
	s := t.l.s
	snap := t.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	var trs []*trigger
	for _, c := range op.Channels {
		tr := &trigger{kind: trigSync, ch: c, vc: snap, from: t, op: opName(op)}
		t.push(tr)
		trs = append(trs, tr)
	}
	for _, tr := range trs {
		if err := t.awaitTrigger(tr); err != nil {
			return err
		}
	}
	return nil
}

// semAcquire: old = v; v--; if old <= 0, park until v >= old (docs/semantics.md §2.6). One
// thread per semaphore does this on the device, so every decrement comes
// before any wait.
func (t *tbRun) semAcquire(op *executor.OpInstance) error {
	s := t.l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	olds := make([]int64, len(op.Semaphores))
	for i, id := range op.Semaphores {
		sem := &t.r.sems[id]
		olds[i] = sem.v
		sem.v--
	}
	for i, id := range op.Semaphores {
		sem, old := &t.r.sems[id], olds[i]
		if old <= 0 {
			err := t.park(&sem.wl, func() bool { return sem.v >= old }, func() string {
				return fmt.Sprintf("semaphore %d value %d, waits for %d", id, sem.v, old)
			})
			if err != nil {
				return err
			}
		}
		s.rec.semAcquire(t, sem)
		t.acquire(sem.vc)
	}
	return nil
}

func (t *tbRun) semRelease(op *executor.OpInstance) error {
	s := t.l.s
	snap := t.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range op.Semaphores {
		sem := &t.r.sems[id]
		sem.v++
		s.rec.semRelease(t, sem)
		if snap != nil {
			if sem.vc == nil {
				sem.vc = make(vclock, s.ntid)
			}
			sem.vc.join(snap)
		}
		sem.wl.wake(t.l)
	}
	return nil
}

// barrier: with N > 1 participants, park until N thread blocks of the
// rank have arrived at barrier_id; the participants' clocks are joined.
func (t *tbRun) barrier(op *executor.OpInstance) error {
	n := op.NumThreadBlocks
	if n <= 1 {
		return nil
	}
	s := t.l.s
	snap := t.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &t.r.barriers[op.BarrierID]
	if b.arrived == 0 {
		b.need = n
	} else if b.need != n {
		return fmt.Errorf("barrier %d: %d thread blocks expected by this op, %d by the thread blocks already waiting", op.BarrierID, n, b.need)
	}
	b.arrived++
	s.rec.arrive(t, b)
	if snap != nil {
		if b.vc == nil {
			b.vc = make(vclock, s.ntid)
		}
		b.vc.join(snap)
	}
	if b.arrived == b.need {
		b.arrived = 0
		b.gen++
		s.rec.barrierDone(t, b, b.gen-1)
		for _, w := range b.waiting {
			w.inbox = b.vc
		}
		t.acquire(b.vc)
		b.vc, b.waiting = nil, nil
		b.wl.wake(t.l)
		return nil
	}
	gen := b.gen
	if t.l.race != nil {
		b.waiting = append(b.waiting, t)
	}
	err := t.park(&b.wl, func() bool { return b.gen != gen }, func() string {
		return fmt.Sprintf("barrier %d: %d of %d thread blocks arrived", op.BarrierID, b.arrived, b.need)
	})
	if err == nil {
		s.rec.barrierDone(t, b, gen)
	}
	if err == nil && t.inbox != nil {
		t.acquire(t.inbox)
		t.inbox = nil
	}
	return err
}
