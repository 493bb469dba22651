// This file holds the liveness service: the readers of the control links
// (rank 0 <-> every rank), the heartbeats, and how a loss or a goodbye is
// recorded, relayed by rank 0 to every other rank, and turned into errors.

package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// readCtrl reads a control link until it ends: heartbeats, goodbyes,
// collective traffic, and (on ranks other than 0) loss and failure
// notices from rank 0.
func (b *Bootstrap) readCtrl(l *link) {
	defer close(l.done)
	max := uint64(b.opts.MaxMessage)
	for {
		h, p, err := readFrame(l.r, max)
		if err != nil {
			b.linkFailed(l, err)
			return
		}
		root := b.rank == 0
		switch {
		case h.kind == kindPing:
		case h.kind == kindBye:
			l.byeIn.Store(true)
			b.markDeparted(l.peer, true)
			l.shutWrite(false)
		case root && (h.kind == kindGather || h.kind == kindBarrier):
			b.contribute(l.peer, h, p)
		case root && h.kind == kindFail:
			b.abandoned(l.peer, h.tag, string(p))
		case !root && h.kind == kindGatherPart:
			b.deliverPart(h, p)
		case !root && h.kind == kindRelease:
			b.deliverRelease(h)
		case !root && h.kind == kindLost:
			if r := int(h.arg); r < b.size && r != b.rank {
				b.markLost(r, string(p)+" (seen by rank 0)", true)
			}
		case !root && h.kind == kindFail:
			b.failCollectives(string(p), -1)
		default:
			b.linkFailed(l, fmt.Errorf("%w: unexpected %s frame", ErrBadFrame, h.kind))
			l.kill()
			return
		}
	}
}

// heartbeat pings the peer of a control link every HeartbeatInterval
// until the link or the Bootstrap closes.
func (b *Bootstrap) heartbeat(l *link) {
	t := time.NewTicker(b.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-l.done:
			return
		case <-t.C:
			if err := b.sendCtrl(l, header{kind: kindPing}, nil); err != nil {
				return
			}
		}
	}
}

// sendCtrl writes a frame on a control link. A failed write (the peer
// did not take it within HeartbeatTimeout, or the connection broke)
// makes the peer lost.
func (b *Bootstrap) sendCtrl(l *link, h header, p []byte) error {
	err := l.send(h, p)
	if err != nil && !errors.Is(err, errWriteClosed) {
		b.linkFailed(l, err)
		l.kill()
	}
	return err
}

// linkFailed handles the end of a link without a goodbye: unless this
// side closed it, or this Bootstrap is closing, the peer is lost.
func (b *Bootstrap) linkFailed(l *link, err error) {
	if l.dead.Load() || l.byeIn.Load() {
		l.conn.Close()
		return
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if !closed {
		b.markLost(l.peer, lossReason(err, l.idle), l.idle > 0)
	}
	l.conn.Close()
}

// lossReason says in words how a link failed.
func lossReason(err error, idle time.Duration) string {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without a goodbye"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "connection closed (broken pipe)"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("no progress for %s (heartbeat timeout)", idle)
	}
	return "connection failed: " + shortNetErr(err).Error()
}

// markLost records that rank p is lost: Lost() and Context() learn it,
// its links are closed so that operations blocked on them fail, and rank
// 0 tells every other rank, before anything on rank 0 learns it, so that
// rank 0 cannot act on the loss (exit, say) before it has told them. ctrl
// says the news came on the control plane (a control link, or rank 0's
// notice), which also fails collectives on ranks other than 0; rank 0's
// collectives always fail on a loss.
func (b *Bootstrap) markLost(p int, reason string, ctrl bool) {
	b.mu.Lock()
	if ctrl && !b.closed && (b.lost[p] != nil || b.departed[p]) {
		// Seen on a data link first (a loss, or a goodbye of a rank that
		// then died before saying it to rank 0); the control plane now
		// says the rank is gone, so collectives cannot complete.
		var e error = &PeerLostError{Rank: p, Reason: reason}
		if b.lost[p] != nil {
			e = b.lost[p]
		}
		b.setCollErrLocked(e)
		b.notifyLocked()
	}
	if b.closed || b.noticed[p] || b.departed[p] {
		b.mu.Unlock()
		return
	}
	b.noticed[p] = true
	e := &PeerLostError{Rank: p, Reason: reason}
	if ctrl || b.rank == 0 {
		// Set now, so that this loss is the failure collectives report
		// (not a goodbye that a rank says after hearing of it); rank 0's
		// collectives do not report it while telling > 0.
		b.setCollErrLocked(e)
	}
	var tell []*link
	if b.rank == 0 {
		b.telling++
		for r, l := range b.ctrl {
			if l != nil && r != p && !b.noticed[r] && !b.departed[r] {
				tell = append(tell, l)
			}
		}
	}
	b.mu.Unlock()
	b.tell(tell, header{kind: kindLost, arg: uint32(p)}, []byte(reason))

	b.mu.Lock()
	if b.rank == 0 {
		b.telling--
	}
	if b.closed {
		b.notifyLocked()
		b.mu.Unlock()
		return
	}
	b.lost[p] = e
	b.lostCh <- LostRank{Rank: p, Reason: reason} // capacity Size: never blocks
	b.cancel(e)
	var kill []*link
	for _, l := range []*link{b.in[p], b.out[p].l, b.ctrl[p]} {
		if l != nil {
			kill = append(kill, l)
		}
	}
	b.notifyLocked()
	b.mu.Unlock()
	for _, l := range kill {
		l.kill()
	}
}

// tell sends one frame on several control links in parallel and returns
// once every write is done (or failed, which makes that peer lost).
func (b *Bootstrap) tell(links []*link, h header, p []byte) {
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.sendCtrl(l, h, p)
		}()
	}
	wg.Wait()
}

// markDeparted records that rank p said goodbye on one of its links. ctrl
// says it was its control link, which also fails collectives on ranks
// other than 0 (on rank 0 any goodbye does).
func (b *Bootstrap) markDeparted(p int, ctrl bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lost[p] == nil {
		if !b.departed[p] {
			b.departed[p] = true
			b.departedAt[p] = time.Now()
		}
		if ctrl || b.rank == 0 {
			b.setCollErrLocked(&PeerClosedError{Rank: p})
		}
		if ctrl && b.rank == 0 {
			// A contribution not consumed yet is of a collective that
			// failed on p when it closed: it no longer counts.
			b.contrib[p] = nil
		}
	}
	b.notifyLocked()
}
