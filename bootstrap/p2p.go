// This file holds point-to-point messages, Send and Recv: the data link
// a rank dials to a peer on its first Send, the reader that queues what a
// peer sends per (peer, tag), and the reader of the reverse direction
// (goodbyes and refusals).

package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Send sends data to rank peer with tag. Messages from one rank to
// another with one tag arrive in the order sent. Send returns once the
// message is handed to the connection (the receiver queues it until a
// Recv takes it); it does not wait for that Recv. ctx bounds waiting for
// a concurrent Send to the same peer and opening the connection; once a
// message has started it is written whole, or fails when the peer is
// lost or closes. A send to this rank itself is queued directly. Send
// does not keep data.
func (b *Bootstrap) Send(ctx context.Context, peer int, tag uint32, data []byte) error {
	step := fmt.Sprintf("send to rank %d (tag %d)", peer, tag)
	if peer < 0 || peer >= b.size {
		return b.errorf(step, fmt.Errorf("no rank %d in a world of %d ranks", peer, b.size))
	}
	if int64(len(data)) > b.opts.MaxMessage {
		return b.errorf(step, fmt.Errorf("%w: %d bytes, limit %d (Options.MaxMessage)", ErrFrameTooLarge, len(data), b.opts.MaxMessage))
	}
	if peer == b.rank {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return b.errorf(step, ErrClosed)
		}
		key := inKey{peer, tag}
		b.inbox[key] = append(b.inbox[key], append([]byte{}, data...))
		b.notifyLocked()
		return nil
	}
	o := b.out[peer]
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return b.errorf(step, context.Cause(ctx))
	}
	defer func() { <-o.sem }()
	if err := ctx.Err(); err != nil {
		return b.errorf(step, context.Cause(ctx))
	}
	l, err := b.outLinkTo(ctx, peer)
	if err != nil {
		return b.errorf(step, err)
	}
	if err := l.send(header{kind: kindData, tag: tag}, data); err != nil {
		return b.errorf(step, b.sendFailed(peer, l, err))
	}
	return nil
}

// Recv returns the next message rank peer sent to this rank with tag,
// waiting for it until ctx ends. Messages that arrived before the peer
// was lost or closed are still returned; after that, Recv fails naming
// the peer (*PeerLostError or *PeerClosedError).
func (b *Bootstrap) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	step := fmt.Sprintf("recv from rank %d (tag %d)", peer, tag)
	if peer < 0 || peer >= b.size {
		return nil, b.errorf(step, fmt.Errorf("no rank %d in a world of %d ranks", peer, b.size))
	}
	key := inKey{peer, tag}
	for {
		b.mu.Lock()
		if q := b.inbox[key]; len(q) > 0 {
			m := q[0]
			if len(q) == 1 {
				delete(b.inbox, key)
			} else {
				q[0] = nil
				b.inbox[key] = q[1:]
			}
			b.mu.Unlock()
			return m, nil
		}
		var err error
		var timer <-chan time.Time
		switch {
		case b.closed:
			err = ErrClosed
		case b.lost[peer] != nil:
			err = b.lost[peer]
		case b.inErr[peer] != nil:
			err = b.inErr[peer]
		case b.departed[peer]:
			// The goodbye may have come on another link than the
			// messages: wait for the peer's data link to end (all its
			// messages read), or, if it has none, for a connection that
			// may still be in flight.
			if l := b.in[peer]; l != nil {
				if isDone(l.done) || l.byeIn.Load() {
					err = &PeerClosedError{Rank: peer}
				}
			} else if left := b.opts.CloseTimeout - time.Since(b.departedAt[peer]); left <= 0 {
				err = &PeerClosedError{Rank: peer}
			} else {
				timer = time.After(left)
			}
		}
		ch := b.changed
		b.mu.Unlock()
		if err != nil {
			return nil, b.errorf(step, err)
		}
		select {
		case <-ch:
		case <-timer:
		case <-ctx.Done():
			return nil, b.errorf(step, context.Cause(ctx))
		}
	}
}

// outLinkTo returns the data link to peer, dialing it on first use. The
// caller holds the peer's send semaphore.
func (b *Bootstrap) outLinkTo(ctx context.Context, peer int) (*link, error) {
	b.mu.Lock()
	o := b.out[peer]
	err := b.peerErrLocked(peer)
	if err == nil {
		err = o.err
	}
	if err != nil || o.l != nil {
		l := o.l
		b.mu.Unlock()
		return l, err
	}
	addr, session := b.peers[peer].Addr, b.session
	b.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	d := net.Dialer{KeepAlive: 15 * time.Second}
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to rank %d at %s: %w", peer, addr, shortNetErr(err))
	}
	c.SetWriteDeadline(time.Now().Add(b.opts.Timeout))
	ph := peerHello{rank: uint32(b.rank), size: uint32(b.size), session: session}
	_, err = writeFrame(c, header{kind: kindPeerHello}, ph.encode(), 0)
	c.SetWriteDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connecting to rank %d at %s: %w", peer, addr, shortNetErr(err))
	}
	l := newLink(c, peer, 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.peerErrLocked(peer); err != nil {
		c.Close()
		return nil, err
	}
	o.l = l
	b.wg.Add(1) // b is not closed (peerErrLocked): Close waits for it
	go func() {
		defer b.wg.Done()
		b.readOut(l)
	}()
	return l, nil
}

// sendFailed works out why a write to peer failed and returns that: the
// peer lost or closed (seen by the link's reader, which gets a moment to
// see it), the peer refusing this rank's messages, or the write error.
// The link is not used again.
func (b *Bootstrap) sendFailed(peer int, l *link, werr error) error {
	t := time.NewTimer(time.Second)
	select {
	case <-l.done:
	case <-t.C:
	}
	t.Stop()
	l.kill()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.peerErrLocked(peer); err != nil {
		return err
	}
	o := b.out[peer]
	if o.err == nil {
		o.err = fmt.Errorf("connection to rank %d broke: %w", peer, shortNetErr(werr))
	}
	return o.err
}

// readOut reads the reverse direction of a data link this rank dialed:
// the peer's goodbye, or its refusal of this rank's messages.
func (b *Bootstrap) readOut(l *link) {
	defer close(l.done)
	for {
		h, p, err := readFrame(l.r, handshakeMax)
		if err != nil {
			b.linkFailed(l, err)
			return
		}
		switch h.kind {
		case kindBye:
			l.byeIn.Store(true)
			b.markDeparted(l.peer, false)
			l.shutWrite(false)
			continue
		case kindFail:
			err = fmt.Errorf("rank %d refused this rank's messages: %s", l.peer, p)
		default:
			err = fmt.Errorf("rank %d answered with a %s frame: %w", l.peer, h.kind, ErrBadFrame)
		}
		b.mu.Lock()
		if o := b.out[l.peer]; o.err == nil {
			o.err = err
		}
		b.notifyLocked()
		b.mu.Unlock()
		b.logf("%v", err)
		l.kill()
		return
	}
}

// readData reads a data link a peer dialed to this rank, queuing its
// messages. A frame over Options.MaxMessage, or a frame of another kind,
// is refused: the peer is told, and Recv from it fails.
func (b *Bootstrap) readData(l *link) {
	defer func() {
		close(l.done)
		b.mu.Lock()
		b.notifyLocked()
		b.mu.Unlock()
	}()
	max := uint64(b.opts.MaxMessage)
	for {
		h, p, err := readFrame(l.r, max)
		if err == nil && h.kind != kindData && h.kind != kindBye {
			err = fmt.Errorf("%w: unexpected %s frame", ErrBadFrame, h.kind)
		}
		if err != nil {
			if !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrBadFrame) {
				b.linkFailed(l, err)
				return
			}
			b.logf("refused rank %d's data connection: %v", l.peer, err)
			b.mu.Lock()
			b.inErr[l.peer] = fmt.Errorf("rank %d sent a frame this rank refused: %w", l.peer, err)
			b.notifyLocked()
			b.mu.Unlock()
			l.refuse(err.Error())
			return
		}
		if h.kind == kindBye {
			l.byeIn.Store(true)
			b.markDeparted(l.peer, false)
			l.shutWrite(false)
			continue
		}
		b.mu.Lock()
		if !b.closed {
			key := inKey{l.peer, h.tag}
			b.inbox[key] = append(b.inbox[key], p)
			b.notifyLocked()
		}
		b.mu.Unlock()
	}
}
