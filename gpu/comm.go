package gpu

// comm.go holds a communicator's rank on a device (NCCL's ncclComm_t): one
// rank of a job described by a rankwire.World, in a process of its own or
// as one of several threads of one process (ncclCommInitAll). Each call
// runs a plan instance on the caller's device buffers and stream:
//
//   - in the steady state (the plan instance's session open) the ranks do
//     not meet: each writes the call's record to its host's mailbox
//     (mailbox.go, shared memory) and queues it for the ranks on other
//     hosts (remote.go: a background sender, one message per remote
//     peer), and the launch waits on the caller's stream, behind a gate,
//     for the peers' records of the same call; a mismatch becomes every
//     rank's asynchronous error and the launch is aborted before its
//     kernel starts. The first call of a plan instance and a capture meet
//     over the bootstrap (one all-gather of a small record: the call, its
//     buffers, and the handles of buffers new to the peers), so a
//     mismatched call fails on every rank, named;
//   - a rank's buffers are registered with its peers on first use and
//     cached by address range (the allocation that holds them): a peer in
//     another process maps it with the driver's IPC handle once, a peer in
//     this process uses the address as it is (CUDA opens no handle in the
//     process that exported it);
//   - a session per plan instance (a rank session, rank.go, over the
//     caller's buffers) is opened at the first call that needs it and
//     kept (at most Config.MaxSessions: opening one more closes the least
//     recently called one, on every rank): tables, scratch, state block,
//     FIFO, its proxy and its share of the job-wide deadlock watch;
//   - the launch (rank table, arguments, kernel) is enqueued on the
//     caller's stream and the call returns; the instance's serving
//     goroutine (serve.go: one per instance, launches handed over as
//     reused records, nothing made per call) serves the kernel's port
//     channels and has it watched until it ends. A failure or a
//     deadlock becomes the communicator's asynchronous error, and Abort
//     ends a hung launch. The next call of the instance queues its launch
//     behind the running one, not waiting for it (unless the plan has
//     port channels, whose proxy serves one launch at a time);
//   - on a stream being captured into a CUDA graph the same launch is
//     recorded, from images of its arguments and rank table that the
//     graph keeps: each replay copies them and the kernel takes its LL
//     flag from an epoch word in device memory, which every launch
//     advances on the device. A plan whose launches need the host at run
//     time (port channels, served by the proxy) is refused with
//     ErrNotCapturable before the ranks meet.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// Comm is one rank of a communicator on a GPU backend.
type Comm struct {
	cfg   Config
	w     rankwire.World
	rank  int
	n     int
	io    StreamDriver // the driver that exports and maps user buffers
	ider  AllocIDer    // io, when it names allocations; else nil
	procs []string     // every rank's process (thisProcess)
	// inProc: every rank runs in this process.
	inProc bool
	// hostPeers are the other ranks of this host (peers); aliveFn is
	// alive as a value, made once (a method value made at every steady
	// call is an allocation).
	hostPeers []int
	aliveFn   func() error

	ctx    context.Context // ends at Abort or Close, or with the job
	cancel context.CancelFunc

	mu       sync.Mutex // serialises calls, Abort and Close
	sessions map[string]*commSession
	nextTag  uint32
	calls    uint64
	closed   bool
	// evicted counts the sessions closed to keep at most
	// cfg.MaxSessions open; leaked are the errors of those whose
	// closing failed (their memory stays), for Close.
	evicted int
	leaked  []error

	// mb is the host's mailbox (mailbox.go), nil when it could not be
	// made (or Config.MeetEveryCall): then every call meets its peers
	// over the bootstrap. rc tells the ranks on other hosts of each call
	// (remote.go), nil when there are none or no mailbox.
	mb *mailbox
	rc *remoteCalls
	// noMailbox is why this rank, its host's first, made no mailbox
	// (NoMailbox).
	noMailbox error

	// regMu guards the registrations, which a call's resolution (on its
	// stream, comm.go's gate) also makes.
	regMu    sync.Mutex
	exported map[DevPtr]uint64      // own allocations whose handles the peers have: their ids
	shared   map[DevPtr]sharedAlloc // own allocations in the mailbox's table
	mapped   map[peerAlloc]DevPtr   // peers' allocations mapped here
	stale    []DevPtr               // peers' freed allocations, unmapped at Close
	regs     int                    // registrations made (exports and mappings)

	errMu sync.Mutex
	async error // the first failed launch's, for AsyncError

	// gates releases the holds of steady-state launches on a Holder's
	// stream (gates.go), started at the first.
	gates *gateServer

	// capMu guards captured, the sessions with a launch captured into a
	// graph, which watchReplays watches (started at the first capture),
	// and the watch's stop (closed by Close) and end (closed by the
	// watch): Close frees the sessions' memory only once the watch, which
	// reads their progress records and may raise their abort words, has
	// ended.
	capMu    sync.Mutex
	captured []*commSession
	capStop  chan struct{}
	capDone  chan struct{}

	stage staging // the staging buffer (staging.go), guarded by mu
}

// peerAlloc names a peer's allocation.
type peerAlloc struct {
	rank int
	base DevPtr
	size uint64
	id   uint64 // the driver's (AllocIDer), 0 without
}

// commSession is one plan instance's rank session and its last launch.
type commSession struct {
	rs *RankSession
	l  *executor.BufferLayout
	// used is the sequence number of the session's last call: the least
	// recently called session is the one closed to make room (evict).
	used uint64
	// captured is set once a launch was captured into a graph: a replay
	// may then run at any time on the device, so the host no longer
	// writes the session's device state outside its stream.
	captured bool
	// images are the captured launches' arguments and rank tables, which
	// their graphs copy at every replay: kept until Close, since a graph
	// may be replayed as long as the communicator lives.
	images []HostMem
	// noOps is a zeroed block table in mapped host memory: the blocks
	// of a held launch whose call failed (abortImages), made at the
	// session's first held launch.
	noOps HostMem
	// queued: later launches may be enqueued while earlier ones run (no
	// port channels, no per-call tables: what capturable allows).
	// server serves the launches made by calls, in order, and tables
	// are the rank table images of launches enqueued while others were
	// in flight.
	queued bool
	server launchServer
	tables []*tableImage
	args   []byte // the arguments last staged
	// zeros is the image of cleared progress records, and sig the
	// signature of the call described sigDesc (steady calls repeat it).
	zeros   []byte
	sig     uint64
	sigDesc string
	// calls counts the launches made by calls and not yet served (busy):
	// while there are any, their own watch reads the progress records,
	// not the replay watch, which reads it without the communicator's
	// lock.
	calls atomic.Int32
}

// ErrNotCapturable says that a plan cannot run on a stream that is being
// captured into a graph; errors.Is finds it in Enqueue's error.
var ErrNotCapturable = errors.New("the plan cannot be captured into a graph")

// capturable says whether every launch of inst can run from a graph's
// replay alone: no port channels (each launch needs the host's proxy)
// and no per-call tables (variable-size plans).
func capturable(inst *executor.Instance) error {
	for r := range inst.Ranks {
		if n := len(inst.Ranks[r].PortChannels); n > 0 {
			return fmt.Errorf("%w: rank %d has %d port channels, which the host's proxy serves at each launch", ErrNotCapturable, r, n)
		}
	}
	if inst.Var != nil {
		return fmt.Errorf("%w: its buffer sizes are set per call (variable-size plan)", ErrNotCapturable)
	}
	return nil
}

// opened is a plan instance made ahead of the ranks' meeting (a call on
// a capturing stream, which is checked first), or its error.
type opened struct {
	inst *executor.Instance
	l    *executor.BufferLayout
	opts executor.Options
	err  error
}

// CommCall is one collective call of a rank.
type CommCall struct {
	// Key names the plan instance (plan, sizes, element type, in-place):
	// the session is opened once per key. Every rank's key for one call
	// must be the same.
	Key string
	// Desc is the call as the caller names it (function, count, type),
	// for the error of a mismatch; every rank's must be the same.
	Desc string
	// Open returns the instance, its buffer layout and options; called at
	// the first call of Key.
	Open func() (*executor.Instance, *executor.BufferLayout, executor.Options, error)
	// In and Out are the rank's input and output on the device, of the
	// layout's sizes and, in place, at its relative position.
	In, Out DevPtr
	// Stream is the caller's stream.
	Stream Stream
	// Reduce is the call's reduction (the zero value: sum). It is part
	// of the session's identity: the communicator keeps one session per
	// Key and Reduce (sessionKey), compares both across the ranks, and
	// opens the session with Options.Reduce = Reduce. Open may leave
	// its Options.Reduce at ReduceSum or set it to Reduce; any other
	// value is an error of the call.
	Reduce executor.ReduceOp
}

// sessionKey is the key of the call's session: Key itself for a sum
// (the keys every caller used before reductions existed), else Key with
// the reduction's name appended.
func (call CommCall) sessionKey() string {
	if call.Reduce == executor.ReduceSum {
		return call.Key
	}
	return call.Key + "\x00reduce=" + call.Reduce.String()
}

// openCall is call.Open with the call's reduction in the options.
func (call CommCall) openCall() (*executor.Instance, *executor.BufferLayout, executor.Options, error) {
	inst, l, opts, err := call.Open()
	if err != nil {
		return inst, l, opts, err
	}
	if opts.Reduce != executor.ReduceSum && opts.Reduce != call.Reduce {
		return inst, l, opts, fmt.Errorf("%s: the call reduces with %v, its Open's options with %v", call.Desc, call.Reduce, opts.Reduce)
	}
	opts.Reduce = call.Reduce
	return inst, l, opts, nil
}

// commProc is what each rank reports when the communicator opens.
type commProc struct {
	Err  string `json:"err,omitempty"`
	Proc string `json:"proc"`
	// Mailbox is the path of the mailbox that rank 0 made (all ranks on
	// its host), empty if none.
	Mailbox string `json:"mailbox,omitempty"`
}

// sharedAlloc is an own allocation in the mailbox's table: its id and
// index there.
type sharedAlloc struct {
	id  uint64
	idx int
}

// OpenComm opens rank w.Net.Rank() of a communicator of w.Net.Size()
// ranks on cfg's driver, which must be a StreamDriver, on every rank at
// once. w.Tag is the first of the message tags its sessions use
// (TagsPerSession each, one range per plan instance).
func OpenComm(ctx context.Context, cfg Config, w rankwire.World) (*Comm, error) {
	if w.Net == nil {
		return nil, fmt.Errorf("%s: a communicator without a bootstrap", cfg.Name)
	}
	if cfg.Open == nil {
		return nil, fmt.Errorf("%s: no driver", cfg.Name)
	}
	n := w.Net.Size()
	if len(w.Host) != n {
		return nil, fmt.Errorf("%s: World.Host names %d ranks, the communicator has %d", cfg.Name, len(w.Host), n)
	}
	if cfg.SetupTimeout <= 0 {
		cfg.SetupTimeout = 2 * time.Minute
	}
	switch {
	case cfg.MaxSessions == 0:
		cfg.MaxSessions = DefaultMaxSessions
	case cfg.MaxSessions < 0 || cfg.MaxSessions > MaxSessionsLimit:
		return nil, fmt.Errorf("%s: at most %d plan instances open per communicator: want 1 to %d", cfg.Name, cfg.MaxSessions, MaxSessionsLimit)
	}
	mine := commProc{Proc: thisProcess}
	var io StreamDriver
	d, err := cfg.Open()
	if err != nil {
		mine.Err = err.Error()
	} else if sd, ok := d.(StreamDriver); !ok {
		_ = d.Close()
		mine.Err = fmt.Sprintf("the %s driver (%T) cannot launch on a caller's stream", cfg.Name, d)
	} else {
		io = sd
	}
	// The first rank of each host makes the host's mailbox.
	leader := slices.Index(w.Host, w.Host[w.Net.Rank()])
	var mb *mailbox
	var noMailbox error
	if !cfg.MeetEveryCall && w.Net.Rank() == leader && mine.Err == "" {
		// Without one, the calls meet over the bootstrap.
		var path string
		if path, mb, noMailbox = createMailbox(n); noMailbox == nil {
			mine.Mailbox = path
			defer func() { _ = removeMailbox(path) }()
		}
	}
	gctx, cancel := context.WithTimeout(ctx, cfg.SetupTimeout)
	defer cancel()
	all, err := rankwire.GatherSetup(gctx, w.Net, mine, func(p *commProc) string { return p.Err }, "opening the communicator")
	if err != nil {
		if io != nil {
			_ = io.Close()
		}
		if mb != nil {
			_ = mb.unmap()
		}
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	c := &Comm{cfg: cfg, w: w, rank: w.Net.Rank(), n: n, io: io, sessions: map[string]*commSession{}, noMailbox: noMailbox,
		exported: map[DevPtr]uint64{}, shared: map[DevPtr]sharedAlloc{}, mapped: map[peerAlloc]DevPtr{}}
	for _, p := range all {
		c.procs = append(c.procs, p.Proc)
	}
	c.inProc = !slices.ContainsFunc(c.procs, func(p string) bool { return p != thisProcess })
	c.ider, _ = io.(AllocIDer)
	c.ctx, c.cancel = context.WithCancel(w.Net.Context())
	for r := range n {
		if r != c.rank && c.local(r) {
			c.hostPeers = append(c.hostPeers, r)
		}
	}
	c.aliveFn = c.alive
	everyHost := !slices.ContainsFunc(w.Host, func(h int) bool { return all[slices.Index(w.Host, h)].Mailbox == "" })
	if path := all[leader].Mailbox; everyHost {
		// Every rank maps its host's first rank's mailbox (then that
		// rank removes its file), or none uses one.
		var merr error
		if mb == nil {
			mb, merr = openMailbox(path, n)
		}
		res, err := c.gather(ctx, merr, "mapping the communicator's mailbox")
		if err != nil {
			if mb != nil {
				_ = mb.unmap()
			}
			c.cancel()
			if io != nil {
				_ = io.Close()
			}
			return nil, err
		}
		if slices.ContainsFunc(res, func(p commProc) bool { return p.Err != "" }) {
			if mb != nil {
				_ = mb.unmap()
			}
			mb = nil
		}
		c.mb = mb
	} else if mb != nil {
		_ = mb.unmap() // another host has none
	}
	if slices.ContainsFunc(w.Host, func(h int) bool { return h != w.Host[0] }) {
		// The communicator's own tags come before its sessions'.
		c.nextTag = rankwire.TagsPerSession
		if c.mb != nil {
			c.startRemote()
		}
	}
	return c, nil
}

// inProcess reports whether every rank runs in this process.
func (c *Comm) inProcess() bool { return c.inProc }

// Registered returns how many buffer registrations the communicator has
// made: own allocations exported to peers in other processes, peers'
// allocations mapped here (a steady-state call maps them where its
// launch is gated, after the call returned), and own allocations first
// shown to same-process peers.
func (c *Comm) Registered() int {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return c.regs
}

// NoMailbox returns why this rank, its host's first, could make no
// mailbox for the host (no room in /dev/shm, say: internal/shmfile's
// error names the file, the room needed and free), nil where it made one
// or is not its host's first rank. Without one the communicator works,
// every call meeting its peers over the bootstrap.
func (c *Comm) NoMailbox() error { return c.noMailbox }

// AsyncError returns the error of a launch that failed after its call
// returned (a deadlock's report, a lost peer), or nil.
func (c *Comm) AsyncError() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.async
}

func (c *Comm) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.async == nil {
		c.async = err
	}
}

// bufRec is one of a rank's buffers in a call's record.
type bufRec struct {
	Ptr  DevPtr `json:"ptr"`
	Base DevPtr `json:"base"` // the allocation (or the buffer itself)
	Size uint64 `json:"size"`
	ID   uint64 `json:"id,omitempty"` // the allocation's id (AllocIDer)
	// Handle is the allocation's IPC handle, when it is new to the peers
	// in other processes.
	Handle *IpcHandle `json:"handle,omitempty"`
}

// callRec is what each rank says of a call.
type callRec struct {
	Err  string    `json:"err,omitempty"`
	Key  string    `json:"key"`
	Desc string    `json:"desc"`
	Bufs [2]bufRec `json:"bufs"`
}

// Enqueue runs call on this rank: it opens the instance's session on
// first use, registers new buffers, enqueues the launch on call.Stream
// and returns. A launch that fails later makes AsyncError return its
// error. Earlier launches of the same instance may still be in flight:
// this one queues behind them on the stream, unless the plan has port
// channels or per-call tables, or 64 are in flight; then Enqueue first
// waits (at most the deadlock timeout and a margin) for the previous
// one, or the oldest, to end.
//
// The ranks meet over the bootstrap only at the first call of a plan
// instance (its session's set-up), at a capture, and in a communicator
// without mailboxes (Config.MeetEveryCall). Otherwise the call is the
// steady state: its record goes to the host's mailbox and, queued, to
// the ranks on other hosts, and the peers' records of the same call are
// read and compared where the launch waits for them on the stream
// (Gater, Holder), else here; the caller makes no system call either
// way. A mismatch becomes the asynchronous error, and the launch is
// aborted before its kernel starts.
func (c *Comm) Enqueue(ctx context.Context, call CommCall) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%s: rank %d: the communicator is closed", c.cfg.Name, c.rank)
	}
	if err := c.AsyncError(); err != nil {
		return fmt.Errorf("%s: rank %d: the communicator failed earlier: %w", c.cfg.Name, c.rank, err)
	}
	if !call.Reduce.Valid() {
		return fmt.Errorf("%s: rank %d: %s: invalid reduction %v", c.cfg.Name, c.rank, call.Desc, call.Reduce)
	}
	// From here on the call's key names its reduction too.
	call.Key = call.sessionKey()
	seq := c.calls
	c.calls++
	cs := c.sessions[call.Key]
	if cs != nil {
		cs.used = seq
	}
	capturing, err := c.io.Capturing(call.Stream)
	if err != nil {
		err = fmt.Errorf("%s: rank %d: %s: asking whether the stream is capturing: %w", c.cfg.Name, c.rank, call.Desc, err)
		c.refuse(seq, call, err)
		return err
	}
	if c.mb != nil && cs != nil && !capturing {
		return c.steady(cs, seq, call)
	}
	return c.meet(ctx, cs, seq, call, capturing)
}

// CopyOnStream enqueues a device-to-device copy of n bytes on the
// caller's stream st, ahead of a call's launch there: the input of an
// out-of-place call that runs an in-place plan (the nccl library).
func (c *Comm) CopyOnStream(st Stream, dst, src DevPtr, n uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%s: rank %d: the communicator is closed", c.cfg.Name, c.rank)
	}
	if err := c.io.CopyOnStream(st, dst, src, n); err != nil {
		return fmt.Errorf("%s: rank %d: copying %d bytes on the caller's stream: %w", c.cfg.Name, c.rank, n, err)
	}
	return nil
}

// refuse publishes that this rank refused call seq, for the peers that
// read the mailbox.
func (c *Comm) refuse(seq uint64, call CommCall, err error) {
	if c.mb == nil {
		return
	}
	rec := callRecord{refused: true, desc: call.Desc + ": " + err.Error()}
	c.tellRemote(seq, rec)
	_ = c.mb.publish(c.rank, seq, rec, c.peers(), c.aliveFn, c.cfg.SetupTimeout)
}

// peers are the other ranks of this host, which read its mailbox (worked
// out once: every steady call publishes to them).
func (c *Comm) peers() []int { return c.hostPeers }

// alive is the error of an ended communicator (Abort, Close, the job's
// end) or of its failed exchange with the ranks on other hosts, nil
// while it lives.
func (c *Comm) alive() error {
	if c.ctx.Err() != nil {
		return fmt.Errorf("the communicator ended: %w", context.Cause(c.ctx))
	}
	if c.rc != nil {
		if err := c.rc.failed(); err != nil {
			return fmt.Errorf("the call records of the ranks on other hosts: %w", err)
		}
	}
	return nil
}

// steady is a call of an open session in a communicator with a mailbox.
func (c *Comm) steady(cs *commSession, seq uint64, call CommCall) error {
	fail := func(err error) error {
		err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
		c.refuse(seq, call, err)
		return err
	}
	if err := cs.makeRoom(c.waitBound(cs)); err != nil {
		return fail(err)
	}
	if err := checkUser(cs.l, c.rank, call.In, call.Out); err != nil {
		return fail(err)
	}
	if cs.sigDesc != call.Desc {
		// (The key is the session's own.)
		cs.sig, cs.sigDesc = signature(call.Key, call.Desc), call.Desc
	}
	rec := callRecord{sig: cs.sig, desc: call.Desc}
	for i, p := range []DevPtr{call.In, call.Out} {
		sl, err := c.slot(p)
		if err != nil {
			return fail(err)
		}
		rec.bufs[i] = sl
	}
	c.tellRemote(seq, rec)
	if err := c.mb.publish(c.rank, seq, rec, c.peers(), c.aliveFn, c.cfg.SetupTimeout); err != nil {
		return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
	}
	if gated(cs.rs.s.d) {
		return c.launch(cs, call, nil, peerCall{ok: true, seq: seq, rec: rec})
	}
	// The driver cannot hold its stream for the host: the peers' records
	// are read here (through memory).
	bufs, err := c.resolveCall(seq, rec, call.Desc)
	if err != nil {
		c.fail(err)
		return err
	}
	return c.launch(cs, call, bufs, peerCall{})
}

// resolveCall is resolve, its error naming the call.
func (c *Comm) resolveCall(seq uint64, rec callRecord, desc string) ([][2]DevPtr, error) {
	bufs, err := c.resolve(seq, rec)
	if err != nil {
		err = fmt.Errorf("%s: rank %d: call %d (%s): %w", c.cfg.Name, c.rank, seq, desc, err)
	}
	return bufs, err
}

// slot describes the buffer at p for the peers: its address (peers in
// this process use it as it is), its allocation and, for peers in other
// processes, the allocation's index in the mailbox's table, where its
// IPC handle was put once.
func (c *Comm) slot(p DevPtr) (slot, error) {
	sl := slot{ptr: uint64(p), base: uint64(p), alloc: -1}
	base, size, ok, err := c.io.AddressRange(p)
	if err != nil {
		return sl, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		sl.base, sl.size = uint64(base), size
	}
	if c.inProcess() {
		// The peers use the address as it is: the registration is only
		// counted, once per allocation.
		c.regMu.Lock()
		defer c.regMu.Unlock()
		c.seen(DevPtr(sl.base), sl.size)
		return sl, nil
	}
	if !ok {
		return sl, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if c.ider != nil {
		if sl.id, err = c.ider.AllocID(base); err != nil {
			return sl, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if a, have := c.shared[base]; have && a.id == sl.id {
		sl.alloc = a.idx
		return sl, nil
	}
	h, err := c.io.IpcGet(base)
	if err != nil {
		return sl, fmt.Errorf("exporting the allocation at %#x: %w", uint64(base), err)
	}
	idx, err := c.mb.register(c.rank, uint64(base), size, sl.id, h)
	if err != nil {
		return sl, err
	}
	c.shared[base] = sharedAlloc{id: sl.id, idx: idx}
	c.regs++
	sl.alloc = idx
	return sl, nil
}

// seen counts an own allocation the first time same-process peers are
// shown it. The caller holds regMu.
func (c *Comm) seen(base DevPtr, size uint64) {
	k := peerAlloc{rank: c.rank, base: base, size: size}
	if _, ok := c.mapped[k]; !ok {
		c.mapped[k] = base
		c.regs++
	}
}

// resolve waits (at most the set-up timeout; Abort ends it) for every
// peer's record of call seq, checks that every rank made the same call,
// and returns every rank's input and output as this rank addresses them,
// mapping peers' new allocations.
//
// A launch queued behind one that failed fails at once (the
// communicator's asynchronous error), and so does a wait for a peer that
// ended its communicator before it made the call: a lost or departed
// peer fails every queued call together, not one timeout each.
func (c *Comm) resolve(seq uint64, mine callRecord) ([][2]DevPtr, error) {
	if err := c.AsyncError(); err != nil {
		return nil, fmt.Errorf("the communicator failed earlier: %w", err)
	}
	all := make([]callRecord, c.n)
	all[c.rank] = mine
	for r := range c.n {
		if r == c.rank {
			continue
		}
		var rerr error
		err := c.mb.waitFor(func() bool {
			rec, ok, err := c.mb.read(r, seq)
			if err != nil {
				rerr = err
				return true
			}
			if ok {
				all[r] = rec
			} else if err := c.mb.gone(r, seq); err != nil {
				rerr = err
				return true
			}
			return ok
		}, c.aliveFn, c.cfg.SetupTimeout)
		if rerr != nil {
			return nil, rerr
		}
		if err != nil {
			return nil, fmt.Errorf("rank %d has not made the call: %w", r, err)
		}
	}
	c.mb.markConsumed(c.rank, seq)
	for r, rec := range all {
		if rec.refused {
			return nil, fmt.Errorf("rank %d refused it: %s", r, rec.desc)
		}
	}
	for r := 1; r < c.n; r++ {
		if all[r].sig != all[0].sig {
			return nil, fmt.Errorf("mismatched calls: rank 0 called %s, rank %d called %s", all[0].desc, r, all[r].desc)
		}
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	out := make([][2]DevPtr, c.n)
	for r, rec := range all {
		if !c.local(r) {
			continue // the kernel does not address its buffers
		}
		for i, b := range rec.bufs {
			k := peerAlloc{r, DevPtr(b.base), b.size, b.id}
			if r == c.rank || c.procs[r] == thisProcess {
				out[r][i] = DevPtr(b.ptr)
				continue
			}
			p, ok := c.mapped[k]
			if !ok {
				h, err := c.mb.handle(r, b.alloc)
				if err != nil {
					return nil, fmt.Errorf("rank %d's buffer %#x: %w", r, b.ptr, err)
				}
				for old, q := range c.mapped {
					if old.rank == r && old.base < k.base+DevPtr(k.size) && k.base < old.base+DevPtr(old.size) {
						// Freed by the peer: unmapped at Close, since a
						// launch may still read it.
						c.stale = append(c.stale, q)
						delete(c.mapped, old)
					}
				}
				if p, err = c.io.IpcOpen(h); err != nil {
					return nil, fmt.Errorf("mapping rank %d's allocation at %#x: %w", r, b.base, err)
				}
				c.mapped[k] = p
				c.regs++
			}
			out[r][i] = p + DevPtr(b.ptr-b.base)
		}
	}
	return out, nil
}

// meet is a call whose ranks meet over the bootstrap: the first call of
// a plan instance, a capture, a communicator without a mailbox. Its
// record also goes to the mailbox and the ranks on other hosts, for
// peers whose same call (by sequence number) is in the steady state.
func (c *Comm) meet(ctx context.Context, cs *commSession, seq uint64, call CommCall, capturing bool) error {
	// Abort (another thread) ends a call waiting for its peers.
	ctx, stop := rankwire.Merge(ctx, c.ctx)
	defer stop()
	var pre *opened
	if capturing {
		// Every rank refuses the same plan here, before meeting.
		var inst *executor.Instance
		if cs != nil {
			inst = cs.rs.s.inst
		} else {
			pre = &opened{}
			pre.inst, pre.l, pre.opts, pre.err = call.openCall()
			inst = pre.inst
		}
		if inst != nil {
			if err := capturable(inst); err != nil {
				err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
				c.refuse(seq, call, err)
				return err
			}
		}
	}
	if cs != nil {
		if err := cs.makeRoom(c.waitBound(cs)); err != nil {
			err = fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
			c.refuse(seq, call, err)
			return err
		}
	}
	mine := callRec{Key: call.Key, Desc: call.Desc}
	if cs != nil {
		if err := checkUser(cs.l, c.rank, call.In, call.Out); err != nil {
			mine.Err = err.Error()
		}
	}
	newExports := map[DevPtr]uint64{}
	c.regMu.Lock()
	for i, p := range []DevPtr{call.In, call.Out} {
		if mine.Err != "" {
			break
		}
		rec, err := c.describe(p, newExports)
		if err != nil {
			mine.Err = err.Error()
			break
		}
		mine.Bufs[i] = rec
	}
	c.regMu.Unlock()
	if c.mb != nil {
		rec := callRecord{sig: signature(call.Key, call.Desc), desc: call.Desc, refused: mine.Err != ""}
		if mine.Err != "" {
			rec.desc += ": " + mine.Err
		}
		for i := range rec.bufs {
			rec.bufs[i].alloc = -1 // never read: this call's peers meet it here
		}
		c.tellRemote(seq, rec)
		if err := c.mb.publish(c.rank, seq, rec, c.peers(), c.aliveFn, c.cfg.SetupTimeout); err != nil {
			return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
		}
		defer c.mb.markConsumed(c.rank, seq)
	}
	gctx, cancel := context.WithTimeoutCause(ctx, c.cfg.SetupTimeout,
		fmt.Errorf("rank %d: %s: not every rank made the call within %v", c.rank, call.Desc, c.cfg.SetupTimeout))
	defer cancel()
	all, err := rankwire.GatherSetup(gctx, c.w.Net, mine, func(r *callRec) string { return r.Err }, call.Desc)
	if err != nil {
		if cerr := context.Cause(gctx); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = cerr
		}
		return fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	if err := mismatch(all); err != nil {
		return fmt.Errorf("%s: %w", c.cfg.Name, err)
	}
	c.regMu.Lock()
	for p, id := range newExports {
		c.exported[p] = id
		c.regs++
	}
	bases, stale, regErr := c.peerBuffers(all)
	c.regMu.Unlock()
	if err := c.unmap(stale); err != nil {
		regErr = errors.Join(regErr, fmt.Errorf("rank %d: %w", c.rank, err))
	}
	if cs == nil {
		// Every rank opens the instance's session at this call: its
		// set-up's all-gathers also tell every rank of a registration
		// that failed on one.
		var err error
		cs, err = c.open(ctx, call, regErr, pre)
		if err != nil {
			return err
		}
	} else if anyHandle(all) {
		// New registrations: every rank says whether its mapping worked.
		if _, err := c.gather(ctx, regErr, "registering buffers of "+call.Desc); err != nil {
			return err
		}
	} else if regErr != nil {
		return regErr
	}
	if capturing {
		return c.capture(cs, call, bases)
	}
	return c.launch(cs, call, bases, peerCall{})
}

// mismatch names the first rank whose call differs from rank 0's.
func mismatch(all []callRec) error {
	for r := 1; r < len(all); r++ {
		if all[r].Desc == all[0].Desc && all[r].Key != all[0].Key {
			// The same call for another plan instance or reduction
			// (sessionKey).
			return fmt.Errorf("mismatched calls: rank 0 and rank %d called %s for different plan instances or reductions (keys %q and %q)",
				r, all[0].Desc, all[0].Key, all[r].Key)
		}
		if all[r].Key != all[0].Key || all[r].Desc != all[0].Desc {
			return fmt.Errorf("mismatched calls: rank 0 called %s, rank %d called %s", all[0].Desc, r, all[r].Desc)
		}
	}
	return nil
}

func anyHandle(all []callRec) bool {
	for _, r := range all {
		for _, b := range r.Bufs {
			if b.Handle != nil {
				return true
			}
		}
	}
	return false
}

// gather all-gathers an outcome (err nil: success) within the set-up
// timeout; every rank gets the same error.
func (c *Comm) gather(ctx context.Context, err error, step string) ([]commProc, error) {
	mine := commProc{Proc: thisProcess}
	if err != nil {
		mine.Err = err.Error()
	}
	gctx, cancel := context.WithTimeout(ctx, c.cfg.SetupTimeout)
	defer cancel()
	all, gerr := rankwire.GatherSetup(gctx, c.w.Net, mine, func(p *commProc) string { return p.Err }, step)
	if gerr != nil {
		return nil, fmt.Errorf("%s: %w", c.cfg.Name, gerr)
	}
	return all, nil
}

// describe returns the record of the buffer at p: its allocation, and the
// allocation's IPC handle when peers in other processes have not had it.
func (c *Comm) describe(p DevPtr, newExports map[DevPtr]uint64) (bufRec, error) {
	rec := bufRec{Ptr: p, Base: p}
	base, size, ok, err := c.io.AddressRange(p)
	if err != nil {
		return rec, fmt.Errorf("the allocation of %#x: %w", uint64(p), err)
	}
	if ok {
		rec.Base, rec.Size = base, size
	}
	if c.inProcess() {
		return rec, nil
	}
	if !ok {
		return rec, fmt.Errorf("%#x is not in device memory this driver can share with other processes", uint64(p))
	}
	if c.ider != nil {
		if rec.ID, err = c.ider.AllocID(base); err != nil {
			return rec, fmt.Errorf("the id of the allocation at %#x: %w", uint64(base), err)
		}
	}
	// An allocation at a registered one's address with another id
	// replaced a freed one: the peers get its handle.
	if id, have := c.exported[base]; have && id == rec.ID {
		return rec, nil
	}
	if id, have := newExports[base]; have && id == rec.ID {
		return rec, nil
	}
	h, err := c.io.IpcGet(base)
	if err != nil {
		return rec, fmt.Errorf("exporting the allocation at %#x: %w", uint64(base), err)
	}
	rec.Handle = &h
	newExports[base] = rec.ID
	return rec, nil
}

// peerBuffers returns every rank's input and output as this rank
// addresses them (0 for ranks on other hosts), mapping the allocations
// of same-host peers in other processes on first use. A peer's new
// allocation that overlaps one mapped here (freed, and its address used
// again) replaces the old one, which is returned for unmapping. The
// caller holds regMu.
func (c *Comm) peerBuffers(all []callRec) ([][2]DevPtr, []DevPtr, error) {
	out := make([][2]DevPtr, c.n)
	var errs []string
	var stale []DevPtr
	for r, rec := range all {
		if c.w.Host[r] != c.w.Host[c.rank] {
			continue
		}
		for i, b := range rec.Bufs {
			if r == c.rank || c.procs[r] == thisProcess {
				out[r][i] = b.Ptr
				if r == c.rank && c.inProcess() {
					c.seen(b.Base, b.Size)
				}
				continue
			}
			k := peerAlloc{r, b.Base, b.Size, b.ID}
			p, ok := c.mapped[k]
			if !ok && b.Handle == nil {
				errs = append(errs, fmt.Sprintf("rank %d's buffer %#x is in an allocation (%#x, %d bytes) it did not register", r, uint64(b.Ptr), uint64(b.Base), b.Size))
				continue
			}
			if !ok {
				for old, q := range c.mapped {
					if old.rank == r && old.base < k.base+DevPtr(k.size) && k.base < old.base+DevPtr(old.size) {
						stale = append(stale, q)
						delete(c.mapped, old)
					}
				}
				var err error
				if p, err = c.io.IpcOpen(*b.Handle); err != nil {
					errs = append(errs, fmt.Sprintf("mapping rank %d's allocation at %#x: %v", r, uint64(b.Base), err))
					continue
				}
				c.mapped[k] = p
				c.regs++
			}
			out[r][i] = p + (b.Ptr - b.Base)
		}
	}
	if len(errs) > 0 {
		return nil, stale, fmt.Errorf("rank %d: %s", c.rank, strings.Join(errs, "; "))
	}
	return out, stale, nil
}

// unmap unmaps peers' freed allocations once the launches that may still
// read them have ended (each waited for at most the deadlock timeout and
// a margin).
func (c *Comm) unmap(stale []DevPtr) error {
	if len(stale) == 0 {
		return nil
	}
	for key, cs := range c.sessions {
		if err := cs.wait(c.waitBound(cs)); err != nil {
			return fmt.Errorf("unmapping a peer's freed allocation (its mapping stays until the process ends): %s: %w", key, err)
		}
	}
	var errs []string
	for _, p := range stale {
		if err := c.io.IpcClose(p); err != nil {
			errs = append(errs, fmt.Sprintf("unmapping a peer's freed allocation at %#x: %v", uint64(p), err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// open opens the session of call's instance on every rank (regErr, this
// rank's registration failure, fails the set-up on every rank); pre is
// the instance when it was made already.
func (c *Comm) open(ctx context.Context, call CommCall, regErr error, pre *opened) (*commSession, error) {
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
	// At most cfg.MaxSessions sessions: the least recently called one
	// goes first, the same on every rank (the ranks make the same calls
	// in the same order). Its launches end on this rank before the
	// gather, so after it they have ended on every rank, and none reads
	// or writes what closing it releases.
	key, victim := c.victim()
	var werr error
	if victim != nil {
		if err := victim.wait(c.waitBound(victim)); err != nil {
			werr = fmt.Errorf("rank %d: closing the least recently called plan instance (%s) to open this one: %w", c.rank, key, err)
		}
	}
	if _, err := c.gather(ctx, werr, "opening "+call.Desc); err != nil {
		return nil, err
	}
	if victim != nil {
		c.evict(key, victim)
	}
	w := c.w
	w.Tag = c.w.Tag + c.nextTag
	c.nextTag += rankwire.TagsPerSession
	cfg := c.cfg
	cfg.Graph = false
	rs, err := openRank(ctx, cfg, inst, l, opts, w, rankOpts{inProcess: c.inProcess(), user: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call.Desc, err)
	}
	if _, ok := rs.s.d.(StreamDriver); !ok {
		_ = rs.Close()
		return nil, fmt.Errorf("%s: the %s driver (%T) cannot launch on a caller's stream", call.Desc, c.cfg.Name, rs.s.d)
	}
	cs := &commSession{rs: rs, l: l, queued: capturable(inst) == nil, used: c.calls - 1}
	c.sessions[call.Key] = cs
	return cs, nil
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
		if cs.captured {
			continue
		}
		if v == nil || cs.used < v.used {
			key, v = k, cs
		}
	}
	return key, v
}

// evict closes session cs of key, whose launches have ended on every
// rank: its rank table images, its empty block table, its rank session (tables, scratch, the
// peers' mappings, its proxy and watch). The next call of its instance
// opens it again, on every rank. A failure to close keeps its memory
// until the process ends, and is Close's error.
func (c *Comm) evict(key string, cs *commSession) {
	delete(c.sessions, key)
	c.evicted++
	cs.server.stop()
	var errs []error
	for _, t := range cs.tables {
		if err := t.h.Free(); err != nil {
			errs = append(errs, fmt.Errorf("freeing a rank table image: %w", err))
		}
	}
	if cs.noOps != nil {
		if err := cs.noOps.Free(); err != nil {
			errs = append(errs, fmt.Errorf("freeing the empty block table: %w", err))
		}
	}
	if err := cs.rs.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		c.leaked = append(c.leaked, fmt.Errorf("%s: rank %d: closing the plan instance %s to make room: %w", c.cfg.Name, c.rank, key, err))
	}
}

// Sessions returns how many plan-instance sessions are open (at most
// Config.MaxSessions, and the captured ones beyond), and how many were
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
	return cs.rs.s.timeout + c.cfg.SetupTimeout
}

// checkUser checks the caller's buffers against the layout: in place
// where the layout is (at its relative position), apart where it is not.
func checkUser(l *executor.BufferLayout, rank int, in, out DevPtr) error {
	inOff, outOff := l.Offsets(rank)
	inLen, outLen := l.Sizes.Input, l.Sizes.Output
	if inLen > 0 && outLen > 0 && inOff < outOff+outLen && outOff < inOff+inLen {
		d := int64(inOff) - int64(outOff)
		if int64(in)-int64(out) != d {
			return fmt.Errorf("the input (%#x) must be at %d bytes from the output (%#x) for this in-place plan", uint64(in), d, uint64(out))
		}
		return nil
	}
	if uint64(in) < uint64(out)+outLen && uint64(out) < uint64(in)+inLen {
		return fmt.Errorf("the input (%#x, %d bytes) and output (%#x, %d bytes) overlap, and the plan is out of place", uint64(in), inLen, uint64(out), outLen)
	}
	return nil
}

// setBuffers sets the call's buffers in the session and returns the
// image of its rank table.
func (c *Comm) setBuffers(cs *commSession, call CommCall, bufs [][2]DevPtr) []byte {
	s, m := cs.rs.s, cs.rs.s.mp
	m.mu.Lock()
	m.devIn, m.devOut = call.In, call.Out
	for r := range c.n {
		if c.w.Host[r] != c.w.Host[c.rank] {
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

// makeNoOps makes the session's empty block table (abortImages) at its
// first gated launch.
func (c *Comm) makeNoOps(cs *commSession, grid int) error {
	if cs.noOps != nil {
		return nil
	}
	h, err := cs.rs.s.d.AllocHost(uint64(grid) * sizeBlock)
	if err != nil {
		return fmt.Errorf("the empty block table of an aborted launch: %w", err)
	}
	cs.noOps = h
	return nil
}

// abortImages are the images a gated launch gets when its call fails (a
// mismatch, a refusal, a timeout, the communicator's end): the abort word
// raised, and arguments whose every block has no op, so that the kernel
// writes nothing (it runs its ops before it would see the abort word,
// which it reads only while it waits). Their block records are a zeroed
// table in mapped host memory (makeNoOps); the rank table is the one of
// the buffers last set. A Holder's stream copies all three; a Gater's
// gate writes the arguments and raises the abort word.
func (c *Comm) abortImages(cs *commSession, args []byte, grid int) ([][]byte, error) {
	s, m := cs.rs.s, cs.rs.s.mp
	if cs.noOps == nil || cs.noOps.Len() < uint64(grid)*sizeBlock {
		return nil, fmt.Errorf("%s: rank %d: no empty block table for an aborted launch of %d blocks", c.cfg.Name, c.rank, grid)
	}
	var a mgArgs
	if err := binary.Read(bytes.NewReader(args), binary.LittleEndian, &a); err != nil {
		return nil, fmt.Errorf("%s: rank %d: the arguments of an aborted launch: %w", c.cfg.Name, c.rank, err)
	}
	a.Blocks = uint64(cs.noOps.Dev())
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

// launch sets the call's buffers in the session and enqueues its launch
// on the caller's stream; the session's server (serve.go) serves it
// until it ends. In a session whose launches may queue (cs.queued),
// earlier launches may still be running or waiting on the stream: the
// host then touches nothing they read (the rank table of this launch
// comes from an image of its own, the arguments do not change, the
// progress records are cleared on the stream only), and the server
// serves it once the previous one has been served.
//
// With peer.ok (a steady-state call, the driver a Gater or a Holder) the
// buffers are not known yet: the kernel waits on the stream behind a
// gate. A Gater's gate resolves the call on the stream (the launches
// before it there have ended) and writes the rank table; a Holder's hold
// is released by the communicator's gate server (gates.go) once resolve
// has returned, with the images the stream then copies. When resolve
// fails the launch gets arguments whose blocks have no op and the abort
// word (abortImages), so the kernel writes nothing.
func (c *Comm) launch(cs *commSession, call CommCall, bufs [][2]DevPtr, peer peerCall) error {
	s, m := cs.rs.s, cs.rs.s.mp
	if err := s.guard.Ready(c.ctx); err != nil {
		return err
	}
	sd := s.d.(StreamDriver)
	if err := sd.UseStream(call.Stream); err != nil {
		return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
	}
	grid := len(s.tabs.blocks)
	// The arguments of a communicator's session (epoch word) are the same
	// at every launch: they are staged at the first, with nothing in
	// flight, and a queued launch reads what its predecessors read.
	args := cs.args
	if args == nil || s.epoch == 0 || s.inst.Var != nil {
		args = s.argsImage(grid)
	}
	busy := cs.busy()
	// The rank table when a buffer moved, the arguments, the cleared
	// progress records and the kernel, in order on the caller's stream.
	// With nothing in flight the progress records are also cleared now:
	// until the kernel starts its blocks read as not started, so work
	// ahead of it on the stream is not taken for a hang. Not once a
	// launch was captured: a replay may be running.
	if !cs.captured && !busy {
		if n := sizeControl + grid*sizeProgress; len(cs.zeros) != n {
			cs.zeros = make([]byte, n)
		}
		if err := s.d.HtoD(s.ctl, cs.zeros); err != nil {
			return fmt.Errorf("%s: rank %d: clearing the progress records: %w", c.cfg.Name, c.rank, err)
		}
	}
	if !peer.ok {
		img := c.setBuffers(cs, call, bufs)
		if cs.captured || string(img) != string(s.ranksImg) {
			h, at := s.host, uint64(ranksAt)
			if busy {
				var err error
				if h, err = cs.image(s, img); err != nil {
					return fmt.Errorf("%s: rank %d: %s: %w", c.cfg.Name, c.rank, call.Desc, err)
				}
				at = 0
			} else {
				s.stage(ranksAt, img)
			}
			if err := s.d.Enqueue(s.ranksT, h, at, uint64(len(img))); err != nil {
				return fmt.Errorf("%s: rank %d: writing the rank table: %w", c.cfg.Name, c.rank, err)
			}
			s.ranksImg = img
		}
	} else {
		// The rank table is written in the gate: the next call that
		// does not resolve there writes its own.
		s.ranksImg = nil
	}
	s.flag++
	if string(args) != string(cs.args) {
		s.stage(argsAt, args)
		cs.args = args
	}
	if grid == 0 {
		if peer.ok {
			go func() {
				if _, err := c.resolveCall(peer.seq, peer.rec, call.Desc); err != nil {
					c.fail(err)
				}
			}()
		}
		m.mu.Lock()
		m.launches++
		m.mu.Unlock()
		return nil
	}
	l := cs.server.record()
	l.c, l.cs, l.call, l.args, l.grid, l.peer, l.seq = c, cs, call, args, grid, peer, c.calls
	var gate func() error
	if peer.ok {
		switch d := s.d.(type) {
		case Gater:
			l.gater, gate = d, l.fn.gate
		case Holder:
			l.holder, gate = d, l.fn.hold
		}
	}
	l.start = time.Now()
	if err := s.launchGated(grid, gate); err != nil {
		// The record is dropped, not reused: the stream may still hold
		// its gate.
		err = fmt.Errorf("%s: rank %d: %s: launch of %d blocks: %w", c.cfg.Name, c.rank, call.Desc, grid, err)
		if l.hold != nil {
			// The stream waits for the hold: the kernel behind it, if
			// enqueued, must do nothing.
			img, ierr := c.abortImages(cs, args, grid)
			err = errors.Join(err, ierr)
			if img != nil {
				err = errors.Join(err, l.hold.Release(img))
			}
		}
		s.guard.Fail(err)
		return err
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
		s.guard.Fail(err)
		return err
	}
	return nil
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

// image returns host memory holding a rank table for a launch enqueued
// while earlier ones are in flight: one no launch still needs, or a new
// one. The launch about to be handed over uses it.
func (cs *commSession) image(s *session, img []byte) (HostMem, error) {
	served := cs.server.servedCount()
	var ti *tableImage
	for _, t := range cs.tables {
		if t.user <= served {
			ti = t
			break
		}
	}
	if ti == nil {
		h, err := s.d.AllocHost(uint64(len(img)))
		if err != nil {
			return nil, fmt.Errorf("allocating a rank table image: %w", err)
		}
		ti = &tableImage{h: h}
		cs.tables = append(cs.tables, ti)
	}
	ti.user = cs.server.next()
	storeWords(ti.h, 0, img)
	return ti.h, nil
}

// tableImage is host memory holding a rank table that a launch's copy
// reads when the stream reaches it; user is the number of that launch in
// its session (launchServer), free again once it has been served.
type tableImage struct {
	h    HostMem
	user uint64
}

// capture records the call's launch on its caller's stream, which is
// being captured into a graph: the arguments and rank table from images
// of their own (the graph copies them at every replay), the cleared
// control word and progress records, the kernel. Nothing waits for it
// and nothing watches it: a replay runs when the caller launches the
// graph. The kernel takes its LL flag from the session's epoch word.
func (c *Comm) capture(cs *commSession, call CommCall, bufs [][2]DevPtr) error {
	s := cs.rs.s
	if err := s.guard.Ready(c.ctx); err != nil {
		return err
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("%s: rank %d: %s: capturing the launch: %s: %w", c.cfg.Name, c.rank, call.Desc, what, err)
	}
	if s.epoch == 0 {
		return fail("the session", errors.New("it has no epoch word"))
	}
	ranks := c.setBuffers(cs, call, bufs)
	grid := len(s.tabs.blocks)
	args := s.argsImage(grid)
	at := uint64(len(args)+63) &^ 63
	h, err := s.d.AllocHost(at + uint64(len(ranks)))
	if err != nil {
		return fail("allocating its images", err)
	}
	cs.images = append(cs.images, h)
	storeWords(h, 0, args)
	storeWords(h, at, ranks)
	if !cs.captured {
		c.watchCaptured(cs)
	}
	cs.captured = true
	// The next launch outside the graph writes its own rank table.
	s.ranksImg = nil
	sd := s.d.(StreamDriver)
	if err := sd.UseStream(call.Stream); err != nil {
		return fail("the stream", err)
	}
	if err := s.d.Enqueue(s.ranksT, h, at, uint64(len(ranks))); err != nil {
		return fail("the rank table", err)
	}
	if grid == 0 {
		return nil
	}
	if err := s.d.Enqueue(s.args, h, 0, uint64(len(args))); err != nil {
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
		if !cs.captured {
			continue
		}
		if cs.busy() {
			continue // a launch made by a call: its own watch stops it
		}
		s := cs.rs.s
		wd := &watchdog{s: s, grid: len(s.tabs.blocks)}
		ps := wd.read()
		if !replayRunning(ps) {
			continue
		}
		c.fail(fmt.Errorf("rank %d: %s: a replayed launch was running at the %s: %w", c.rank, key, at, wd.deadlock(ps)))
		if err := c.stopReplay(s, wd, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			delete(c.sessions, key) // its memory stays
			cs.server.stop()
		}
	}
	return errors.Join(errs...)
}

// watchCaptured adds a captured session to those the replay watch
// watches, starting the watch with the first.
func (c *Comm) watchCaptured(cs *commSession) {
	c.capMu.Lock()
	defer c.capMu.Unlock()
	c.captured = append(c.captured, cs)
	if len(c.captured) == 1 {
		c.capStop, c.capDone = make(chan struct{}), make(chan struct{})
		go c.watchReplays(c.capStop, c.capDone)
	}
}

// stopWatchingReplays ends the replay watch, if one was started, and
// waits for it (Close, with mu held, before it frees the sessions).
func (c *Comm) stopWatchingReplays() {
	c.capMu.Lock()
	stop, done := c.capStop, c.capDone
	c.capStop = nil
	c.capMu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
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
	bound := c.cfg.ReplayTimeout
	if bound <= 0 {
		bound = 10 * time.Minute
	}
	tick := min(time.Second, max(bound/8, time.Millisecond))
	tk := time.NewTicker(tick)
	defer tk.Stop()
	type seen struct {
		marks []uint64
		since time.Time
	}
	last := map[*commSession]*seen{}
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-stop:
			return
		case now := <-tk.C:
			c.capMu.Lock()
			sessions := slices.Clone(c.captured)
			c.capMu.Unlock()
			for _, cs := range sessions {
				if cs.calls.Load() > 0 {
					delete(last, cs)
					continue
				}
				s := cs.rs.s
				wd := &watchdog{s: s, grid: len(s.tabs.blocks)}
				ps := wd.read()
				marks, running := wd.progress(ps)
				if wd.readErr != nil || !replayRunning(ps) || running {
					delete(last, cs)
					continue
				}
				l := last[cs]
				if l == nil || !slices.Equal(l.marks, marks) {
					last[cs] = &seen{marks: marks, since: now}
					continue
				}
				if now.Sub(l.since) < bound {
					continue
				}
				c.fail(fmt.Errorf("rank %d: a replayed launch made no progress for %v: %w", c.rank, bound, wd.deadlock(ps)))
				if err := c.stopReplay(s, wd, stop); err != nil {
					c.fail(err)
				}
				delete(last, cs)
			}
		}
	}
}

// stopReplay raises the abort word of a replayed launch again and again
// (as the watchdog does) until its records show it ended, at most the
// deadlock timeout and a margin, or until quit (nil: never) is closed:
// Close then stops the replay itself.
func (c *Comm) stopReplay(s *session, wd *watchdog, quit <-chan struct{}) error {
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
			return fmt.Errorf("%s: rank %d: a replayed launch has not ended %v after the abort (its memory stays until the process ends)",
				c.cfg.Name, c.rank, bound)
		}
		time.Sleep(time.Millisecond)
	}
	return wd.readErr
}

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

// Close waits for the running launches (at most the deadlock timeout and
// a margin each), then releases every session and registration.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.mb != nil {
		// The peers waiting for a call this rank will not make stop
		// waiting (mailbox.gone).
		atomic.StoreUint64(c.mb.ended(c.rank), c.calls+1)
	}
	errs := slices.Clone(c.leaked)
	// The replay watch reads the captured sessions' records and may
	// raise their abort words: it ends before their memory is freed, and
	// a replay still running is stopped here (its session's memory kept
	// where it does not end).
	c.stopWatchingReplays()
	if err := c.stopReplaysLocked("close"); err != nil {
		errs = append(errs, err)
	}
	for key, cs := range c.sessions {
		cs.server.stop()
		if err := cs.wait(c.waitBound(cs)); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %s: %w (its memory stays until the process ends)", c.cfg.Name, c.rank, key, err))
			continue
		}
		for _, h := range cs.images {
			if err := h.Free(); err != nil {
				errs = append(errs, fmt.Errorf("%s: rank %d: %s: freeing a captured launch's images: %w", c.cfg.Name, c.rank, key, err))
			}
		}
		for _, t := range cs.tables {
			if err := t.h.Free(); err != nil {
				errs = append(errs, fmt.Errorf("%s: rank %d: %s: freeing a rank table image: %w", c.cfg.Name, c.rank, key, err))
			}
		}
		if cs.noOps != nil {
			if err := cs.noOps.Free(); err != nil {
				errs = append(errs, fmt.Errorf("%s: rank %d: %s: freeing the empty block table: %w", c.cfg.Name, c.rank, key, err))
			}
		}
		if err := cs.rs.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.sessions = nil
	if c.rc != nil && c.ctx.Err() == nil {
		// The remote peers' last gates wait for this rank's records.
		if err := c.rc.flush(c.cfg.SetupTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
		}
	}
	if c.gates != nil {
		// The holds left (a session whose launch did not end) are
		// released aborted: the communicator's end fails their calls.
		c.cancel()
		if err := c.gates.close(c.cfg.SetupTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
		}
	}
	if len(errs) == 0 {
		// (A launch that did not end may still copy to or from the
		// peers' buffers: they stay mapped then, as its own memory
		// stays, rather than unmapped under a running copy.)
		for k, p := range c.mapped {
			if k.rank != c.rank && c.procs[k.rank] != thisProcess {
				_ = c.io.IpcClose(p)
			}
		}
		for _, p := range c.stale {
			_ = c.io.IpcClose(p)
		}
	}
	c.mapped, c.stale = nil, nil
	if c.io != nil && len(errs) == 0 {
		// (A launch that did not end may still read it.)
		if err := c.freeStaging(); err != nil {
			errs = append(errs, err)
		}
	}
	// (A launch that did not end, or a receiver of the remote peers'
	// records that did not, may still use the mailbox.)
	keepMailbox := len(errs) > 0
	c.cancel()
	if c.rc != nil {
		if err := c.rc.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: rank %d: %w", c.cfg.Name, c.rank, err))
			keepMailbox = true
		}
	}
	if c.mb != nil && !keepMailbox {
		_ = c.mb.unmap()
		c.mb = nil
	}
	if c.io != nil {
		_ = c.io.Close()
	}
	return errors.Join(errs...)
}
