package devcomm

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
)

// commSession is one plan instance's session and its launches.
type commSession struct {
	ss *gpu.StreamSession
	l  *executor.BufferLayout
	// used is the sequence number of the session's last call: the least
	// recently called session is the one closed to make room (evict).
	used uint64
	// queued: later launches may be enqueued while earlier ones run (no
	// port channels, no per-call tables: what capturable allows).
	// server serves the launches made by calls, in order.
	queued bool
	server launchServer
	// sig is the signature of the call described sigDesc (steady calls
	// repeat it).
	sig     uint64
	sigDesc string
	// calls counts the launches made by calls and not yet served (busy):
	// while there are any, their own watch reads the progress records,
	// not the replay watch, which reads it without the communicator's
	// lock.
	calls atomic.Int32
}

// open opens the session of call's instance on every rank (regErr, this
// rank's registration failure, fails the set-up on every rank); pre is
// the instance when it was made already.
func (c *Comm) open(ctx context.Context, call Call, regErr error, pre *opened) (*commSession, error) {
	var inst *executor.Instance
	var l *executor.BufferLayout
	var opts executor.Options
	err := regErr
	if err == nil && pre != nil {
		inst, l, opts, err = pre.inst, pre.l, pre.opts, pre.err
	} else if err == nil {
		inst, l, opts, err = call.openCall()
	}
	if err == nil {
		err = checkUser(l, c.rank, call.In, call.Out)
	}
	if err != nil {
		// The peers are in the set-up's first all-gather: fail it there.
		_, gerr := c.gather(ctx, err, "opening "+call.Desc)
		return nil, gerr
	}
	if err := c.makeRoomFor(ctx, call); err != nil {
		return nil, err
	}
	w := c.w
	w.Tag = c.w.Tag + c.nextTag
	c.nextTag += rankwire.TagsPerSession
	ss, err := gpu.OpenStreamSession(ctx, c.cfg, inst, l, opts, w, c.inProcess())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call.Desc, err)
	}
	cs := &commSession{ss: ss, l: l, queued: capturable(inst) == nil, used: c.calls - 1}
	c.sessions[call.Key] = cs
	return cs, nil
}

// makeRoomFor closes, on every rank, the session that must go for
// call's to open: at most cfg.MaxSessions sessions, the least recently
// called one going first, the same on every rank (the ranks make the same
// calls in the same order). Its launches end on this rank before the
// gather, so after it they have ended on every rank, and none reads or
// writes what closing it releases.
func (c *Comm) makeRoomFor(ctx context.Context, call Call) error {
	key, victim := c.victim()
	var werr error
	if victim != nil {
		if err := victim.wait(c.waitBound(victim)); err != nil {
			werr = fmt.Errorf("rank %d: closing the least recently called plan instance (%s) to open this one: %w", c.rank, key, err)
		}
	}
	if _, err := c.gather(ctx, werr, "opening "+call.Desc); err != nil {
		return err
	}
	if victim != nil {
		c.evict(key, victim)
	}
	return nil
}

// victim returns the session to close before one more opens, when
// cfg.MaxSessions are open: the least recently called one that no graph
// holds (a captured session's replays may run as long as the
// communicator lives, so it stays, and counts). nil when there is room,
// or when every open session is captured.
func (c *Comm) victim() (string, *commSession) {
	if len(c.sessions) < c.cfg.MaxSessions {
		return "", nil
	}
	var key string
	var v *commSession
	for k, cs := range c.sessions {
		if cs.ss.Captured() {
			continue
		}
		if v == nil || cs.used < v.used {
			key, v = k, cs
		}
	}
	return key, v
}

// evict closes session cs of key, whose launches have ended on every
// rank (gpu.StreamSession.Close: its images, its rank session). The next
// call of its instance opens it again, on every rank. A failure to close
// keeps its memory until the process ends, and is Close's error.
func (c *Comm) evict(key string, cs *commSession) {
	delete(c.sessions, key)
	c.evicted++
	cs.server.stop()
	if err := cs.ss.Close(); err != nil {
		c.leaked = append(c.leaked, fmt.Errorf("%s: rank %d: closing the plan instance %s to make room: %w", c.cfg.Name, c.rank, key, err))
	}
}

// Sessions returns how many plan-instance sessions are open (at most
// gpu.Config.MaxSessions, and the captured ones beyond), and how many were
// closed to make room for others.
func (c *Comm) Sessions() (open, evicted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions), c.evicted
}

// waitBound is how long a call waits for the previous launch of its
// instance: the deadlock timeout, in which the watch ends a hung launch,
// and a margin.
func (c *Comm) waitBound(cs *commSession) time.Duration {
	return cs.ss.Timeout() + c.cfg.SetupTimeout
}

// maxInFlight bounds the launches of one plan instance that are enqueued
// and not yet served: a call beyond it waits for the oldest.
const maxInFlight = 64

// busy reports whether a launch of the session made by a call has not
// been served yet.
func (cs *commSession) busy() bool { return cs.calls.Load() > 0 }

// makeRoom waits, before a call, for what the session's next launch
// needs: every earlier launch when the session does not queue, else the
// oldest one when maxInFlight are in flight (at most bound).
func (cs *commSession) makeRoom(bound time.Duration) error {
	if !cs.queued {
		return cs.wait(bound)
	}
	n := cs.server.pending()
	if n < maxInFlight || cs.server.waitServed(cs.server.next()-maxInFlight, bound) {
		return nil
	}
	return fmt.Errorf("%d launches of this plan are in flight, and the oldest has not ended within %v", n, bound)
}

// wait waits at most bound for the session's last launch to be served.
func (cs *commSession) wait(bound time.Duration) error {
	if !cs.server.waitServed(cs.server.next()-1, bound) {
		return fmt.Errorf("the last launch of this plan has not ended within %v", bound)
	}
	return nil
}
