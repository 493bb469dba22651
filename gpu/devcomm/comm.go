package devcomm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
)

// Comm is one rank of a communicator on a GPU backend.
type Comm struct {
	cfg  gpu.Config
	w    rankwire.World
	rank int
	n    int
	io   gpu.StreamDriver // the driver: sessions, buffers, the staging buffer
	self string           // this process (gpu.ProcessName)
	// reg holds the registrations of buffers with the peers
	// (register.go), which a call's resolution (on its stream,
	// steady.go's resolve) also makes.
	reg *registry
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
	// made (or gpu.Config.MeetEveryCall): then every call meets its peers
	// over the bootstrap. rc tells the ranks on other hosts of each call
	// (remote.go), nil when there are none or no mailbox.
	mb *mailbox
	rc *remoteCalls
	// noMailbox is why this rank, its host's first, made no mailbox
	// (NoMailbox).
	noMailbox error

	errMu sync.Mutex
	async error // the first failed launch's, for AsyncError

	// gates releases the holds of steady-state launches on a gpu.Holder's
	// stream (gates.go), started at the first.
	gates *gateServer

	// captured are the sessions with a launch captured into a graph,
	// which the replay watch watches (replay.go).
	captured capturedSet

	stage staging // the staging buffer (staging.go), guarded by mu
}

// commProc is what each rank reports when the communicator opens.
type commProc struct {
	Err  string `json:"err,omitempty"`
	Proc string `json:"proc"`
	// Mailbox is the path of the mailbox that rank 0 made (all ranks on
	// its host), empty if none.
	Mailbox string `json:"mailbox,omitempty"`
}

// Open opens rank w.Net.Rank() of a communicator of w.Net.Size() ranks
// on cfg's driver, which must be a gpu.StreamDriver, on every rank at
// once. w.Tag is the first of the message tags its sessions use
// (rankwire.TagsPerSession each, one range per plan instance).
func Open(ctx context.Context, cfg gpu.Config, w rankwire.World) (*Comm, error) {
	cfg, err := checkOpen(cfg, w)
	if err != nil {
		return nil, err
	}
	self := gpu.ProcessName()
	mine := commProc{Proc: self}
	io, derr := openDriver(cfg)
	if derr != "" {
		mine.Err = derr
	}
	// The first rank of each host makes the host's mailbox.
	leader := slices.Index(w.Host, w.Host[w.Net.Rank()])
	mb, path, noMailbox := leaderMailbox(cfg, w, leader, mine.Err == "")
	if mb != nil {
		mine.Mailbox = path
		defer func() { _ = removeMailbox(path) }()
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
	c := newComm(cfg, w, io, all, self)
	c.noMailbox = noMailbox
	if err := c.shareMailbox(ctx, all, leader, mb); err != nil {
		return nil, err
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

// leaderMailbox makes the host's mailbox on its first rank (leader),
// when this rank is that one, its driver opened (ok) and calls may use a
// mailbox: the mailbox and its file's path, for the host's other ranks,
// or why none was made (without one, the calls meet over the bootstrap).
func leaderMailbox(cfg gpu.Config, w rankwire.World, leader int, ok bool) (*mailbox, string, error) {
	if cfg.MeetEveryCall || w.Net.Rank() != leader || !ok {
		return nil, "", nil
	}
	path, mb, err := createMailbox(w.Net.Size())
	if err != nil {
		return nil, "", err
	}
	return mb, path, nil
}

// checkOpen checks Open's arguments and returns cfg with its defaults.
func checkOpen(cfg gpu.Config, w rankwire.World) (gpu.Config, error) {
	if w.Net == nil {
		return cfg, fmt.Errorf("%s: a communicator without a bootstrap", cfg.Name)
	}
	if cfg.Open == nil {
		return cfg, fmt.Errorf("%s: no driver", cfg.Name)
	}
	if n := w.Net.Size(); len(w.Host) != n {
		return cfg, fmt.Errorf("%s: World.Host names %d ranks, the communicator has %d", cfg.Name, len(w.Host), n)
	}
	if cfg.SetupTimeout <= 0 {
		cfg.SetupTimeout = 2 * time.Minute
	}
	switch {
	case cfg.MaxSessions == 0:
		cfg.MaxSessions = gpu.DefaultMaxSessions
	case cfg.MaxSessions < 0 || cfg.MaxSessions > gpu.MaxSessionsLimit:
		return cfg, fmt.Errorf("%s: at most %d plan instances open per communicator: want 1 to %d", cfg.Name, cfg.MaxSessions, gpu.MaxSessionsLimit)
	}
	return cfg, nil
}

// openDriver opens cfg's driver, which must launch on a caller's stream;
// the error is for the peers (commProc.Err).
func openDriver(cfg gpu.Config) (gpu.StreamDriver, string) {
	d, err := cfg.Open()
	if err != nil {
		return nil, err.Error()
	}
	sd, ok := d.(gpu.StreamDriver)
	if !ok {
		_ = d.Close()
		return nil, fmt.Sprintf("the %s driver (%T) cannot launch on a caller's stream", cfg.Name, d)
	}
	return sd, ""
}

// newComm returns the communicator of every rank's report all.
func newComm(cfg gpu.Config, w rankwire.World, io gpu.StreamDriver, all []commProc, self string) *Comm {
	c := &Comm{cfg: cfg, w: w, rank: w.Net.Rank(), n: w.Net.Size(), io: io, self: self, sessions: map[string]*commSession{}}
	g := &registry{rank: c.rank, n: c.n, host: w.Host, io: io, self: self,
		exported: map[gpu.DevPtr]uint64{}, shared: map[gpu.DevPtr]sharedAlloc{}, mapped: map[peerAlloc]gpu.DevPtr{}}
	for _, p := range all {
		g.procs = append(g.procs, p.Proc)
	}
	g.inProc = !slices.ContainsFunc(g.procs, func(p string) bool { return p != self })
	g.ider, _ = io.(gpu.AllocIDer)
	c.reg = g
	c.ctx, c.cancel = context.WithCancel(w.Net.Context())
	for r := range c.n {
		if r != c.rank && c.local(r) {
			c.hostPeers = append(c.hostPeers, r)
		}
	}
	c.aliveFn = c.alive
	return c
}

// shareMailbox has every rank map its host's first rank's mailbox (mb on
// that rank; then it removes its file), or none use one: where a host has
// none, or a rank could not map its host's. The error ends the
// communicator.
func (c *Comm) shareMailbox(ctx context.Context, all []commProc, leader int, mb *mailbox) error {
	w := c.w
	everyHost := !slices.ContainsFunc(w.Host, func(h int) bool { return all[slices.Index(w.Host, h)].Mailbox == "" })
	if !everyHost {
		if mb != nil {
			_ = mb.unmap() // another host has none
		}
		return nil
	}
	var merr error
	if mb == nil {
		mb, merr = openMailbox(all[leader].Mailbox, c.n)
	}
	res, err := c.gather(ctx, merr, "mapping the communicator's mailbox")
	if err != nil {
		if mb != nil {
			_ = mb.unmap()
		}
		c.cancel()
		if c.io != nil {
			_ = c.io.Close()
		}
		return err
	}
	if slices.ContainsFunc(res, func(p commProc) bool { return p.Err != "" }) {
		if mb != nil {
			_ = mb.unmap()
		}
		mb = nil
	}
	c.mb, c.reg.mb = mb, mb
	return nil
}

// inProcess reports whether every rank runs in this process.
func (c *Comm) inProcess() bool { return c.reg.inProc }

// Registered returns how many buffer registrations the communicator has
// made: own allocations exported to peers in other processes, peers'
// allocations mapped here (a steady-state call maps them where its
// launch is gated, after the call returned), and own allocations first
// shown to same-process peers.
func (c *Comm) Registered() int {
	return c.reg.count()
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
// without mailboxes (gpu.Config.MeetEveryCall). Otherwise the call is the
// steady state: its record goes to the host's mailbox and, queued, to
// the ranks on other hosts, and the peers' records of the same call are
// read and compared where the launch waits for them on the stream
// (gpu.Gater, gpu.Holder), else here; the caller makes no system call either
// way. A mismatch becomes the asynchronous error, and the launch is
// aborted before its kernel starts.
func (c *Comm) Enqueue(ctx context.Context, call Call) error {
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
func (c *Comm) CopyOnStream(st gpu.Stream, dst, src gpu.DevPtr, n uint64) error {
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
func (c *Comm) refuse(seq uint64, call Call, err error) {
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
