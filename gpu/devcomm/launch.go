package devcomm

import (
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/gpu"
)

// launch sets the call's buffers in the session and enqueues its launch
// on the caller's stream; the session's server (serve.go) serves it
// until it ends. In a session whose launches may queue (cs.queued),
// earlier launches may still be running or waiting on the stream: the
// host then touches nothing they read (gpu.StreamSession.Prepare), and
// the server serves it once the previous one has been served.
//
// With peer.ok (a steady-state call, the driver a gpu.Gater or a
// gpu.Holder) the buffers are not known yet: the kernel waits on the
// stream behind a gate. A Gater's gate resolves the call on the stream
// (the launches before it there have ended) and writes the rank table; a
// Holder's hold is released by the communicator's gate server (gates.go)
// once resolve has returned, with the images the stream then copies.
// When resolve fails the launch gets arguments whose blocks have no op
// and the abort word (gpu.StreamSession.AbortImages), so the kernel
// writes nothing.
func (c *Comm) launch(cs *commSession, call Call, bufs [][2]gpu.DevPtr, peer peerCall) error {
	sl := gpu.StreamLaunch{Stream: call.Stream, Desc: call.Desc, In: call.In, Out: call.Out, Bufs: bufs, AtGate: peer.ok, Busy: cs.busy()}
	if sl.Busy && !sl.AtGate {
		// (Only a rank table written here needs an image of its own.)
		sl.Served, sl.Next = cs.server.servedCount(), cs.server.next()
	}
	args, err := cs.ss.Prepare(c.ctx, sl)
	if err != nil {
		return err
	}
	if cs.ss.Grid() == 0 {
		if peer.ok {
			go c.resolveLate(peer, call.Desc)
		}
		cs.ss.CountLaunch()
		return nil
	}
	l := cs.server.record()
	l.c, l.cs, l.call, l.args, l.peer, l.seq = c, cs, call, args, peer, c.calls
	gate := l.gateFn()
	l.start = time.Now()
	if err := cs.ss.Launch(gate); err != nil {
		return c.launchFailed(l, err)
	}
	if l.hold != nil {
		if c.gates == nil {
			c.gates = newGateServer(c.fail)
		}
		c.gates.add(gateJob{hold: l.hold, resolve: l.fn.resolve, images: l.fn.images, done: l.fn.released})
	}
	cs.calls.Add(1)
	if err := cs.server.push(l); err != nil {
		cs.calls.Add(-1)
		err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
		cs.ss.Fail(err)
		return err
	}
	return nil
}

// resolveLate resolves a steady call of no blocks, for its outcome.
func (c *Comm) resolveLate(peer peerCall, desc string) {
	if _, err := c.resolveCall(peer.seq, peer.rec, desc); err != nil {
		c.fail(err)
	}
}

// gateFn returns the gate of a steady call's launch (its record's: a
// Gater's gate or a Holder's hold), nil for a call whose buffers are
// known.
func (l *callLaunch) gateFn() func() error {
	if !l.peer.ok {
		return nil
	}
	gater, holder := l.cs.ss.Gates()
	switch {
	case gater != nil:
		l.gater = gater
		return l.fn.gate
	case holder != nil:
		l.holder = holder
		return l.fn.hold
	}
	return nil
}

// launchFailed is the error of a launch that could not be enqueued. The
// record is dropped, not reused: the stream may still hold its gate. A
// held stream waits for the hold: the kernel behind it, if enqueued, must
// do nothing.
func (c *Comm) launchFailed(l *callLaunch, err error) error {
	cs := l.cs
	err = fmt.Errorf("%s: rank %d: %s: launch of %d blocks: %w", c.cfg.Name, c.rank, l.call.Desc, cs.ss.Grid(), err)
	if l.hold != nil {
		img, ierr := cs.ss.AbortImages(l.args)
		err = errors.Join(err, ierr)
		if img != nil {
			err = errors.Join(err, l.hold.Release(img))
		}
	}
	cs.ss.Fail(err)
	return err
}

// capture records the call's launch on its caller's stream, which is
// being captured into a graph (gpu.StreamSession.Capture), and has the
// replay watch watch the session from its first capture on.
func (c *Comm) capture(cs *commSession, call Call, bufs [][2]gpu.DevPtr) error {
	first, err := cs.ss.Capture(c.ctx, call.Stream, call.Desc, call.In, call.Out, bufs)
	if first {
		c.watchCaptured(cs)
	}
	return err
}
