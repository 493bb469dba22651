package devcomm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/gpu"
)

// callLaunch is one launch made by a call: what its gate, its hold and
// its serving need once the caller has returned. A session's records
// are reused once their launch has been served, and the functions their
// gate and hold hand to the driver are bound once per record, so that a
// steady call allocates none of them.
type callLaunch struct {
	c     *Comm
	cs    *commSession
	call  Call
	args  []byte
	seq   uint64 // the call's number (its messages)
	start time.Time
	// peer is set for a steady call: the peers' buffers are read when
	// the launch's turn comes (resolve).
	peer   peerCall
	gater  gpu.Gater
	holder gpu.Holder
	hold   gpu.Hold
	// released is set by the gate server once it has released the
	// hold (fn.released): a held launch's record is reused only then.
	// (The kernel cannot end before, but the device orders that, which
	// Go's memory model does not see.)
	released atomic.Bool
	fn       launchFns // bound once, kept across reuses
}

// launchFns are a record's methods as the functions it hands out.
type launchFns struct {
	gate     func() error // gate
	body     func()       // gateBody
	hold     func() error // holdStream
	resolve  func() ([][2]gpu.DevPtr, error)
	images   func(bufs [][2]gpu.DevPtr) ([][]byte, error)
	released func() // markReleased
}

// peerCall is a steady call's record, whose peers' records name their
// buffers: resolve reads them when the launch's gate opens.
type peerCall struct {
	ok  bool
	seq uint64
	rec callRecord
}

func newCallLaunch() *callLaunch {
	l := &callLaunch{}
	l.fn = launchFns{gate: l.gate, body: l.gateBody, hold: l.holdStream, resolve: l.resolve, images: l.images, released: l.markReleased}
	return l
}

func (l *callLaunch) markReleased() { l.released.Store(true) }

// resolve returns every rank's buffers of the steady call.
func (l *callLaunch) resolve() ([][2]gpu.DevPtr, error) {
	return l.c.resolveCall(l.peer.seq, l.peer.rec, l.call.Desc)
}

// gate holds a Gater's stream for the call: the body runs there once
// the launches before it on the stream have ended.
func (l *callLaunch) gate() error {
	if err := l.cs.ss.NoOps(); err != nil {
		return err
	}
	return l.gater.Gate(l.fn.body)
}

// gateBody resolves the call on the stream and writes the rank table;
// when resolve fails the launch gets arguments whose blocks have no op,
// as a held launch gets (AbortImages), and the abort word.
func (l *callLaunch) gateBody() {
	ss := l.cs.ss
	bufs, err := l.resolve()
	if err == nil {
		err = ss.WriteRankTable(l.call.In, l.call.Out, bufs)
	}
	if err == nil {
		return
	}
	l.c.fail(err)
	if aerr := ss.AbortLaunch(l.args); aerr != nil {
		l.c.fail(aerr)
	}
}

// holdStream holds a Holder's stream: the communicator's gate server
// (gates.go) resolves the call and releases the hold, after which the
// stream copies the abort word, the arguments and the rank table.
func (l *callLaunch) holdStream() error {
	if err := l.cs.ss.NoOps(); err != nil {
		return err
	}
	var err error
	l.hold, err = l.holder.Hold(l.cs.ss.HoldCopies())
	return err
}

// images are the held launch's copies for every rank's buffers, or with
// bufs nil those of an aborted launch.
func (l *callLaunch) images(bufs [][2]gpu.DevPtr) ([][]byte, error) {
	if bufs == nil {
		return l.cs.ss.AbortImages(l.args)
	}
	return l.cs.ss.LaunchImages(l.args, l.call.In, l.call.Out, bufs), nil
}

// serve waits for the launch's kernel, serving its proxies and watch,
// and makes its failure the communicator's.
func (l *callLaunch) serve() {
	c, ss := l.c, l.cs.ss
	if err := ss.Complete(c.ctx, l.start); err != nil {
		err = fmt.Errorf("rank %d: call %d (%s): %w", c.rank, l.seq, l.call.Desc, err)
		ss.Fail(err)
		c.fail(err)
	}
}

// launchServer serves a session's launches made by calls, in the order
// they were made, on one goroutine that lives as long as the session
// (started at its first launch, ended by stop once the launches queued
// have been served): a call hands its launch over and returns, with no
// goroutine, channel or closure made for it.
type launchServer struct {
	queue chan *callLaunch // capacity maxInFlight: makeRoom keeps within it

	mu      sync.Mutex
	issued  uint64 // launches handed over
	served  uint64 // launches served
	waiters chan struct{}
	free    []*callLaunch
	started bool
	stopped bool
}

// record returns a launch record to fill: one whose launch was served,
// or a new one.
func (ls *launchServer) record() *callLaunch {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if n := len(ls.free); n > 0 {
		l := ls.free[n-1]
		ls.free = ls.free[:n-1]
		return l
	}
	return newCallLaunch()
}

// next is the number the next launch handed over gets.
func (ls *launchServer) next() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.issued + 1
}

// push hands launch l over. The caller made room for
// it (makeRoom): a full queue is an error, never a wait.
func (ls *launchServer) push(l *callLaunch) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopped {
		return fmt.Errorf("the plan instance's session was closed")
	}
	if ls.queue == nil {
		ls.queue = make(chan *callLaunch, maxInFlight)
	}
	select {
	case ls.queue <- l:
	default:
		return fmt.Errorf("%d launches of this plan are already queued", maxInFlight)
	}
	ls.issued++
	if !ls.started {
		ls.started = true
		go ls.run(ls.queue)
	}
	return nil
}

func (ls *launchServer) run(q <-chan *callLaunch) {
	for l := range q {
		l.serve()
		l.cs.calls.Add(-1)
		ls.mu.Lock()
		ls.served++
		if ls.waiters != nil {
			close(ls.waiters)
			ls.waiters = nil
		}
		// Nothing refers to the record now: its gate ran before its
		// kernel, which has ended; a held launch's gate server says so.
		if l.hold == nil || l.released.Load() {
			*l = callLaunch{fn: l.fn}
			ls.free = append(ls.free, l)
		}
		ls.mu.Unlock()
	}
}

// servedCount is how many launches have been served.
func (ls *launchServer) servedCount() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.served
}

// pending is how many launches handed over are not yet served.
func (ls *launchServer) pending() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.issued - ls.served
}

// waitServed waits at most bound until launch n has been served.
func (ls *launchServer) waitServed(n uint64, bound time.Duration) bool {
	var t *time.Timer
	for {
		ls.mu.Lock()
		if ls.served >= n {
			ls.mu.Unlock()
			return true
		}
		if ls.waiters == nil {
			ls.waiters = make(chan struct{})
		}
		w := ls.waiters
		ls.mu.Unlock()
		if t == nil {
			t = time.NewTimer(bound)
			defer t.Stop()
		}
		select {
		case <-w:
		case <-t.C:
			return ls.servedCount() >= n
		}
	}
}

// stop ends the serving goroutine once the launches handed over have
// been served; no launch may be handed over after it.
func (ls *launchServer) stop() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopped {
		return
	}
	ls.stopped = true
	if ls.queue != nil {
		close(ls.queue)
	}
}
