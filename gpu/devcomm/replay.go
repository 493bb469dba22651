package devcomm

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Quiet waits until every launch enqueued so far has been served (its
// kernel ended, its port traffic applied, its outcome in AsyncError), at
// most timeout in all.
func (c *Comm) Quiet(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := time.Now().Add(timeout)
	for key, cs := range c.sessions {
		if err := cs.wait(max(time.Until(end), 0)); err != nil {
			return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, key, err)
		}
	}
	return nil
}

// Abort ends the communicator at once: a running launch is stopped (the
// kernel's abort word) and every session released. It returns within
// the deadlock timeout and a margin, naming what did not end. A replay
// of a captured launch that is running then (nothing on the host watches
// replays: the caller's watchdog calls Abort) is stopped too, and what
// its blocks were waiting for becomes the asynchronous error.
func (c *Comm) Abort() error {
	c.cancel()
	return errors.Join(c.abortReplays(), c.Close())
}

// abortReplays stops the replays running in captured sessions and waits
// for them to end; a session whose replay does not end is dropped, its
// memory kept until the process ends.
func (c *Comm) abortReplays() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopReplaysLocked("abort")
}

// stopReplaysLocked is abortReplays with mu held; at names the moment
// (the abort, the close) in the asynchronous error of a replay that was
// running.
func (c *Comm) stopReplaysLocked(at string) error {
	var errs []error
	for key, cs := range c.sessions {
		if !cs.ss.Captured() {
			continue
		}
		if cs.busy() {
			continue // a launch made by a call: its own watch stops it
		}
		p := cs.ss.Probe()
		if !p.Running {
			continue
		}
		c.fail(fmt.Errorf("rank %d: %s: a replayed launch was running at the %s: %w", c.rank, key, at, p.Deadlock()))
		if err := cs.ss.StopReplay(nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			delete(c.sessions, key) // its memory stays
			cs.server.stop()
		}
	}
	return errors.Join(errs...)
}

// capturedSet is a communicator's sessions with a launch captured into
// a graph, which watchReplays watches (started at the first capture),
// and the watch's stop (closed by Close) and end (closed by the watch):
// Close frees the sessions' memory only once the watch, which reads
// their progress records and may raise their abort words, has ended.
type capturedSet struct {
	mu       sync.Mutex
	sessions []*commSession
	stop     chan struct{}
	done     chan struct{}
}

// watchCaptured adds a captured session to those the replay watch
// watches, starting the watch with the first.
func (c *Comm) watchCaptured(cs *commSession) {
	k := &c.captured
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sessions = append(k.sessions, cs)
	if len(k.sessions) == 1 {
		k.stop, k.done = make(chan struct{}), make(chan struct{})
		go c.watchReplays(k.stop, k.done)
	}
}

// stopWatchingReplays ends the replay watch, if one was started, and
// waits for it (Close, with mu held, before it frees the sessions).
func (c *Comm) stopWatchingReplays() {
	k := &c.captured
	k.mu.Lock()
	stop, done := k.stop, k.done
	k.stop = nil
	k.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

// replayWatch is the replay watch's view of the captured sessions: for
// each whose replay is waiting, the heartbeats it last saw change and
// when.
type replayWatch struct {
	c     *Comm
	bound time.Duration // the replay timeout
	stop  <-chan struct{}
	last  map[*commSession]*replaySeen
}

type replaySeen struct {
	marks []uint64
	since time.Time
}

// watchReplays watches the launches replayed from the caller's graphs,
// which nothing else on the host sees, until the communicator ends:
// every second it reads each captured session's progress records (but
// while a launch made by a call is in flight there: its own watch does),
// and a replay whose blocks have all been waiting, with no heartbeat, for
// the replay timeout is stopped (abort word) and its report becomes the
// asynchronous error.
func (c *Comm) watchReplays(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	w := &replayWatch{c: c, bound: c.cfg.ReplayTimeout, stop: stop, last: map[*commSession]*replaySeen{}}
	if w.bound <= 0 {
		w.bound = 10 * time.Minute
	}
	tk := time.NewTicker(min(time.Second, max(w.bound/8, time.Millisecond)))
	defer tk.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-stop:
			return
		case now := <-tk.C:
			c.captured.mu.Lock()
			sessions := slices.Clone(c.captured.sessions)
			c.captured.mu.Unlock()
			for _, cs := range sessions {
				w.check(cs, now)
			}
		}
	}
}

// check reads one captured session's records at now, and stops its
// replay when it has made no progress for the replay timeout.
func (w *replayWatch) check(cs *commSession, now time.Time) {
	if cs.calls.Load() > 0 {
		delete(w.last, cs)
		return
	}
	p := cs.ss.Probe()
	if p.Err != nil || !p.Running || p.Moving {
		delete(w.last, cs)
		return
	}
	l := w.last[cs]
	if l == nil || !slices.Equal(l.marks, p.Marks) {
		w.last[cs] = &replaySeen{marks: p.Marks, since: now}
		return
	}
	if now.Sub(l.since) < w.bound {
		return
	}
	c := w.c
	c.fail(fmt.Errorf("rank %d: a replayed launch made no progress for %v: %w", c.rank, w.bound, p.Deadlock()))
	if err := cs.ss.StopReplay(w.stop); err != nil {
		c.fail(err)
	}
	delete(w.last, cs)
}
