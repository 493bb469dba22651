package cpu

import (
	"context"
	"fmt"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Trigger kinds (docs/semantics.md §4.3), OR-able.
const (
	trigData = 1 << iota
	trigFlag
	trigSync
)

// trigger is one FIFO entry of a rank's port proxy.
type trigger struct {
	kind     uint8
	src, dst span // DATA
	packets  bool // DATA moves LL packets: copy words atomically
	ch       int  // global port channel of the pushing rank (FLAG)
	pos      uint64
	vc       vclock // the pusher's clock (race)
	doneVC   vclock // the proxy's clock once complete (race)
	from     *tbRun
	op       string
	opi      *executor.OpInstance // the op that pushed a DATA trigger
}

// proxy is a rank's port-channel FIFO (one per rank, shared by its thread
// blocks and channels) and its proxy's position. Its goroutine runs per
// launch; the positions persist.
type proxy struct {
	q            []*trigger
	pushed, done uint64
	cond         sync.Cond // the proxy goroutine waits here for triggers (L = s.mu)
	wl           waitList  // thread blocks waiting for completions
	tid          int
	vc           vclock
}

// push appends tr to t's rank FIFO (s.mu held).
func (t *tbRun) push(tr *trigger) {
	p := &t.r.proxy
	tr.pos = p.pushed
	p.pushed++
	p.q = append(p.q, tr)
	t.l.s.rec.push(t, tr)
	t.l.proxyBusy++
	p.cond.Signal()
}

// awaitTrigger parks t until the proxy completed tr (s.mu held).
func (t *tbRun) awaitTrigger(tr *trigger) error {
	p := &t.r.proxy
	err := t.park(&p.wl, func() bool { return p.done > tr.pos }, func() string {
		return fmt.Sprintf("proxy of rank %d completed %d triggers, waits for trigger %d", t.r.id, p.done, tr.pos+1)
	})
	if err == nil {
		t.l.s.rec.awaitTrigger(t, tr)
		t.acquire(tr.doneVC)
	}
	return err
}

// portPut pushes one trigger per destination: DATA, with FLAG for pws and
// pwsf and SYNC for pwsf, on channel op.Channels[i]; pwsf then waits for
// its triggers' completion (docs/semantics.md §2.6).
func (t *tbRun) portPut(op *executor.OpInstance, src, dst []span, packets bool) error {
	kind := uint8(trigData)
	if op.Type.Signals() { // a put with a signal
		kind |= trigFlag
	}
	if op.Type == plan.OpPutWithSignalAndFlush {
		kind |= trigSync
	}
	s := t.l.s
	snap := t.release()
	name := opName(op)
	s.mu.Lock()
	defer s.mu.Unlock()
	var trs []*trigger
	for i := range dst {
		tr := &trigger{kind: kind, src: src[i], dst: dst[i], packets: packets, ch: op.Channels[i], vc: snap, from: t, op: name, opi: op}
		t.push(tr)
		trs = append(trs, tr)
	}
	if kind&trigSync != 0 {
		for _, tr := range trs {
			if err := t.awaitTrigger(tr); err != nil {
				return err
			}
		}
	}
	return nil
}

// proxyMain serves a rank's FIFO in push order until every thread block
// finished and the FIFO is empty, or the launch stops. DATA copies happen
// at processing time; FLAG adds to the peer's inbound after them; SYNC
// completes when everything before it did (they are processed in order).
func (l *launch) proxyMain(rs *rankState, wg *sync.WaitGroup) {
	defer wg.Done()
	s := l.s
	p := &rs.proxy
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(p.q) == 0 && !l.tbsDone && l.err == nil {
			p.cond.Wait()
		}
		if l.err != nil {
			return
		}
		if len(p.q) == 0 {
			if s.mp != nil {
				// The launch ends when the peers have applied everything.
				if err := l.remote(func(ctx context.Context) error { return s.mp.send.Fence(ctx) }); err != nil {
					l.abort(fmt.Errorf("cpu: rank %d proxy: end of launch: %w", rs.id, err))
				}
			}
			return
		}
		tr := p.q[0]
		p.q[0] = nil
		p.q = p.q[1:]
		s.rec.proxyTake(rs.id, tr)
		// A put with its signal to the same other process, with no
		// flush between, goes as one transfer (SendDataFlag: one write
		// over a fabric, the two messages over the TCP wire).
		fused := -1
		if tr.kind&(trigData|trigFlag|trigSync) == trigData|trigFlag && s.isRemote(tr.dst.rank) {
			if end, _ := s.channelEnd(rs.id, plan.Port, tr.ch); end.PeerIndex >= 0 && end.Peer == tr.dst.rank {
				fused = end.PeerIndex
			}
		}
		if tr.kind&trigData != 0 {
			if s.isRemote(tr.dst.rank) {
				if err := l.remote(func(ctx context.Context) error { return l.sendData(tr, fused) }); err != nil {
					l.abort(fmt.Errorf("cpu: rank %d proxy: %s: put to rank %d: %w", rs.id, tr.op, tr.dst.rank, err))
					return
				}
			} else {
				s.mu.Unlock()
				l.transfer(p, tr)
				s.mu.Lock()
			}
		}
		if tr.kind&trigSync != 0 && s.mp != nil {
			if err := l.remote(func(ctx context.Context) error { return s.mp.send.Fence(ctx) }); err != nil {
				l.abort(fmt.Errorf("cpu: rank %d proxy: %s: flush: %w", rs.id, tr.op, err))
				return
			}
		}
		var snap vclock
		if l.race != nil {
			p.vc.join(tr.vc)
			snap = p.vc.clone()
			p.vc[p.tid]++
			tr.doneVC = snap
		}
		if tr.kind&trigFlag != 0 {
			end, _ := s.channelEnd(rs.id, plan.Port, tr.ch)
			if end.PeerIndex >= 0 && s.isRemote(end.Peer) {
				if fused < 0 { // else it went with the DATA
					if err := l.remote(func(ctx context.Context) error { return s.mp.send.SendFlag(ctx, end.Peer, end.PeerIndex) }); err != nil {
						l.abort(fmt.Errorf("cpu: rank %d proxy: %s: signal to rank %d: %w", rs.id, tr.op, end.Peer, err))
						return
					}
				}
			} else if end.PeerIndex >= 0 {
				_, peer := s.channelEnd(end.Peer, plan.Port, end.PeerIndex)
				s.rec.proxySignal(tr, peer)
				peer.signal(l, snap, p.tid)
			}
		}
		p.done++
		p.wl.wake(l)
		l.proxyBusy--
		l.progress.Add(1)
		l.checkDeadlock()
	}
}

// remote runs f, a network operation of the proxy, without s.mu (held on
// entry and on return), within the session's life.
func (l *launch) remote(f func(ctx context.Context) error) error {
	l.s.mu.Unlock()
	defer l.s.mu.Lock()
	return f(l.ctx)
}

// sendData sends a DATA trigger to another process, holding its source
// range against conflicting local ops as transfer does; with the FLAG of
// the peer's port channel flag where that is not -1.
func (l *launch) sendData(tr *trigger, flag int) error {
	h := &rangeHold{}
	h.add(false, tr.src)
	l.ranges.acquire(h)
	defer l.ranges.release(h)
	if flag >= 0 {
		return l.s.mp.send.SendDataFlag(l.ctx, tr.dst.rank, tr.dst.bt, tr.dst.off, tr.packets, tr.src.b, flag)
	}
	return l.s.mp.send.SendData(l.ctx, tr.dst.rank, tr.dst.bt, tr.dst.off, tr.packets, tr.src.b)
}

// transfer performs a DATA trigger (without s.mu), as one step.
func (l *launch) transfer(p *proxy, tr *trigger) {
	l.s.rec.proxyPackets(tr)
	if rs := l.race; rs != nil {
		rs.mu.Lock()
		p.vc.join(tr.vc)
		a := &actor{tid: p.tid, vc: p.vc, rank: tr.from.r.id, tb: tr.from.tb.ID, op: tr.op + " (proxy)", instr: tr.opi, proxy: true}
		rs.access(a, tr.src, false, false, nil)
		var snap vclock
		if tr.packets {
			snap = p.vc.clone()
		}
		if !tr.packets || !sameWords(words(tr.dst.b), words(tr.src.b)) {
			rs.access(a, tr.dst, true, false, snap)
		}
		if tr.packets {
			p.vc[p.tid]++
		}
		l.copyData(tr)
		rs.mu.Unlock()
	} else {
		h := &rangeHold{}
		h.add(false, tr.src)
		h.add(true, tr.dst)
		l.ranges.acquire(h)
		l.copyData(tr)
		l.ranges.release(h)
	}
	if tr.packets {
		l.notify(tr.dst)
	}
}

func (l *launch) copyData(tr *trigger) {
	defer l.s.prov.transfer(tr)
	if tr.packets {
		copyWords(words(tr.dst.b), words(tr.src.b))
		return
	}
	copy(tr.dst.b, tr.src.b)
}
