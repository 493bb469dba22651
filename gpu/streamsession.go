package gpu

// streamsession.go holds StreamSession, the seam between this runtime and
// a communicator (package gpu/devcomm): one plan instance's rank session
// over the caller's device buffers, launched on the caller's stream. The
// communicator decides when a launch is made and with which buffers (its
// calls, their peers, their order); the StreamSession writes what the
// kernel reads (the rank table, the arguments, the cleared progress
// records), enqueues the kernel, holds or gates it for the host, serves
// it until it ends, and records it into a caller's graph.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// StreamSession is one rank of a plan instance on the caller's buffers
// and stream. Its methods are called with the communicator's lock held,
// but for those of a launch's gate, hold and serving (WriteRankTable,
// AbortLaunch, LaunchImages, AbortImages, Complete, Fail), which run one
// launch at a time, in order, and those of the replay watch (Probe,
// StopReplay), which only read the progress records and raise the abort
// word.
type StreamSession struct {
	rs *RankSession
	s  *session
	sd StreamDriver
	// args are the arguments last staged, zeros the image of cleared
	// progress records.
	args  []byte
	zeros []byte
	// captured is set once a launch was captured into a graph: a replay
	// may then run at any time on the device, so the host no longer
	// writes the session's device state outside its stream. images are
	// the captured launches' arguments and rank tables, which their
	// graphs copy at every replay: kept until Close.
	captured bool
	images   []HostMem
	// noOps is a zeroed block table in mapped host memory: the blocks
	// of a held launch whose call failed (AbortImages), made at the
	// session's first held or gated launch.
	noOps HostMem
	// tables are the rank table images of launches enqueued while
	// others were in flight.
	tables []*tableImage
}

// tableImage is host memory holding a rank table that a launch's copy
// reads when the stream reaches it; user is the number of that launch
// (StreamLaunch.Next), free again once it has been served.
type tableImage struct {
	h    HostMem
	user uint64
}

// OpenStreamSession opens rank w.Net.Rank() of inst on every rank at
// once, as OpenRank does, but over the caller's buffers, laid out as l:
// the session allocates and exports none, and each launch names them.
// inProcess says that every rank runs in this process (no memory is
// exported). Config.Graph is ignored (the caller captures), and cfg's
// driver must be a StreamDriver.
func OpenStreamSession(ctx context.Context, cfg Config, inst *executor.Instance, l *executor.BufferLayout, opts executor.Options, w rankwire.World, inProcess bool) (*StreamSession, error) {
	cfg.Graph = false
	rs, err := openRank(ctx, cfg, inst, l, opts, w, rankOpts{inProcess: inProcess, user: true})
	if err != nil {
		return nil, err
	}
	sd, ok := rs.s.d.(StreamDriver)
	if !ok {
		_ = rs.Close()
		return nil, fmt.Errorf("the %s driver (%T) cannot launch on a caller's stream", cfg.Name, rs.s.d)
	}
	return &StreamSession{rs: rs, s: rs.s, sd: sd}, nil
}

// ProcessName names this process among a job's: its host name, id and a
// random number, the same for every session and communicator.
func ProcessName() string { return thisProcess }

// Instance is the session's plan instance.
func (ss *StreamSession) Instance() *executor.Instance { return ss.s.inst }

// Timeout is the session's deadlock timeout: the watch ends a launch
// without progress for that long.
func (ss *StreamSession) Timeout() time.Duration { return ss.s.timeout }

// Grid is the number of blocks of a launch of this rank.
func (ss *StreamSession) Grid() int { return len(ss.s.tabs.blocks) }

// Captured reports whether a launch was captured into a graph.
func (ss *StreamSession) Captured() bool { return ss.captured }

// Gates returns the driver as a Gater or a Holder (at most one is set):
// a launch can then wait on its stream for the host (gated). Neither:
// the caller resolves a launch's buffers before it is made.
func (ss *StreamSession) Gates() (Gater, Holder) {
	switch d := ss.s.d.(type) {
	case Gater:
		return d, nil
	case Holder:
		return nil, d
	}
	return nil, nil
}

// Gated reports whether a launch can wait on its stream for the host.
func (ss *StreamSession) Gated() bool { return gated(ss.s.d) }

// StreamLaunch is a launch that a call makes (Prepare).
type StreamLaunch struct {
	Stream Stream
	Desc   string // the call, for errors
	In     DevPtr // this rank's input and output
	Out    DevPtr
	// Bufs are every rank's input and output as this rank addresses
	// them. With AtGate they are not known yet: the rank table is
	// written where the launch waits on its stream (WriteRankTable,
	// LaunchImages).
	Bufs   [][2]DevPtr
	AtGate bool
	// Busy says earlier launches of the session may still be running or
	// waiting on the stream: the host then touches nothing they read.
	// Served counts the session's launches served, Next numbers this one:
	// a rank table image it uses is free again once Served reaches Next.
	Busy   bool
	Served uint64
	Next   uint64
}

// errorf prefixes an error with the backend's name and the rank.
func (ss *StreamSession) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: rank %d: %w", ss.s.name, ss.s.mp.rank, fmt.Errorf(format, a...))
}

// Prepare stages launch sl on its stream up to its kernel: the rank table
// when a buffer moved, the arguments, the cleared progress records. With
// nothing in flight the progress records are also cleared now: until the
// kernel starts its blocks read as not started, so work ahead of it on
// the stream is not taken for a hang (not once a launch was captured: a
// replay may be running). It returns the launch's arguments, the same at
// every launch of a session with an epoch word: a queued launch reads
// what its predecessors read. Launch (or CountLaunch, for a grid of 0)
// follows.
func (ss *StreamSession) Prepare(ctx context.Context, sl StreamLaunch) ([]byte, error) {
	s := ss.s
	if err := s.guard.Ready(ctx); err != nil {
		return nil, err
	}
	if err := ss.sd.UseStream(sl.Stream); err != nil {
		return nil, ss.errorf("%s: %w", sl.Desc, err)
	}
	args := ss.args
	if args == nil || s.epoch == 0 || s.inst.Var != nil {
		args = s.argsImage(ss.Grid())
	}
	if !ss.captured && !sl.Busy {
		if err := ss.clearProgress(); err != nil {
			return nil, err
		}
	}
	if sl.AtGate {
		// The rank table is written in the gate: the next launch that
		// does not wait there writes its own.
		s.ranksImg = nil
	} else if err := ss.writeRanks(sl); err != nil {
		return nil, err
	}
	s.flag++
	if string(args) != string(ss.args) {
		s.stage(argsAt, args)
		ss.args = args
	}
	return args, nil
}

// clearProgress clears the control word and progress records now.
func (ss *StreamSession) clearProgress() error {
	s := ss.s
	if n := sizeControl + ss.Grid()*sizeProgress; len(ss.zeros) != n {
		ss.zeros = make([]byte, n)
	}
	if err := s.d.HtoD(s.ctl, ss.zeros); err != nil {
		return ss.errorf("clearing the progress records: %w", err)
	}
	return nil
}

// writeRanks enqueues the rank table of sl's buffers when it differs
// from the one last enqueued: from the staging, or with launches in
// flight from an image of its own.
func (ss *StreamSession) writeRanks(sl StreamLaunch) error {
	s := ss.s
	img := ss.setBuffers(sl.In, sl.Out, sl.Bufs)
	if !ss.captured && string(img) == string(s.ranksImg) {
		return nil
	}
	h, at := s.host, uint64(ranksAt)
	if sl.Busy {
		var err error
		if h, err = ss.image(img, sl.Served, sl.Next); err != nil {
			return ss.errorf("%s: %w", sl.Desc, err)
		}
		at = 0
	} else {
		s.stage(ranksAt, img)
	}
	if err := s.d.Enqueue(s.ranksT, h, at, uint64(len(img))); err != nil {
		return ss.errorf("writing the rank table: %w", err)
	}
	s.ranksImg = img
	return nil
}

// image returns host memory holding a rank table for launch next,
// enqueued while earlier ones are in flight: one no launch still needs
// (its launch served), or a new one.
func (ss *StreamSession) image(img []byte, served, next uint64) (HostMem, error) {
	var ti *tableImage
	for _, t := range ss.tables {
		if t.user <= served {
			ti = t
			break
		}
	}
	if ti == nil {
		h, err := ss.s.d.AllocHost(uint64(len(img)))
		if err != nil {
			return nil, fmt.Errorf("allocating a rank table image: %w", err)
		}
		ti = &tableImage{h: h}
		ss.tables = append(ss.tables, ti)
	}
	ti.user = next
	storeWords(ti.h, 0, img)
	return ti.h, nil
}

// setBuffers sets a launch's buffers in the session (this rank's in and
// out, every same-host rank's from bufs) and returns the image of its
// rank table.
func (ss *StreamSession) setBuffers(in, out DevPtr, bufs [][2]DevPtr) []byte {
	s, m := ss.s, ss.s.mp
	m.mu.Lock()
	m.devIn, m.devOut = in, out
	for r := range m.base {
		if m.w.Host[r] != m.w.Host[m.rank] {
			continue // its image stays the reserved address space
		}
		m.base[r][0], m.base[r][1] = uint64(bufs[r][0]), uint64(bufs[r][1])
	}
	ranks := make([]mgRank, len(s.ranks))
	for r, rd := range s.ranks {
		rd.rec.Buf = m.base[r]
		ranks[r] = rd.rec
	}
	m.mu.Unlock()
	return encode(ranks)
}

// Launch enqueues the prepared launch's kernel, with gate (nil: none)
// called between the cleared control word and the kernel to enqueue what
// holds it for the host (Gater.Gate, Holder.Hold).
func (ss *StreamSession) Launch(gate func() error) error {
	return ss.s.launchGated(ss.Grid(), gate)
}

// CountLaunch counts a launch of no blocks (nothing to enqueue) for the
// job-wide deadlock watch.
func (ss *StreamSession) CountLaunch() {
	m := ss.s.mp
	m.mu.Lock()
	m.launches++
	m.mu.Unlock()
}

// Complete serves a launched kernel until it has ended (its proxies, its
// watch) and returns its failure or deadlock; start is when it was
// launched.
func (ss *StreamSession) Complete(ctx context.Context, start time.Time) error {
	ss.CountLaunch()
	return ss.s.complete(ctx, ss.Grid(), start, func() {})
}

// Fail makes err the session's: its next launches fail with it.
func (ss *StreamSession) Fail(err error) {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.guard.Fail(err)
}

// NoOps makes the session's empty block table (AbortImages), once; a
// gated or held launch needs it before its gate.
func (ss *StreamSession) NoOps() error {
	if ss.noOps != nil {
		return nil
	}
	h, err := ss.s.d.AllocHost(uint64(ss.Grid()) * sizeBlock)
	if err != nil {
		return fmt.Errorf("the empty block table of an aborted launch: %w", err)
	}
	ss.noOps = h
	return nil
}

// HoldCopies are the copies a held launch's stream makes once its hold
// is released: the abort word, the arguments and the rank table, whose
// images LaunchImages or AbortImages give.
func (ss *StreamSession) HoldCopies() []HoldCopy {
	s := ss.s
	return []HoldCopy{{Dst: s.ctl, N: 4}, {Dst: s.args, N: sizeArgs},
		{Dst: s.ranksT, N: sizeRank * uint64(len(s.ranks))}}
}

// LaunchImages are a held launch's images (HoldCopies) for its buffers.
func (ss *StreamSession) LaunchImages(args []byte, in, out DevPtr, bufs [][2]DevPtr) [][]byte {
	return [][]byte{make([]byte, 4), args, ss.setBuffers(in, out, bufs)}
}

// WriteRankTable writes the rank table of a launch's buffers, from its
// gate on the stream (a Gater's).
func (ss *StreamSession) WriteRankTable(in, out DevPtr, bufs [][2]DevPtr) error {
	return ss.s.d.HtoD(ss.s.ranksT, ss.setBuffers(in, out, bufs))
}

// AbortImages are the images (HoldCopies) a gated launch gets when its
// call fails (a mismatch, a refusal, a timeout, the communicator's end):
// the abort word raised, and arguments whose every block has no op, so
// that the kernel writes nothing (it runs its ops before it would see
// the abort word, which it reads only while it waits). Their block
// records are the zeroed table of NoOps; the rank table is the one of
// the buffers last set.
func (ss *StreamSession) AbortImages(args []byte) ([][]byte, error) {
	s, m, grid := ss.s, ss.s.mp, ss.Grid()
	if ss.noOps == nil || ss.noOps.Len() < uint64(grid)*sizeBlock {
		return nil, ss.errorf("no empty block table for an aborted launch of %d blocks", grid)
	}
	var a mgArgs
	if err := binary.Read(bytes.NewReader(args), binary.LittleEndian, &a); err != nil {
		return nil, ss.errorf("the arguments of an aborted launch: %w", err)
	}
	a.Blocks = uint64(ss.noOps.Dev())
	a.Epoch, a.VTerms, a.VTable = 0, 0, 0
	m.mu.Lock()
	ranks := make([]mgRank, len(s.ranks))
	for r, rd := range s.ranks {
		ranks[r] = rd.rec
		ranks[r].Buf = m.base[r]
	}
	m.mu.Unlock()
	return [][]byte{{1, 0, 0, 0}, encode(a), encode(ranks)}, nil
}

// AbortLaunch makes a gated launch whose call failed harmless, from its
// gate on the stream: arguments with no op (AbortImages) and the abort
// word raised.
func (ss *StreamSession) AbortLaunch(args []byte) error {
	var errs []error
	img, err := ss.AbortImages(args)
	if err == nil {
		err = ss.s.d.HtoD(ss.s.args, img[1])
	}
	errs = append(errs, err, ss.s.abort())
	return errors.Join(errs...)
}

// Capture records a launch on stream st, which is being captured into a
// graph: the arguments and rank table from images of their own (the
// graph copies them at every replay), the cleared control word and
// progress records, the kernel. Nothing waits for it and nothing watches
// it here (Probe): a replay runs when the caller launches the graph. The
// kernel takes its LL flag from the session's epoch word. first says
// this is the session's first capture (set even when a later step
// failed: the session counts as captured from then on).
func (ss *StreamSession) Capture(ctx context.Context, st Stream, desc string, in, out DevPtr, bufs [][2]DevPtr) (first bool, err error) {
	s := ss.s
	if err := s.guard.Ready(ctx); err != nil {
		return false, err
	}
	fail := func(what string, err error) error {
		return ss.errorf("%s: capturing the launch: %s: %w", desc, what, err)
	}
	if s.epoch == 0 {
		return false, fail("the session", errors.New("it has no epoch word"))
	}
	ranks := ss.setBuffers(in, out, bufs)
	args := s.argsImage(ss.Grid())
	at := uint64(len(args)+63) &^ 63
	h, err := s.d.AllocHost(at + uint64(len(ranks)))
	if err != nil {
		return false, fail("allocating its images", err)
	}
	ss.images = append(ss.images, h)
	storeWords(h, 0, args)
	storeWords(h, at, ranks)
	first = !ss.captured
	ss.captured = true
	// The next launch outside the graph writes its own rank table.
	s.ranksImg = nil
	return first, ss.record(st, h, at, uint64(len(args)), uint64(len(ranks)), fail)
}

// record enqueues a captured launch from its images in h: the rank table
// at at, the arguments at 0.
func (ss *StreamSession) record(st Stream, h HostMem, at, nargs, nranks uint64, fail func(string, error) error) error {
	s, grid := ss.s, ss.Grid()
	if err := ss.sd.UseStream(st); err != nil {
		return fail("the stream", err)
	}
	if err := s.d.Enqueue(s.ranksT, h, at, nranks); err != nil {
		return fail("the rank table", err)
	}
	if grid == 0 {
		return nil
	}
	if err := s.d.Enqueue(s.args, h, 0, nargs); err != nil {
		return fail("the arguments", err)
	}
	if err := s.d.Zero(s.ctl, sizeControl+uint64(grid)*sizeProgress); err != nil {
		return fail("clearing the progress records", err)
	}
	if err := s.d.Launch(grid, s.threads, int(s.tabs.shmem), s.args); err != nil {
		return fail(fmt.Sprintf("the kernel (%d blocks)", grid), err)
	}
	return nil
}

// Progress is what a session's progress records say of a launch that no
// call made (a replay of a captured one), read by Probe.
type Progress struct {
	// Marks are the blocks' heartbeats: a replay whose marks do not
	// change for a while is not moving.
	Marks []uint64
	// Running: some block started (running or waiting) and has not
	// ended. Moving: some block is running or not started, rather than
	// waiting.
	Running bool
	Moving  bool
	// Err is the failed read of the records, which then read as none.
	Err error

	wd *watchdog
	ps []mgProgress
}

// Probe reads the session's progress records (on the watch stream: a
// replay runs meanwhile).
func (ss *StreamSession) Probe() Progress {
	wd := &watchdog{s: ss.s, grid: ss.Grid()}
	ps := wd.read()
	p := Progress{wd: wd, ps: ps, Running: replayRunning(ps), Err: wd.readErr}
	p.Marks, p.Moving = wd.progress(ps)
	return p
}

// Deadlock describes every unfinished block the records showed.
func (p Progress) Deadlock() *executor.DeadlockError { return p.wd.deadlock(p.ps) }

// replayRunning reports whether progress records show a launch under
// way: some block started (running or waiting) and not yet ended. All
// records cleared is a launch not started or none at all.
func replayRunning(ps []mgProgress) bool {
	for _, p := range ps {
		if p.State == stRunning || p.State == stWaiting {
			return true
		}
	}
	return false
}

// StopReplay raises the abort word of a replayed launch again and again
// (as the watchdog does) until its records show it ended, at most the
// deadlock timeout and a margin, or until quit (nil: never) is closed:
// the caller then stops the replay itself.
func (ss *StreamSession) StopReplay(quit <-chan struct{}) error {
	s := ss.s
	wd := &watchdog{s: s, grid: ss.Grid()}
	bound := s.timeout + 5*time.Second
	end := time.Now().Add(bound)
	for replayRunning(wd.read()) {
		select {
		case <-quit:
			return nil
		default:
		}
		if err := s.abort(); err != nil {
			return err
		}
		if time.Now().After(end) {
			return ss.errorf("a replayed launch has not ended %v after the abort (its memory stays until the process ends)", bound)
		}
		time.Sleep(time.Millisecond)
	}
	return wd.readErr
}

// Close frees the captured launches' images, the rank table images and
// the empty block table, and closes the rank session (tables, scratch,
// the peers' mappings, its proxy and watch). The caller has waited for
// its launches to end.
func (ss *StreamSession) Close() error {
	var errs []error
	for _, h := range ss.images {
		if err := h.Free(); err != nil {
			errs = append(errs, fmt.Errorf("freeing a captured launch's images: %w", err))
		}
	}
	for _, t := range ss.tables {
		if err := t.h.Free(); err != nil {
			errs = append(errs, fmt.Errorf("freeing a rank table image: %w", err))
		}
	}
	if ss.noOps != nil {
		if err := ss.noOps.Free(); err != nil {
			errs = append(errs, fmt.Errorf("freeing the empty block table: %w", err))
		}
	}
	ss.images, ss.tables, ss.noOps = nil, nil, nil
	if err := ss.rs.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
