// This file holds Options, Bootstrap and its life cycle: Connect, the
// accessors of the rank table, Close and the shared state every other
// file works on.

package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options tune Connect. The zero value is usable.
type Options struct {
	// Timeout bounds the set-up (default 60 s): rank 0 waits this long for
	// every rank to join, the others retry connecting to rank 0 (with
	// backoff) this long, so a rank started late within it still joins.
	// It also bounds opening a peer connection and a peer's first frame.
	// A deadline of Connect's context that comes sooner wins.
	Timeout time.Duration

	// HeartbeatInterval is how often each end of a control connection (a
	// rank and rank 0) sends a heartbeat (default 2 s).
	HeartbeatInterval time.Duration

	// HeartbeatTimeout is how long a control connection may stay silent
	// before its peer is declared lost (default 20 s). A killed process is
	// noticed at once, from its closed connections; this bounds the rest
	// (a host or network failure, a stopped process).
	HeartbeatTimeout time.Duration

	// CloseTimeout bounds how long Close waits for each peer to
	// acknowledge its goodbye (default 5 s).
	CloseTimeout time.Duration

	// MaxMessage is the largest message Send and AllGather accept and
	// the largest frame this rank reads from a peer (default 1 GiB). A
	// larger incoming frame is refused with ErrFrameTooLarge.
	MaxMessage int64

	// Listener, if set, is the listener this rank accepts on instead of
	// opening one (tests, or a caller that already holds the port): on
	// rank 0 the rendezvous (its address replaces World.Master for rank 0
	// itself, and is what it writes in World.RendezvousFile), on the
	// others their peer connections (its address is what they advertise).
	// The Bootstrap closes it.
	Listener net.Listener

	// ListenHost is the address the other ranks listen on for their peer
	// connections (port chosen by the system). Default: the local address
	// of their connection to rank 0, i.e. the interface that reaches it.
	ListenHost string

	// Hostname names this rank's host in the rank table. Default:
	// World.Host, else os.Hostname().
	Hostname string

	// Logf, if set, receives diagnostics that are not errors of any call
	// (a connection refused because it spoke garbage, a frame dropped).
	Logf func(format string, args ...any)
}

// Defaults of Options, used for its zero fields.
const (
	DefaultTimeout           = 60 * time.Second // Options.Timeout
	DefaultHeartbeatInterval = 2 * time.Second  // Options.HeartbeatInterval
	DefaultHeartbeatTimeout  = 20 * time.Second // Options.HeartbeatTimeout
	DefaultCloseTimeout      = 5 * time.Second  // Options.CloseTimeout
	DefaultMaxMessage        = 1 << 30          // Options.MaxMessage (1 GiB)
)

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.HeartbeatTimeout < 2*o.HeartbeatInterval {
		o.HeartbeatTimeout = 2 * o.HeartbeatInterval
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = DefaultCloseTimeout
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	return o
}

// Peer is one rank's entry in the rank table every rank receives.
type Peer struct {
	Rank      int    // the rank, also its index in the table
	Host      string // host name, as the rank reported it
	Addr      string // host:port the rank accepts peer connections on
	LocalRank int    // as its launcher said; meaningful when LocalSize > 0
	LocalSize int    // 0: unknown
}

// LostRank is one loss, as delivered by Bootstrap.Lost.
type LostRank struct {
	Rank   int    // the lost rank
	Reason string // how it was noticed
}

// Bootstrap is a connected rank: it knows every rank's host and address,
// runs collectives over rank 0, point-to-point messages over direct
// connections, and watches every rank's liveness. Its methods are safe
// for concurrent use, except that collectives (AllGather, Barrier) are
// one at a time and must be called in the same order on every rank.
type Bootstrap struct {
	rank, size int
	opts       Options
	peers      []Peer
	hosts      []Host
	session    uint64
	ln         net.Listener // nil in a world of one
	rdzvFile   string       // rank 0: the rendezvous file to remove
	key        []byte       // the job's secret (rank 0, or from World.Token)
	keyFile    string       // where the secret is shared, if not World.Token
	keyFrom    string       // World.TokenFrom
	ownKeyFile bool         // rank 0: it wrote keyFile, to remove
	deadline   time.Time    // end of the set-up

	// set-up of rank 0: the accept loop hands hellos over joinCh until
	// setupOver is closed; setupErr is why the set-up failed, if it did.
	joinCh    chan joined
	setupOver chan struct{}
	setupErr  error // guarded by mu

	ctrl []*link       // control links: rank 0 has one per rank, the others ctrl[0]
	out  []*outLink    // per peer, the data link this rank dialed
	coll chan struct{} // one collective at a time
	seq  uint32        // guarded by coll: the last collective's number

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Close: pingers stop
	wg     sync.WaitGroup

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change below
	closed     bool
	lost       []*PeerLostError
	noticed    []bool // a loss is being (or was) recorded
	departed   []bool
	lostCh     chan LostRank
	pending    map[net.Conn]struct{} // accepted, first frame not read yet
	in         []*link               // per peer, the data link it dialed to this rank
	inErr      []error               // per peer, why its data link was refused
	inbox      map[inKey][][]byte
	departedAt []time.Time // when departed was set
	collErr    error       // set when a collective failed on the whole job
	failSent   bool        // rank 0: the ranks were told collectives failed
	rootDone   uint32      // rank 0: the last collective it completed
	telling    int         // rank 0: notices being sent to every rank
	contrib    [][]collMsg // rank 0: contributions queued per rank
	res        *collResult // others: the collective in flight
}

// inKey names a queue of received messages.
type inKey struct {
	peer int
	tag  uint32
}

// outLink is the data link to one peer.
type outLink struct {
	sem chan struct{} // held by the send in progress (and dialing)
	l   *link         // guarded by Bootstrap.mu; nil until dialed
	err error         // guarded by Bootstrap.mu; why it may not be used
}

// Connect joins the job: rank 0 accepts every rank and sends each the
// rank table; the others find rank 0 (World.Master, or the rendezvous
// file), retrying until Options.Timeout, and announce themselves. It
// returns once this rank has the table. Every error is an *Error naming
// this rank and the step.
func Connect(ctx context.Context, w World, opts Options) (*Bootstrap, error) {
	opts = opts.withDefaults()
	if err := w.check(opts.Listener != nil); err != nil {
		return nil, &Error{Rank: w.Rank, Step: "set-up", Err: err}
	}
	host := opts.Hostname
	if host == "" {
		host = w.Host
	}
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, &Error{Rank: w.Rank, Step: "set-up", Err: fmt.Errorf("host name: %w", err)}
		}
		host = h
	}
	if len(host) > maxString {
		return nil, &Error{Rank: w.Rank, Step: "set-up", Err: fmt.Errorf("host name of %d bytes, limit %d", len(host), maxString)}
	}
	b := &Bootstrap{
		rank: w.Rank, size: w.Size, opts: opts,
		coll:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		changed:    make(chan struct{}),
		lost:       make([]*PeerLostError, w.Size),
		noticed:    make([]bool, w.Size),
		departed:   make([]bool, w.Size),
		departedAt: make([]time.Time, w.Size),
		lostCh:     make(chan LostRank, w.Size),
		in:         make([]*link, w.Size),
		inErr:      make([]error, w.Size),
		inbox:      map[inKey][][]byte{},
		pending:    map[net.Conn]struct{}{},
		out:        make([]*outLink, w.Size),
		ctrl:       make([]*link, w.Size),
		contrib:    make([][]collMsg, w.Size),
	}
	for i := range b.out {
		b.out[i] = &outLink{sem: make(chan struct{}, 1)}
	}
	if w.Size > 1 {
		switch {
		case w.Token != "":
			b.key, b.keyFrom = []byte(w.Token), w.TokenFrom
		case w.SecretFile != "":
			b.keyFile = w.SecretFile
		case w.RendezvousFile != "":
			b.keyFile = w.RendezvousFile + ".key"
		default:
			return nil, &Error{Rank: w.Rank, Step: "set-up", Err: fmt.Errorf("no job secret: World.Token, World.SecretFile and World.RendezvousFile are all empty (set %s to a secret every rank shares)", EnvJobToken)}
		}
	}
	b.ctx, b.cancel = context.WithCancelCause(context.Background())
	b.deadline = time.Now().Add(opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(b.deadline) {
		b.deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, b.deadline)
	defer cancel()

	self := Peer{Rank: w.Rank, Host: host, LocalRank: w.LocalRank, LocalSize: w.LocalSize}
	var err error
	switch {
	case w.Size == 1:
		if opts.Listener != nil {
			opts.Listener.Close()
		}
		b.peers = []Peer{self}
	case w.Rank == 0:
		err = b.setupRoot(ctx, w, self)
	default:
		err = b.setupJoin(ctx, w, self)
	}
	if err != nil {
		b.abort()
		if opts.Listener != nil {
			opts.Listener.Close()
		}
		return nil, err
	}
	b.hosts = groupHosts(b.peers)
	b.start()
	return b, nil
}

// Rank returns this rank.
func (b *Bootstrap) Rank() int { return b.rank }

// Size returns the number of ranks.
func (b *Bootstrap) Size() int { return b.size }

// Peers returns the rank table, indexed by rank.
func (b *Bootstrap) Peers() []Peer { return slices.Clone(b.peers) }

// Hosts returns the ranks grouped per host (see Host).
func (b *Bootstrap) Hosts() []Host {
	hs := make([]Host, len(b.hosts))
	for i, h := range b.hosts {
		hs[i] = Host{Name: h.Name, Ranks: slices.Clone(h.Ranks)}
	}
	return hs
}

// Lost returns a channel that receives each rank this rank learns was
// lost, once, in the order learnt. It is closed by Close. A rank that
// closed its Bootstrap is not lost.
func (b *Bootstrap) Lost() <-chan LostRank { return b.lostCh }

// Context returns a context cancelled at the first loss, with a
// *PeerLostError as its cause (context.Cause), or by Close, with cause
// ErrClosed. Work that must stop when any rank dies can derive from it.
func (b *Bootstrap) Context() context.Context { return b.ctx }

// Close says goodbye to every peer, so that none of them reports this
// rank lost, and releases the connections. Operations in progress fail
// with ErrClosed. Closing after a final Barrier lets every rank finish
// its last operation first. Close before exiting after an error too: the
// peers then learn that this rank closed, rather than that it was lost,
// and what it was still sending reaches them. Close always returns nil;
// a second Close does nothing.
func (b *Bootstrap) Close() error {
	links := b.shut()
	if links == nil {
		return nil
	}
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.closeGracefully(b.opts.CloseTimeout)
		}()
	}
	wg.Wait()
	b.wg.Wait()
	b.removeRendezvous()
	return nil
}

// abort closes everything at once, without goodbyes, as a killed process
// would: its peers report this rank lost.
func (b *Bootstrap) abort() {
	for _, l := range b.shut() {
		l.kill()
	}
	b.wg.Wait()
	b.removeRendezvous()
}

// shut marks the Bootstrap closed, wakes every waiter and returns the
// links to close (nil if it was closed already).
func (b *Bootstrap) shut() []*link {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.lostCh)
	close(b.stop)
	b.cancel(ErrClosed)
	b.notifyLocked()
	links := []*link{}
	for _, l := range b.ctrl {
		if l != nil {
			links = append(links, l)
		}
	}
	for i, l := range b.in {
		if l != nil {
			links = append(links, l)
		}
		if o := b.out[i]; o.l != nil {
			links = append(links, o.l)
		}
	}
	for c := range b.pending {
		c.Close()
	}
	ln := b.ln
	b.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	return links
}

// removeRendezvous removes rank 0's rendezvous file and secret file if
// they are still there.
func (b *Bootstrap) removeRendezvous() {
	if b.rdzvFile != "" {
		os.Remove(b.rdzvFile)
	}
	if b.ownKeyFile {
		os.Remove(b.keyFile)
	}
}

// notifyLocked wakes every waiter. b.mu must be held.
func (b *Bootstrap) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// spawn runs f in a goroutine Close waits for, unless b is closed.
func (b *Bootstrap) spawn(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// errorf wraps a cause into an *Error of this rank.
func (b *Bootstrap) errorf(step string, err error) error {
	return &Error{Rank: b.rank, Step: step, Err: err}
}

// logf passes a diagnostic to Options.Logf.
func (b *Bootstrap) logf(format string, args ...any) {
	if b.opts.Logf != nil {
		b.opts.Logf("bootstrap: rank %d: "+format, append([]any{b.rank}, args...)...)
	}
}

// peerErrLocked reports why rank p cannot take part in an operation: this
// Bootstrap closed, p lost, or p closed. b.mu must be held.
func (b *Bootstrap) peerErrLocked(p int) error {
	switch {
	case b.closed:
		return ErrClosed
	case b.lost[p] != nil:
		return b.lost[p]
	case b.departed[p]:
		return &PeerClosedError{Rank: p}
	}
	return nil
}

// anyGoneLocked reports the first lost rank, else the first closed one,
// else nil. b.mu must be held.
func (b *Bootstrap) anyGoneLocked() error {
	for _, e := range b.lost {
		if e != nil {
			return e
		}
	}
	for p, d := range b.departed {
		if d {
			return &PeerClosedError{Rank: p}
		}
	}
	return nil
}

// wait blocks until the state changes or ctx ends (its cause returned).
// ch must be b.changed read under b.mu.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// rankList formats ranks as "rank 3" or "ranks 2, 5, 7"; a long list
// names its first maxListed ranks and counts the others, so that an
// error line stays readable in a job of thousands.
func rankList(ranks []int) string {
	if len(ranks) == 1 {
		return fmt.Sprint("rank ", ranks[0])
	}
	s := make([]string, 0, min(len(ranks), maxListed))
	for _, r := range ranks[:min(len(ranks), maxListed)] {
		s = append(s, fmt.Sprint(r))
	}
	text := "ranks " + strings.Join(s, ", ")
	if len(ranks) > maxListed {
		text += fmt.Sprintf(" and %d more", len(ranks)-maxListed)
	}
	return text
}

// maxListed is how many ranks an error names before it counts the rest.
const maxListed = 16

// shortNetErr drops the "dial tcp A->B:" prefix of a network error,
// keeping the system's reason ("connect: connection refused").
func shortNetErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// since formats the time since start for error messages.
func since(start time.Time) string {
	d := time.Since(start)
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}
