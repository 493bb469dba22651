package gpu

// run.go holds one launch: the per-launch arguments, the kernel launch,
// one proxy goroutine per rank that has port channels (serving its FIFO
// in order: copies, flags to the peer's inbound counter, syncs), and the
// watchdog that reads every block's progress record and stops a launch
// that makes no progress, with a report of every unfinished block.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// run launches the kernel once with the session's current buffers. On
// the kernel's stream, without waiting: the rank table when a buffer has
// moved, the launch arguments (from the host staging), the progress
// records and abort word cleared, the kernel; with Config.Graph the last
// three are a captured graph, replayed.
func (s *session) run(ctx context.Context) error {
	grid := len(s.tabs.blocks)
	if s.mp == nil {
		// A rank session wrote its table once, at Open (rank.go).
		ranks := make([]mgRank, len(s.ranks))
		for r, rd := range s.ranks {
			ranks[r] = rd.rec
			ranks[r].Buf = [3]uint64{uint64(s.bufs[r].in), uint64(s.bufs[r].out), uint64(rd.scratch)}
		}
		img := encode(ranks)
		if !bytes.Equal(img, s.ranksImg) {
			s.stage(ranksAt, img)
			if err := s.d.Enqueue(s.ranksT, s.host, ranksAt, uint64(len(img))); err != nil {
				return fmt.Errorf("%s: writing the rank table: %w", s.name, err)
			}
			s.ranksImg = img
		}
	}
	s.stageArgs(grid)
	if grid == 0 {
		return nil
	}
	// Room for every block beside the device's other launches (admit.go).
	release, err := s.admit(ctx)
	if err != nil {
		return err
	}
	defer release()
	start := time.Now()
	if err := s.launch(grid); err != nil {
		return fmt.Errorf("%s: launch of %d blocks of %d threads: %w", s.name, grid, s.threads, err)
	}
	return s.complete(ctx, grid, start, release)
}

// stageArgs writes the launch arguments into the host staging.
func (s *session) stageArgs(grid int) { s.stage(argsAt, s.argsImage(grid)) }

// argsImage is the image of the launch arguments. With an epoch word
// (a communicator's session) the kernel takes the flag and the scratch
// half from the device instead.
func (s *session) argsImage(grid int) []byte {
	var so uint64
	if s.double && s.flag%2 == 0 {
		so = s.half
	}
	var half uint64
	if s.double {
		half = s.half
	}
	flag := s.flag
	if s.epoch != 0 {
		// The kernel takes both from the epoch word: the arguments stay
		// the same from launch to launch.
		flag, so = 0, 0
	}
	args := mgArgs{
		Epoch: uint64(s.epoch), ScratchHalf: half,
		Blocks: uint64(s.tblDev.blocks), Ops: uint64(s.tblDev.ops), Regions: uint64(s.tblDev.regions),
		IDs: uint64(s.tblDev.ids), Ranks: uint64(s.ranksT), Progress: uint64(s.ctl) + progressOff,
		Control: uint64(s.ctl), ScratchOffset: so,
		NBlocks: uint32(grid), NRanks: uint32(len(s.ranks)), Flag: flag, DType: s.dtype,
		Packet: uint32(s.packet), Shmem: uint32(s.tabs.shmem),
		RedOp: uint32(s.opts.Reduce),
	}
	args.VTerms, args.VTable = s.varArgs()
	return encode(args)
}

// complete serves a launched kernel until it has ended: the proxies of
// the local ranks with port channels and the watchdog, then the drain of
// the FIFOs and, in a rank session, the fence with the peers; release
// gives back the launch's admission once the kernel has ended.
func (s *session) complete(ctx context.Context, grid int, start time.Time, release func()) error {
	// Proxies and the watchdog run until the kernel has ended.
	kernelDone := make(chan struct{})
	var wg sync.WaitGroup
	var perr proxyErrors
	var proxies []*proxy
	for r, rd := range s.ranks {
		if len(rd.ri.PortChannels) == 0 || !s.local(r) {
			continue
		}
		p := &proxy{s: s, rank: r, rd: rd, drain: make(chan uint64, 1)}
		proxies = append(proxies, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.serve(kernelDone); err != nil {
				perr.add(err)
				if aerr := s.abort(); aerr != nil { // the kernel may wait for this proxy
					perr.add(aerr)
				}
			}
		}()
	}
	wd := &watchdog{s: s, grid: grid, proxies: proxies}
	if s.mp != nil {
		s.mp.started(wd)
	}
	if s.watcher == nil {
		s.watcher = newWatcher()
	}
	wdDone := s.watcher.begin(watchJob{wd: wd, ctx: ctx, kernelDone: kernelDone})

	werr := s.d.Wait()
	release()
	s.kernelTime = time.Since(start)
	close(kernelDone)
	<-wdDone
	// Drain: every trigger pushed before the kernel ended is served.
	for _, p := range proxies {
		head := make([]byte, 8)
		if err := s.d.DtoH(head, DevPtr(p.rd.rec.FifoHead)); err != nil {
			perr.add(fmt.Errorf("%s: reading rank %d's FIFO head: %w", s.name, p.rank, err))
			p.drain <- p.rd.tail
			continue
		}
		p.drain <- binary.LittleEndian.Uint64(head)
	}
	wg.Wait()
	if s.mp != nil {
		// Every transfer to another process is applied there before the
		// launch counts as finished; then the job's verdict, if any.
		if werr == nil && perr.first() == nil && wd.result() == nil {
			if err := s.mp.send.Fence(ctx); err != nil {
				perr.add(fmt.Errorf("%s: rank %d: waiting for peers to apply port traffic: %w", s.name, s.mp.rank, err))
			}
		}
		if v := s.mp.ended(); v != nil && wd.result() == nil {
			wd.reason = v
		}
	}
	if werr != nil {
		return fmt.Errorf("%s: kernel: %w", s.name, werr)
	}
	if err := perr.first(); err != nil {
		return err
	}
	return wd.result()
}

type proxyErrors struct {
	mu   sync.Mutex
	errs []error
}

func (e *proxyErrors) add(err error) {
	e.mu.Lock()
	e.errs = append(e.errs, err)
	e.mu.Unlock()
}

func (e *proxyErrors) first() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

// proxy serves one rank's FIFO.
type proxy struct {
	s     *session
	rank  int
	rd    *rankDev
	drain chan uint64 // the FIFO head once the kernel has ended
	// handled counts the triggers handled, busy is set while one is: the
	// watchdog's view of the proxy's progress.
	handled atomic.Uint64
	busy    atomic.Bool
}

// serve handles triggers in FIFO order until the kernel has ended and
// every pushed trigger is handled.
func (p *proxy) serve(kernelDone <-chan struct{}) error {
	h := p.s.host
	final := ^uint64(0)
	idle := 0
	for {
		if p.rd.tail >= final {
			return nil
		}
		slot := p.rd.fifoOff + 32 + (p.rd.tail%fifoDepth)*32
		w3 := h.Load(slot + 24)
		commit := ((p.rd.tail / fifoDepth) & 1) ^ 1
		if w3>>63 == commit {
			p.busy.Store(true)
			err := p.handle(h.Load(slot), h.Load(slot+8), h.Load(slot+16), w3)
			p.busy.Store(false)
			p.handled.Add(1)
			if err != nil {
				return err
			}
			p.rd.tail++
			h.Store(p.rd.fifoOff, p.rd.tail)
			idle = 0
			// The kernel reads the tail's device replica: post it once
			// no further trigger is ready (or every 64), after the
			// transfers on the proxy's stream.
			next := p.rd.fifoOff + 32 + (p.rd.tail%fifoDepth)*32 + 24
			if p.rd.tail%64 == 0 || h.Load(next)>>63 != ((p.rd.tail/fifoDepth)&1)^1 {
				if err := p.s.d.Post(DevPtr(p.rd.rec.FifoTail), p.rd.tail); err != nil {
					return fmt.Errorf("%s: proxy of rank %d: posting the FIFO tail: %w", p.s.name, p.rank, err)
				}
			}
			continue
		}
		select {
		case f := <-p.drain:
			final = f
			continue
		default:
		}
		idle++
		switch {
		case idle < 64:
		case idle < 1024:
			time.Sleep(time.Microsecond)
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// handle performs one trigger: DATA copies, FLAG raises the peer's
// inbound counter once the copies before it are complete, SYNC waits
// for every earlier copy.
func (p *proxy) handle(dst, src, size, w3 uint64) error {
	kind := w3 & 0xff
	ch := int((w3 >> 8) & 0xffffffff)
	d := p.s.d
	if mp := p.s.mp; mp != nil {
		return mp.handle(p.s, dst, src, size, kind, ch)
	}
	if kind&trigData != 0 && size > 0 {
		if err := d.Copy(DevPtr(dst), DevPtr(src), size, kind&trigPackets != 0); err != nil {
			return fmt.Errorf("%s: proxy of rank %d: copy of %d bytes: %w", p.s.name, p.rank, size, err)
		}
	}
	// A FLAG is posted on the proxy's stream after the copies before it,
	// which orders it after them; a SYNC waits for them.
	if kind&trigSync != 0 {
		if err := d.Fence(); err != nil {
			return fmt.Errorf("%s: proxy of rank %d: %w", p.s.name, p.rank, err)
		}
	}
	if kind&trigFlag != 0 {
		ri := p.rd.ri
		if ch < 0 || ch >= len(ri.PortChannels) {
			return fmt.Errorf("%s: proxy of rank %d: trigger on port channel %d of %d", p.s.name, p.rank, ch, len(ri.PortChannels))
		}
		if end := ri.PortChannels[ch]; end.PeerIndex >= 0 {
			if err := p.s.raisePort(end.Peer, end.PeerIndex); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchdog stops a launch that makes no progress for the session's
// timeout, or whose context ends. Progress is a heartbeat of a block, a
// trigger handled by a proxy, or anything still running: a block not yet
// started or in MG_RUNNING state, a proxy in the middle of a trigger. A
// launch is stopped when, for the whole timeout, every unfinished block
// was waiting (spinning in a poll) and nothing else moved.
type watchdog struct {
	s        *session
	grid     int
	proxies  []*proxy
	reason   error
	snapshot []mgProgress
	readErr  error // the last failed read of the progress records
}

// progress returns the launch's progress counters and whether anything is
// running. Records that all say ended are the previous launch's: this
// one has not started (its clear of the records is still queued on the
// stream behind other work), which counts as running, as a block not
// started does; the watch of a launch ends when its kernel has.
func (w *watchdog) progress(ps []mgProgress) (marks []uint64, running bool) {
	ended := len(ps) > 0
	for _, p := range ps {
		marks = append(marks, uint64(p.Beat))
		if p.State == stIdle || p.State == stRunning {
			running = true
		}
		if p.State != stDone && p.State != stAborted {
			ended = false
		}
	}
	running = running || ended
	for _, p := range w.proxies {
		marks = append(marks, p.handled.Load())
		if p.busy.Load() {
			running = true
		}
	}
	return marks, running
}

// read copies the progress records out of device memory (on the watch
// stream: the kernel runs meanwhile). A failed copy reads as no record
// and is kept as the watchdog's error.
func (w *watchdog) read() []mgProgress {
	out := make([]mgProgress, w.grid)
	buf := make([]byte, w.grid*sizeProgress)
	if err := w.s.d.Peek(buf, w.s.ctl+progressOff); err != nil {
		w.readErr = fmt.Errorf("%s: reading the progress records: %w", w.s.name, err)
		return out
	}
	for b := range out {
		at := buf[b*sizeProgress:]
		u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(at[i:]) }
		out[b] = mgProgress{
			Op: u32(0), Iter: int32(u32(4)), State: u32(8), Beat: u32(12),
			WaitKind: u32(16), WaitA: u32(20), WaitCt: u32(24),
			WaitExpect: binary.LittleEndian.Uint64(at[32:]), WaitGot: binary.LittleEndian.Uint64(at[40:]),
			WaitAt: binary.LittleEndian.Uint64(at[48:]),
		}
	}
	return out
}

// watcher runs a session's watchdogs on one goroutine, started at its
// first launch and ended with it (release): a launch hands its watchdog
// over and waits for the watch to return once its kernel has ended,
// with no goroutine or ticker of its own. A session's launches are
// served one at a time, so one watch runs at once.
type watcher struct {
	mu     sync.Mutex
	closed bool
	jobs   chan watchJob // capacity 1; closed with the session (stop)
	done   chan struct{} // capacity 1: the watch handed over returned
}

// begin starts job's watch and returns what receives once it has
// returned: on the watcher's goroutine, or on one of its own once the
// watcher was stopped (a session closed under a launch).
func (w *watcher) begin(job watchJob) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.jobs <- job
		return w.done
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(job.wd.period())
		defer tk.Stop()
		job.wd.watch(job.ctx, job.kernelDone, tk.C)
	}()
	return done
}

// stop ends the watcher's goroutine once the watch handed over, if
// any, has returned.
func (w *watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.jobs)
	}
}

// watchJob is a launch's watch.
type watchJob struct {
	wd         *watchdog
	ctx        context.Context
	kernelDone <-chan struct{}
}

func newWatcher() *watcher {
	w := &watcher{jobs: make(chan watchJob, 1), done: make(chan struct{}, 1)}
	go w.run()
	return w
}

func (w *watcher) run() {
	var tk *time.Ticker
	for j := range w.jobs {
		tick := j.wd.period()
		if tk == nil {
			tk = time.NewTicker(tick)
		} else {
			tk.Reset(tick)
		}
		j.wd.watch(j.ctx, j.kernelDone, tk.C)
		tk.Stop() // (no tick of this watch reaches the next: Go 1.23's timers)
		w.done <- struct{}{}
	}
}

// period is how often the watch reads the progress records.
func (w *watchdog) period() time.Duration { return max(w.s.timeout/16, time.Millisecond) }

func (w *watchdog) watch(ctx context.Context, kernelDone <-chan struct{}, ticks <-chan time.Time) {
	var last []uint64
	since := time.Now()
	for {
		select {
		case <-kernelDone:
			return
		case <-ctx.Done():
			w.snapshot = w.read()
			w.reason = fmt.Errorf("%s: launch canceled: %w", w.s.name, context.Cause(ctx))
			w.raise(kernelDone)
			return
		case now := <-ticks:
			cur := w.read()
			marks, running := w.progress(cur)
			moved := running || !slices.Equal(marks, last)
			if moved {
				last, since = marks, now
			}
			if w.s.mp != nil {
				// Across processes the job-wide watch decides (rank.go):
				// it sees this rank's progress.
				if moved {
					w.s.mp.moved()
				}
				continue
			}
			if moved {
				continue
			}
			if now.Sub(since) < w.s.timeout {
				continue
			}
			w.snapshot = cur
			w.reason = w.deadlock(cur)
			w.raise(kernelDone)
			return
		}
	}
}

// raise aborts the kernel and waits for its end, saying so if it does
// not end within the timeout after the abort.
//
// The abort word is written again every few milliseconds until the kernel
// ends: a launch still queued behind the caller's work clears the word
// when its turn comes (the clear is on the kernel's stream), which would
// lose a single write, and the kernel would then wait for ever.
func (w *watchdog) raise(kernelDone <-chan struct{}) {
	bound := w.s.timeout + 5*time.Second
	end := time.NewTimer(bound)
	defer end.Stop()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	poke := true
	for {
		if poke {
			if err := w.s.abort(); err != nil {
				w.reason = errors.Join(w.reason, err)
				poke = false
			}
		}
		select {
		case <-kernelDone:
			return
		case <-tk.C:
		case <-end.C:
			w.reason = errors.Join(w.reason, fmt.Errorf("%s: the kernel has not ended %v after the abort", w.s.name, bound))
			<-kernelDone
			return
		}
	}
}

func (w *watchdog) result() error {
	if w.reason == nil && w.readErr != nil {
		return w.readErr
	}
	return w.reason
}

// launch puts the launch's work on the kernel's stream: the arguments
// from the staging, the cleared control word and progress records, the
// kernel; captured once and replayed with Config.Graph.
func (s *session) launch(grid int) error { return s.launchGated(grid, nil) }

// launchGated is launch with gate (nil: none) called between the cleared
// control word and the kernel, to enqueue there what holds the kernel
// for the host (gpu.Gater, gpu.Holder); not with Config.Graph.
func (s *session) launchGated(grid int, gate func() error) error {
	if !s.useGraph {
		if b, ok := s.d.(Batcher); ok {
			// The batch's function is bound once per session, and the
			// launch it enqueues is passed beside it: no closure per call.
			if s.enqueueFn == nil {
				s.enqueueFn = s.enqueuePending
			}
			s.pending = pendingLaunch{grid: grid, gate: gate}
			err := b.Batch(s.enqueueFn)
			s.pending = pendingLaunch{}
			return err
		}
		return s.enqueue(grid, gate)
	}
	if s.graph == nil {
		if err := s.d.BeginCapture(); err != nil {
			return fmt.Errorf("beginning the capture: %w", err)
		}
		err := s.enqueue(grid, gate)
		g, eerr := s.d.EndCapture()
		if err != nil {
			if g != nil {
				_ = g.Release()
			}
			return err
		}
		if eerr != nil {
			return fmt.Errorf("ending the capture: %w", eerr)
		}
		s.graph = g
	}
	return s.d.Replay(s.graph)
}

// pendingLaunch is the launch launchGated is enqueueing in a batch.
type pendingLaunch struct {
	grid int
	gate func() error
}

func (s *session) enqueuePending() error { return s.enqueue(s.pending.grid, s.pending.gate) }

// enqueue puts the launch on the kernel's stream: the arguments, the
// cleared progress records, the gate if any, the kernel.
func (s *session) enqueue(grid int, gate func() error) error {
	if err := s.d.Enqueue(s.args, s.host, argsAt, sizeArgs); err != nil {
		return fmt.Errorf("writing the launch arguments: %w", err)
	}
	if err := s.d.Zero(s.ctl, sizeControl+uint64(grid)*sizeProgress); err != nil {
		return fmt.Errorf("clearing the progress records: %w", err)
	}
	if gate != nil {
		if s.useGraph {
			return fmt.Errorf("the %T driver cannot hold a captured stream for the host", s.d)
		}
		if err := gate(); err != nil {
			return fmt.Errorf("holding the stream for the call's peers: %w", err)
		}
	}
	return s.d.Launch(grid, s.threads, int(s.tabs.shmem), s.args)
}

// deadlock describes every unfinished block of a snapshot.
func (w *watchdog) deadlock(ps []mgProgress) *executor.DeadlockError {
	e := &executor.DeadlockError{}
	for b, p := range ps {
		if p.State == stDone {
			continue
		}
		blk := w.s.tabs.blocks[b]
		bt := executor.BlockedTB{Rank: int(blk.Rank), TB: int(blk.TB), Op: "start"}
		if p.Op > 0 && int(p.Op) <= len(w.s.tabs.refs[b]) {
			bt.Op = w.s.tabs.refs[b][p.Op-1].Describe()
		}
		bt.Waiting = w.describe(int(blk.Rank), p)
		if p.State == stWaiting && p.WaitKind == waitPacket {
			pw := packetWait(p)
			bt.Packet = &pw
		}
		if p.Iter >= 0 && p.Op > 0 {
			bt.Waiting += fmt.Sprintf(" (pipeline iteration %d)", p.Iter)
		}
		e.Blocked = append(e.Blocked, bt)
	}
	return e
}

func (w *watchdog) describe(rank int, p mgProgress) string {
	if p.State != stWaiting {
		return fmt.Sprintf("no progress for %v", w.s.timeout)
	}
	switch p.WaitKind {
	case waitChannel:
		ct := plan.ChannelType(p.WaitCt)
		chs := w.s.ranks[rank].ri.MemoryChannels
		if ct == plan.Port {
			chs = w.s.ranks[rank].ri.PortChannels
		}
		if int(p.WaitA) < len(chs) {
			end := chs[p.WaitA]
			if end.PeerIndex < 0 {
				return fmt.Sprintf("unpaired channel: rank %d declares no channel to rank %d paired with %s channel %d",
					end.Peer, rank, ct, p.WaitA)
			}
			return fmt.Sprintf("%s channel %d from rank %d expects signal %d, has %d", ct, p.WaitA, end.Peer, p.WaitExpect, p.WaitGot)
		}
		return fmt.Sprintf("%s channel %d expects signal %d, has %d", ct, p.WaitA, p.WaitExpect, p.WaitGot)
	case waitPacket:
		return packetWait(p).String()
	case waitBarrier:
		return fmt.Sprintf("barrier %d: %d of %d thread blocks arrived", p.WaitA, p.WaitGot, p.WaitExpect)
	case waitSem:
		return fmt.Sprintf("semaphore %d value %d, waits for %d", p.WaitA, int64(p.WaitGot), int64(p.WaitExpect))
	case waitProxy:
		return fmt.Sprintf("proxy of rank %d completed %d triggers, waits for trigger %d", rank, p.WaitGot, p.WaitExpect)
	case waitFIFO:
		return fmt.Sprintf("FIFO of rank %d is full: trigger %d waits for the proxy at %d", rank, p.WaitExpect, p.WaitGot)
	}
	return fmt.Sprintf("no progress for %v", w.s.timeout)
}

// packetWait is the packet slot a block waiting on one (p) waits on: the
// record the CPU backend gives for the same wait.
func packetWait(p mgProgress) executor.PacketWait {
	return executor.PacketWait{Buffer: plan.BufferType(p.WaitA), Offset: p.WaitAt, Got: p.WaitGot, Want: p.WaitExpect}
}
