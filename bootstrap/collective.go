// This file holds the collectives, AllGather and Barrier: every rank sends
// its contribution to rank 0 on its control link, rank 0 checks that all
// called the same collective and sends the result back.

package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// collMsg is a contribution queued at rank 0.
type collMsg struct {
	kind    kind
	seq     uint32
	payload []byte
}

// collResult is the result a rank other than 0 is collecting.
type collResult struct {
	kind     kind
	seq      uint32
	parts    [][]byte // allgather: per rank; this rank's own is set at the start
	got      int      // parts received
	released bool     // barrier
}

// complete reports whether every part (or the release) has arrived.
func (r *collResult) complete(size int) bool {
	if r.kind == kindBarrier {
		return r.released
	}
	return r.got == size-1
}

// AllGather sends data to every rank and returns every rank's data,
// indexed by rank (this rank's own is a copy). Every rank must call it
// (collectives are matched by their order of call, one at a time). It
// fails when a rank is lost or closed, when ranks called different
// collectives, or when a rank gave up waiting: a rank whose context ends
// asks rank 0 to fail the collective, and every rank gets the same
// outcome (the result, if rank 0 had completed it already). Once a
// collective has failed, every later one fails on every rank. Only a
// loss can make a collective complete on some ranks (those rank 0 had
// answered) and fail on others.
func (b *Bootstrap) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	return b.collective(ctx, kindGather, data)
}

// Barrier returns once every rank has called Barrier. It fails as
// AllGather does.
func (b *Bootstrap) Barrier(ctx context.Context) error {
	_, err := b.collective(ctx, kindBarrier, nil)
	return err
}

// opName names a collective in messages.
func opName(k kind) string {
	if k == kindBarrier {
		return "barrier"
	}
	return "allgather"
}

func (b *Bootstrap) collective(ctx context.Context, k kind, data []byte) ([][]byte, error) {
	if int64(len(data)) > b.opts.MaxMessage {
		return nil, b.errorf(opName(k), fmt.Errorf("%w: %d bytes, limit %d (Options.MaxMessage)", ErrFrameTooLarge, len(data), b.opts.MaxMessage))
	}
	select {
	case b.coll <- struct{}{}:
	case <-ctx.Done():
		return nil, b.errorf(opName(k), context.Cause(ctx))
	}
	defer func() { <-b.coll }()
	b.seq++
	step := fmt.Sprintf("%s #%d", opName(k), b.seq)
	switch {
	case b.size == 1:
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return nil, b.errorf(step, ErrClosed)
		}
		if k == kindBarrier {
			return nil, nil
		}
		return [][]byte{append([]byte{}, data...)}, nil
	case b.rank == 0:
		return b.rootCollective(ctx, k, b.seq, step, data)
	}
	return b.leafCollective(ctx, k, b.seq, step, data)
}

// collStateLocked reports why no collective can complete any more.
// b.mu must be held.
func (b *Bootstrap) collStateLocked() error {
	if b.closed {
		return ErrClosed
	}
	return b.collErr
}

// setCollErrLocked makes every later collective fail with err (the first
// such error is kept). b.mu must be held.
func (b *Bootstrap) setCollErrLocked(err error) {
	if b.collErr == nil {
		b.collErr = err
	}
}

// rootCollective is rank 0's side: wait for every contribution, check
// they match, send the result.
func (b *Bootstrap) rootCollective(ctx context.Context, k kind, seq uint32, step string, data []byte) ([][]byte, error) {
	msgs := make([]collMsg, b.size)
	for {
		b.mu.Lock()
		var missing []int
		for r := 1; r < b.size; r++ {
			if len(b.contrib[r]) == 0 {
				missing = append(missing, r)
			}
		}
		if b.closed {
			b.mu.Unlock()
			return nil, b.errorf(step, ErrClosed)
		}
		if len(missing) == 0 {
			for r := 1; r < b.size; r++ {
				m := b.contrib[r][0]
				if m.kind != k || m.seq != seq {
					msg := fmt.Sprintf("rank %d called %s #%d, rank 0 called %s", r, opName(m.kind), m.seq, step)
					b.mu.Unlock()
					b.failCollectives(msg, -1)
					return nil, b.errorf(step, fmt.Errorf("%w: %s", ErrCollective, msg))
				}
				msgs[r] = m
				b.contrib[r] = b.contrib[r][1:]
			}
			b.rootDone = seq
			b.mu.Unlock()
			break
		}
		if err := b.collErr; err != nil && b.telling == 0 {
			b.mu.Unlock()
			// Make sure the other ranks do not wait for this one (a loss
			// they learn from rank 0's notice).
			var lost *PeerLostError
			if !errors.As(err, &lost) {
				b.failCollectives(err.Error(), -1)
			}
			return nil, b.errorf(step, err)
		}
		ch := b.changed
		b.mu.Unlock()
		if err := wait(ctx, ch); err != nil {
			msg := fmt.Sprintf("rank 0 abandoned %s: %v (%s had not arrived)", step, err, rankList(missing))
			b.failCollectives(msg, -1)
			return nil, b.errorf(step, fmt.Errorf("%w (%s had not arrived)", err, rankList(missing)))
		}
	}

	var parts [][]byte
	if k == kindGather {
		parts = make([][]byte, b.size)
		parts[0] = append([]byte{}, data...)
		for r := 1; r < b.size; r++ {
			parts[r] = msgs[r].payload
		}
	}
	// A failed write is reported by sendCtrl as the loss of that rank;
	// the collective itself is complete.
	var wg sync.WaitGroup
	for r := 1; r < b.size; r++ {
		l := b.ctrl[r]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if k == kindBarrier {
				b.sendCtrl(l, header{kind: kindRelease, tag: seq}, nil)
				return
			}
			for i, part := range parts {
				if i != r {
					if b.sendCtrl(l, header{kind: kindGatherPart, tag: seq, arg: uint32(i)}, part) != nil {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return parts, nil
}

// leafCollective is the side of a rank other than 0: send the
// contribution, wait for the result.
func (b *Bootstrap) leafCollective(ctx context.Context, k kind, seq uint32, step string, data []byte) ([][]byte, error) {
	r := &collResult{kind: k, seq: seq}
	if k == kindGather {
		r.parts = make([][]byte, b.size)
		r.parts[b.rank] = append([]byte{}, data...)
	}
	b.mu.Lock()
	if err := b.collStateLocked(); err != nil {
		b.mu.Unlock()
		return nil, b.errorf(step, err)
	}
	b.res = r
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.res = nil
		b.mu.Unlock()
	}()
	if err := b.sendCtrl(b.ctrl[0], header{kind: k, tag: seq}, data); err != nil {
		b.mu.Lock()
		e := b.peerErrLocked(0)
		b.mu.Unlock()
		if e == nil {
			e = fmt.Errorf("sending to rank 0: %w", err)
		}
		return nil, b.errorf(step, e)
	}
	for {
		b.mu.Lock()
		if r.complete(b.size) {
			b.mu.Unlock()
			return r.parts, nil
		}
		if err := b.collStateLocked(); err != nil {
			b.mu.Unlock()
			return nil, b.errorf(step, err)
		}
		ch := b.changed
		b.mu.Unlock()
		if err := wait(ctx, ch); err != nil {
			return b.abandon(r, seq, step, err)
		}
	}
}

// abandon gives up the collective in flight on a rank other than 0 when
// its context ends: it asks rank 0 to fail the collective and waits for
// the answer (bounded by rank 0's liveness), so that every rank agrees on
// the outcome. If rank 0 had completed it already, the result arrives and
// is returned.
func (b *Bootstrap) abandon(r *collResult, seq uint32, step string, cause error) ([][]byte, error) {
	msg := fmt.Sprintf("rank %d abandoned %s: %v", b.rank, step, cause)
	b.sendCtrl(b.ctrl[0], header{kind: kindFail, tag: seq}, []byte(msg))
	for {
		b.mu.Lock()
		if r.complete(b.size) {
			b.mu.Unlock()
			return r.parts, nil
		}
		if err := b.collStateLocked(); err != nil {
			b.mu.Unlock()
			return nil, b.errorf(step, cause)
		}
		ch := b.changed
		b.mu.Unlock()
		<-ch
	}
}

// abandoned handles rank p's request to give up collective seq: unless
// rank 0 completed it already (p then gets the result), p's contribution
// is dropped and the collective fails on every rank.
func (b *Bootstrap) abandoned(p int, seq uint32, msg string) {
	b.mu.Lock()
	if b.rootDone >= seq {
		b.mu.Unlock()
		return
	}
	b.contrib[p] = nil
	b.mu.Unlock()
	b.failCollectives(msg, -1)
}

// contribute queues rank p's contribution at rank 0. A rank sends its
// next contribution only after the result of the previous one, so a
// second one queued is a protocol error.
func (b *Bootstrap) contribute(p int, h header, payload []byte) {
	b.mu.Lock()
	if len(b.contrib[p]) > 0 {
		prev := b.contrib[p][0]
		b.mu.Unlock()
		b.failCollectives(fmt.Sprintf("rank %d sent %s #%d before %s #%d completed", p, opName(h.kind), h.tag, opName(prev.kind), prev.seq), -1)
		return
	}
	b.contrib[p] = append(b.contrib[p], collMsg{kind: h.kind, seq: h.tag, payload: payload})
	b.notifyLocked()
	b.mu.Unlock()
}

// deliverPart stores one part of the allgather in flight.
func (b *Bootstrap) deliverPart(h header, p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, i := b.res, int(h.arg)
	if r == nil || r.kind != kindGather || r.seq != h.tag || i >= b.size || i == b.rank || r.parts[i] != nil {
		b.logf("dropped a gather part (rank %d, collective #%d) that no allgather in progress expects", i, h.tag)
		return
	}
	r.parts[i] = p
	r.got++
	b.notifyLocked()
}

// deliverRelease ends the barrier in flight.
func (b *Bootstrap) deliverRelease(h header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.res
	if r == nil || r.kind != kindBarrier || r.seq != h.tag {
		b.logf("dropped a barrier release (collective #%d) that no barrier in progress expects", h.tag)
		return
	}
	r.released = true
	b.notifyLocked()
}

// failCollectives makes the collective in flight and every later one
// fail (with msg, unless they already failed for another reason). Rank 0
// also tells every rank but from (the rank that told it, or -1), once,
// and its own collectives do not report the failure before it has: the
// first failure it tells is the one every rank reports.
func (b *Bootstrap) failCollectives(msg string, from int) {
	var tell []*link
	b.mu.Lock()
	b.setCollErrLocked(fmt.Errorf("%w: %s", ErrCollective, msg))
	telling := b.rank == 0 && !b.failSent
	if telling {
		b.failSent = true
		b.telling++
		for r, l := range b.ctrl {
			if l != nil && r != from && !b.noticed[r] && !b.departed[r] {
				tell = append(tell, l)
			}
		}
	}
	b.mu.Unlock()
	b.tell(tell, header{kind: kindFail}, []byte(msg))
	b.mu.Lock()
	if telling {
		b.telling--
	}
	b.notifyLocked()
	b.mu.Unlock()
}
