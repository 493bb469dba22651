//go:build cgo

package emu

// streams.go holds the emulated device's streams: queues of work that a
// goroutine each runs in order, as a GPU runs a stream's work. The
// drivers of Streams.Open launch on them (gpu.StreamDriver), so that a
// communicator's collective is enqueued on its caller's stream and the
// call returns at once.

/*
#include <sched.h>
#include <stdint.h>
uint64_t mg_emu_launch(void* d, int entry, unsigned grid, unsigned block, unsigned shmem, uint64_t args, int count);
void mg_emu_wait(uint64_t h);
void mg_emu_zero(uint64_t dst, uint64_t n);
void mg_emu_copy(void* d, uint64_t dst, uint64_t src, uint64_t n, int packets);
uint64_t mg_emu_range(uint64_t p, uint64_t* n);
uint64_t mg_emu_alloc_id(uint64_t p);
// mg_emu_span is mg_emu_range's answer by value: a Go caller's pointer
// argument would escape to the heap on every look-up.
typedef struct { uint64_t base, n; } mg_emu_span;
static inline mg_emu_span mg_emu_range_of(uint64_t p) {
  mg_emu_span s;
  s.n = 0;
  s.base = mg_emu_range(p, &s.n);
  return s;
}
uint64_t mg_emu_alloc(uint64_t n, int mode);
void mg_emu_free(uint64_t p, int mode);
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
)

// Streams are the streams of the emulated device, numbered from 1; stream
// 0 is the default stream. Close ends them.
type Streams struct {
	mu     sync.Mutex
	m      map[gpu.Stream]*stream
	next   gpu.Stream
	closed bool
	adopt  bool // any handle names a stream, made on first use
	// spin bounds the streams' goroutines that spin before they park
	// (stream.spin) to one less than the Go runtime's processors, so
	// that a caller entering Go from its own thread finds one free.
	spin spinners
}

// spinners counts the goroutines spinning, at most max at once.
type spinners struct {
	n   atomic.Int32
	max int32
}

// enter reports whether one more may spin, counting it if so.
func (sp *spinners) enter() bool {
	if sp.n.Add(1) > sp.max {
		sp.n.Add(-1)
		return false
	}
	return true
}

func (sp *spinners) exit() { sp.n.Add(-1) }

// NewStreams returns a set of streams with only the default one.
func NewStreams() *Streams {
	ss := &Streams{m: map[gpu.Stream]*stream{}, next: 1}
	ss.spin.max = int32(runtime.GOMAXPROCS(0) - 1)
	return ss
}

// New returns a new stream.
func (ss *Streams) New() (gpu.Stream, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return 0, errors.New("gpu-emu: the streams are closed")
	}
	st := ss.next
	ss.next++
	ss.m[st] = newStream(st, &ss.spin)
	return st, nil
}

// get returns stream st (0, the default stream, is made on first use).
func (ss *Streams) get(st gpu.Stream) (*stream, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, errors.New("gpu-emu: the streams are closed")
	}
	s, ok := ss.m[st]
	if !ok && (st == 0 || ss.adopt) {
		s = newStream(st, &ss.spin)
		ss.m[st] = s
		ok = true
	}
	if !ok {
		return nil, fmt.Errorf("gpu-emu: no stream %d", st)
	}
	return s, nil
}

// Adopt makes every handle name a stream, made on first use (as a
// library that is handed its caller's streams must take them).
func (ss *Streams) Adopt() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.adopt = true
}

// Do enqueues f on stream st: it runs after the work enqueued there
// before it (the caller's own work, e.g. filling a buffer).
func (ss *Streams) Do(st gpu.Stream, f func()) error {
	s, err := ss.get(st)
	if err != nil {
		return err
	}
	return s.push("host work", func() error { f(); return nil })
}

// StreamGraph is the work recorded on a stream between BeginCapture and
// EndCapture, as a CUDA graph holds a captured stream's work.
type StreamGraph struct {
	work []func() error
}

// BeginCapture makes the work later enqueued on st recorded instead of
// run, until EndCapture. The default stream cannot be captured (CUDA's
// legacy stream cannot).
func (ss *Streams) BeginCapture(st gpu.Stream) error {
	if st == 0 {
		return errors.New("gpu-emu: the default stream cannot be captured")
	}
	s, err := ss.get(st)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture != nil {
		return fmt.Errorf("gpu-emu: stream %d is already capturing", st)
	}
	s.capture = &StreamGraph{}
	return nil
}

// EndCapture ends st's capture and returns the recorded work.
func (ss *Streams) EndCapture(st gpu.Stream) (*StreamGraph, error) {
	s, err := ss.get(st)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture == nil {
		return nil, fmt.Errorf("gpu-emu: stream %d is not capturing", st)
	}
	g := s.capture
	s.capture = nil
	return g, nil
}

// Capturing reports whether st is capturing.
func (ss *Streams) Capturing(st gpu.Stream) (bool, error) {
	s, err := ss.get(st)
	if err != nil {
		return false, err
	}
	return s.capturing(), nil
}

// Replay enqueues a captured graph's work on st, in order.
func (ss *Streams) Replay(g *StreamGraph, st gpu.Stream) error {
	s, err := ss.get(st)
	if err != nil {
		return err
	}
	for _, f := range g.work {
		if err := s.push("a replayed graph's work", f); err != nil {
			return err
		}
	}
	return nil
}

// Synchronize waits until every piece of work enqueued on st so far has
// run, at most timeout, and returns the first error of that work. A
// capturing stream cannot be synchronised (as in CUDA).
func (ss *Streams) Synchronize(st gpu.Stream, timeout time.Duration) error {
	s, err := ss.get(st)
	if err != nil {
		return err
	}
	if s.capturing() {
		return fmt.Errorf("gpu-emu: stream %d is capturing: it cannot be synchronised", st)
	}
	done := make(chan struct{})
	if err := s.push("synchronize", func() error { close(done); return nil }); err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return fmt.Errorf("gpu-emu: stream %d: its work has not ended within %v", st, timeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err, s.err = s.err, nil
	return err
}

// Close ends the streams' goroutines once their work has run.
func (ss *Streams) Close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return
	}
	ss.closed = true
	for _, s := range ss.m {
		s.close()
	}
}

// Open returns a new emulated device (as emu.Open) that launches on these
// streams.
func (ss *Streams) Open() (gpu.Driver, error) { return ss.open(false) }

// OpenIPC returns a new emulated device (as emu.OpenIPC) that launches
// on these streams.
func (ss *Streams) OpenIPC() (gpu.Driver, error) { return ss.open(true) }

func (ss *Streams) open(ipc bool) (gpu.Driver, error) {
	d, err := newDriver(ipc)
	if err != nil {
		return nil, err
	}
	d.streams = ss
	return d, nil
}

// stream is one queue of work and its goroutine.
type stream struct {
	id     gpu.Stream
	mu     sync.Mutex
	work   []streamOp
	wake   chan struct{} // one token: work was added, or closed
	closed bool
	// running: the goroutine has taken a piece of work off the queue and
	// runs it (the queue may then be empty).
	running bool
	err     error // the first failed work's, until Synchronize
	// capture records the work pushed while the stream captures
	// (BeginCapture), instead of running it; nil otherwise.
	capture *StreamGraph
	// held: work is being added in a batch (driver.Batch); the stream's
	// goroutine is woken once, when the batch ends.
	held bool
	// parked: the stream's goroutine waits on wake; only then does
	// adding work send it a token (a goroutine wake, which in a process
	// whose runtime is otherwise idle costs the caller a futex call and
	// a context switch). wakes counts those tokens.
	parked bool
	wakes  uint64
	// posts counts the work made runnable (a push outside a batch, a
	// batch's end): the goroutine, spinning before it parks, watches it.
	posts    atomic.Uint64
	spinners *spinners // the streams' bound on spinning goroutines
}

// streamSpin is how long a stream's goroutine that ran out of work keeps
// looking for more before it parks: a caller that enqueues its next
// launch soon after its stream drained (a framework's steady loop) finds
// it running and wakes nothing.
const streamSpin = 100 * time.Microsecond

func (s *stream) capturing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capture != nil
}

func newStream(id gpu.Stream, spin *spinners) *stream {
	s := &stream{id: id, wake: make(chan struct{}, 1), spinners: spin}
	go s.run()
	return s
}

func (s *stream) push(what string, f func() error) error {
	return s.pushOp(what, streamOp{kind: opFunc, f: f})
}

// opKind says what a stream's piece of work does.
type opKind uint8

const (
	opFunc   opKind = iota // f
	opCopy                 // copy n bytes from src to dst
	opZero                 // clear n bytes at dst
	opGate                 // gate (the host's, gpu.Gater)
	opLaunch               // launch, whose done it signals
)

// streamOp is a piece of a stream's work, held by value: the driver's
// steady copies, memsets, gates and launches make no closure.
type streamOp struct {
	kind        opKind
	f           func() error
	gate        func()
	dst, src, n uint64
	launch      *streamLaunch
}

func (o streamOp) run() error {
	switch o.kind {
	case opCopy:
		if o.n > 0 {
			C.mg_emu_copy(nil, C.uint64_t(o.dst), C.uint64_t(o.src), C.uint64_t(o.n), 0)
		}
	case opZero:
		if o.n > 0 {
			C.mg_emu_zero(C.uint64_t(o.dst), C.uint64_t(o.n))
		}
	case opGate:
		o.gate()
	case opLaunch:
		l := o.launch
		l.err = l.run()
		err := l.err
		l.done <- struct{}{} // (l may be reused once Wait has it)
		return err
	default:
		return o.f()
	}
	return nil
}

func (s *stream) pushOp(what string, op streamOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("gpu-emu: %s on stream %d, which is closed", what, s.id)
	}
	if s.capture != nil {
		s.capture.work = append(s.capture.work, op.run)
		return nil
	}
	s.work = append(s.work, op)
	if !s.held {
		s.post()
	}
	return nil
}

// post tells the stream's goroutine that work can run: a token if it is
// parked, else the count it watches while it spins. The caller holds mu.
func (s *stream) post() {
	s.posts.Add(1)
	if !s.parked {
		return
	}
	s.parked = false
	s.wakes++
	s.signal()
}

// signal sends the stream's goroutine a token (one at most). The caller
// holds mu.
func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// spin waits, at most streamSpin, for work posted after seen, yielding
// the core to other goroutines and other threads meanwhile (the kernels
// of peers in other processes of a small machine need it); not if as
// many goroutines as the bound already spin.
func (s *stream) spin(seen uint64) {
	if !s.spinners.enter() {
		return
	}
	defer s.spinners.exit()
	deadline := time.Now().Add(streamSpin)
	for s.posts.Load() == seen && time.Now().Before(deadline) {
		runtime.Gosched()
		C.sched_yield()
	}
}

// hold starts a batch: the work pushed until release wakes the stream's
// goroutine once, at release (a goroutine already running takes it
// without).
func (s *stream) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
}

func (s *stream) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false
	if len(s.work) > 0 {
		s.post()
	}
}

// Batch runs f, which enqueues work on the chosen stream (gpu.Batcher):
// the stream starts on it once f has returned, woken once.
func (d *driver) Batch(f func() error) error {
	st := d.cur
	if st == nil || d.capture != nil {
		return f()
	}
	st.hold()
	defer st.release()
	return f()
}

var _ gpu.Batcher = (*driver)(nil)

func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.parked = false
	s.signal()
}

func (s *stream) run() {
	spun := false
	for {
		s.mu.Lock()
		if len(s.work) == 0 {
			if s.closed {
				s.mu.Unlock()
				return
			}
			if !spun {
				seen := s.posts.Load()
				s.mu.Unlock()
				s.spin(seen)
				spun = true
				continue
			}
			s.parked = true
			s.mu.Unlock()
			<-s.wake
			spun = false
			continue
		}
		spun = false
		// Taken from the front and the rest moved down (the queue is
		// short), so that its array is reused: no allocation per push.
		op := s.work[0]
		n := copy(s.work, s.work[1:])
		s.work[n] = streamOp{}
		s.work = s.work[:n]
		s.running = true
		s.mu.Unlock()
		err := op.run()
		s.mu.Lock()
		s.running = false
		if err != nil && s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
}

// freeAfter runs free once the work enqueued so far on every stream has
// run, at once where none is pending. CUDA's cuMemFree waits for the
// device's pending work, which may still copy to or from the memory (a
// communicator aborted with calls queued on its caller's stream frees
// its staging buffer under the copies of the calls not yet run); the
// emulated device's memory is the process's own, so a free that did not
// wait would leave those copies writing to unmapped pages. The wait is
// not the caller's: a marker at the end of each busy stream, the last
// one to run frees. A stream whose work never ends keeps the memory.
func (ss *Streams) freeAfter(free func()) {
	var left atomic.Int32
	left.Store(1) // the caller's, given back below
	last := func() error {
		if left.Add(-1) == 0 {
			free()
		}
		return nil
	}
	ss.mu.Lock()
	for _, s := range ss.m {
		s.mu.Lock()
		if len(s.work) > 0 || s.running {
			// Appended as is, not captured, and also on a closed
			// stream, whose goroutine ends only once its queue is
			// empty.
			left.Add(1)
			s.work = append(s.work, streamOp{kind: opFunc, f: last})
			if !s.held {
				s.post()
			}
		}
		s.mu.Unlock()
	}
	ss.mu.Unlock()
	_ = last()
}

// streamLaunch is a launch on a caller's stream: done gets a token when
// its kernel has ended, which Wait takes; the record is then reused.
type streamLaunch struct {
	done chan struct{}
	err  error
	// What it launches: the device, entry point, shape and arguments
	// (driver.Launch's), and whether the kernel counts host accesses.
	dev                unsafe.Pointer
	entry              C.int
	grid, block, shmem int
	args               gpu.DevPtr
	count              C.int
}

// UseStream sends the kernel stream's later work to stream st.
func (d *driver) UseStream(st gpu.Stream) error {
	if d.streams == nil {
		return errors.New("gpu-emu: this device was not opened from emu.Streams, so it has no caller's streams")
	}
	s, err := d.streams.get(st)
	if err != nil {
		return err
	}
	d.cur = s
	return nil
}

// launchOnStream enqueues the kernel on the chosen stream: it runs once
// the stream reaches it, and the stream goes on once it has ended.
func (d *driver) launchOnStream(grid, block, shmem int, args gpu.DevPtr) error {
	l := d.launchRecord()
	l.dev, l.entry, l.grid, l.block, l.shmem, l.args, l.count = d.dev, d.entry, grid, block, shmem, args, d.countFlags()
	if d.cur.capturing() {
		// Recorded into the caller's graph: it runs at each replay, and
		// nothing here waits for it.
		return d.cur.push("launch", func() error {
			if err := l.run(); err != nil {
				return fmt.Errorf("gpu-emu: a replayed launch: %w", err)
			}
			return nil
		})
	}
	if err := d.cur.pushOp("launch", streamOp{kind: opLaunch, launch: l}); err != nil {
		return err
	}
	d.streamMu.Lock()
	d.onStream = append(d.onStream, l)
	d.streamMu.Unlock()
	return nil
}

// run runs the launch's kernel and waits for it to end.
func (l *streamLaunch) run() error {
	h := C.mg_emu_launch(l.dev, l.entry, C.uint(l.grid), C.uint(l.block), C.uint(l.shmem), C.uint64_t(l.args), l.count)
	if h == 0 {
		return fmt.Errorf("could not start %d host threads", l.grid*l.block)
	}
	C.mg_emu_wait(h)
	return nil
}

// takeStreamLaunch removes and returns the oldest launch on a caller's
// stream not yet waited for, nil if none.
func (d *driver) takeStreamLaunch() *streamLaunch {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if len(d.onStream) == 0 {
		return nil
	}
	l := d.onStream[0]
	n := copy(d.onStream, d.onStream[1:])
	d.onStream[n] = nil
	d.onStream = d.onStream[:n]
	return l
}

// launchRecord returns a launch record whose launch was waited for, or
// a new one.
func (d *driver) launchRecord() *streamLaunch {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if n := len(d.freeLaunches); n > 0 {
		l := d.freeLaunches[n-1]
		d.freeLaunches = d.freeLaunches[:n-1]
		return l
	}
	return &streamLaunch{done: make(chan struct{}, 1)}
}

// waitStreamLaunch waits for launch l's kernel to end, then keeps the
// record for the next launch.
func (d *driver) waitStreamLaunch(l *streamLaunch) error {
	<-l.done
	err := l.err
	l.err = nil
	d.streamMu.Lock()
	d.freeLaunches = append(d.freeLaunches, l)
	d.streamMu.Unlock()
	return err
}

func (d *driver) streamLaunches() int {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	return len(d.onStream)
}

// AddressRange returns the memory file mapping (this process's, or a
// peer's opened through IPC) that holds p; heap memory (emu.Open's) is
// not known.
func (d *driver) AddressRange(p gpu.DevPtr) (gpu.DevPtr, uint64, bool, error) {
	sp := C.mg_emu_range_of(C.uint64_t(p))
	if sp.base == 0 {
		return 0, 0, false, nil
	}
	return gpu.DevPtr(sp.base), uint64(sp.n), true, nil
}

// AllocID returns the id of the shareable allocation (or opened peer
// mapping) that holds p (gpu.AllocIDer): one made where a freed one was
// has another, so that a communicator registers it anew with its peers
// in other processes, which would otherwise keep reading the freed one's
// memory.
func (d *driver) AllocID(p gpu.DevPtr) (uint64, error) {
	id := uint64(C.mg_emu_alloc_id(C.uint64_t(p)))
	if id == 0 {
		return 0, fmt.Errorf("gpu-emu: %#x is not in memory this device can share with other processes", uint64(p))
	}
	return id, nil
}

var _ gpu.AllocIDer = (*driver)(nil)

// Capturing reports whether the caller's stream st is capturing.
func (d *driver) Capturing(st gpu.Stream) (bool, error) {
	if d.streams == nil {
		return false, nil
	}
	return d.streams.Capturing(st)
}

var _ gpu.StreamDriver = (*driver)(nil)

// Gate holds the chosen stream until f has returned (gpu.Gater): the
// stream's goroutine runs it in order with the stream's other work.
func (d *driver) Gate(f func()) error {
	return d.streamOp("gate", streamOp{kind: opGate, gate: f})
}

var _ gpu.Gater = (*driver)(nil)

// AllocShared allocates n bytes of emulated device memory that peers in
// other processes can map (a drivers of OpenIPC's exports it), as a
// caller's cuMemAlloc would: the buffers of a library's caller.
func AllocShared(n uint64) (gpu.DevPtr, error) {
	p, errno := C.mg_emu_alloc(C.uint64_t(max(n, 1)), 1)
	if p == 0 {
		return 0, fmt.Errorf("gpu-emu: %w", allocError(n, errno))
	}
	return gpu.DevPtr(p), nil
}

// FreeShared frees memory of AllocShared.
func FreeShared(p gpu.DevPtr) { C.mg_emu_free(C.uint64_t(p), 1) }
