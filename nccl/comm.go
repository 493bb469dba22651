package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/gpu/devcomm"
)

// result is an ncclResult_t value, as this package names the kinds of
// failure (exports.go turns it into the C value).
type result int

const (
	resultSuccess result = iota
	resultSystem
	resultInternal
	resultInvalidArgument
	resultInvalidUsage
	resultRemote
)

// ncclError is an error with the ncclResult_t a C caller gets for it.
type ncclError struct {
	code result
	err  error
}

func (e *ncclError) Error() string { return e.err.Error() }
func (e *ncclError) Unwrap() error { return e.err }

func errorf(code result, format string, args ...any) error {
	return &ncclError{code: code, err: fmt.Errorf(format, args...)}
}

// codeOf is the ncclResult_t of err: its own, a remote error for a lost
// peer, a system error otherwise.
func codeOf(err error) result {
	var ne *ncclError
	switch {
	case err == nil:
		return resultSuccess
	case errors.As(err, &ne):
		return ne.code
	case errors.Is(err, bootstrap.ErrPeerLost), errors.Is(err, bootstrap.ErrPeerClosed):
		return resultRemote
	}
	return resultSystem
}

// comm is one rank's mscclgo communicator: its bootstrap (connections to
// every rank, liveness), its place in the job, and the plans it may run.
type comm struct {
	rank, size, dev int
	ranksPerNode    int
	boot            *bootstrap.Bootstrap
	plans           planSet
	timeout         time.Duration

	// hub is where this process's ranks meet for host-memory runs
	// (hostrun.go); nil when they are off or a rank is elsewhere.
	hub *hostHub
	// procs are this rank's host-memory sessions when the ranks are
	// processes (hostrun.go); nil when they meet in hub.
	procs *hostProcs

	// gpu is the communicator's rank on the build's device backend
	// (device.go); nil without one. plansRun are the plans it has run.
	gpu      *devcomm.Comm
	plansRun planFiles
	// wire carries gpu's port channels between processes where it is a
	// fabric (device.go portNet), closed after gpu; nil over tcp.
	wire io.Closer
	// evictLogged is how many of gpu's plan instances closed to make
	// room the INFO log has told of; hostEvictLogged the same of the
	// host sessions (hostrun.go).
	evictLogged     atomic.Int64
	hostEvictLogged atomic.Int64
	// decided caches the decisions of calls (decideCached).
	decided decisions

	// custom is the state of a communicator of mscclgo.h (custom.go); nil
	// for an NCCL communicator. Guarded by mu.
	custom *customState

	// hubKey is the token hub was taken under (library.releaseHub).
	hubKey string

	// stop is closed when the communicator ends (destroy, abort): every
	// wait of its calls on the host gives up then.
	stop chan struct{}

	mu    sync.Mutex
	state string // "" live, else the call that ended its use: "ncclCommFinalize"
	ended string // "" until ncclCommDestroy or ncclCommAbort (the one that won)
	// ops are the reductions created on the communicator
	// (ncclRedOpCreatePreMulSum, the fallback's), which calls may name.
	ops map[int]bool
}

// connect joins the bootstrap of w and makes the communicator; it gives
// up when parent ends, with parent's cause.
func connect(parent context.Context, w bootstrap.World, ln net.Listener, dev int, timeout time.Duration) (*comm, error) {
	if w.Host == "" {
		w.Host = hostOverride()
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	b, err := bootstrap.Connect(ctx, w, bootstrap.Options{Timeout: timeout, Listener: ln})
	if err != nil {
		if cause := context.Cause(parent); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	c := &comm{rank: w.Rank, size: w.Size, dev: dev, boot: b, timeout: timeout, ranksPerNode: w.Size, stop: make(chan struct{})}
	for _, h := range b.Hosts() {
		for _, r := range h.Ranks {
			if r == w.Rank {
				c.ranksPerNode = len(h.Ranks)
			}
		}
	}
	c.plans = loadPlans()
	if err := c.checkDevices(); err != nil {
		b.Close()
		return nil, err
	}
	if err := c.openDevice(); err != nil {
		b.Close()
		return nil, err
	}
	return c, nil
}

// ofRank prefixes err with the rank it happened on, unless its text
// already starts so (the device's set-up names the rank itself, since
// ncclCommInitAll's ranks fail side by side).
func ofRank(rank, n int, err error) error {
	p := fmt.Sprintf("rank %d of %d: ", rank, n)
	if strings.HasPrefix(err.Error(), p) {
		return err
	}
	return fmt.Errorf("%s%w", p, err)
}

// hostOverride is the name this process's ranks give their host in the
// rank table, which groups the ranks per host (the memory channels of a
// plan stay inside a host, port channels cross hosts): MSCCLGO_HOST, as
// `mscclgo run` reads it, else NCCL_HOSTID, NCCL's own override, else ""
// (the bootstrap takes the machine's host name). Two processes on one
// machine with different names are ranks of different hosts: how the
// tests make a job of several hosts on one machine.
func hostOverride() string {
	if h := os.Getenv(bootstrap.EnvHost); h != "" {
		return h
	}
	return os.Getenv("NCCL_HOSTID")
}

// checkRanks checks ncclCommInitRank's rank and count.
func checkRanks(nranks, rank int) error {
	switch {
	case nranks < 1:
		return errorf(resultInvalidArgument, "nranks %d: must be at least 1", nranks)
	case nranks > bootstrap.MaxWorldSize:
		return errorf(resultInvalidArgument, "nranks %d: at most %d ranks", nranks, bootstrap.MaxWorldSize)
	case rank < 0 || rank >= nranks:
		return errorf(resultInvalidArgument, "rank %d outside the %d ranks of the communicator (0 to %d)", rank, nranks, nranks-1)
	}
	return nil
}

// initRank is ncclCommInitRank's mscclgo half: it joins the ranks of id
// and, when the ranks have a fallback NCCL, hands rank 0's fallback id
// (realID, filled by rank 0) to every rank.
//
// An init refused for its arguments (nranks, rank, the timeout's
// variable) has not used the id: the id stays as it was, its listener
// open, for an init that names it rightly. Any later refusal or failure
// spends the id (library.spendID): its listener, if this process made
// it, is closed, and a later use of it is refused by name.
//
// The set-up gives up when abort ends (with its cause): a nonblocking
// init's ncclCommAbort; abort is context.Background() where nothing can
// abort the init.
func initRank(abort context.Context, nranks, rank int, id []byte, dev int, hasReal bool, realID []byte) (*comm, error) {
	u, err := decodeID(id)
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	if err := checkRanks(nranks, rank); err != nil {
		return nil, err
	}
	timeout, err := initTimeout()
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	c, err := initRankOf(abort, u, nranks, rank, dev, timeout, hasReal, realID)
	if err != nil {
		theLibrary.spendID(u, nranks, fmt.Sprintf("the ncclCommInitRank of rank %d of %d failed: %v", rank, nranks, err))
	}
	return c, err
}

func initRankOf(abort context.Context, u uniqueID, nranks, rank, dev int, timeout time.Duration, hasReal bool, realID []byte) (*comm, error) {
	idCtx, err := theLibrary.joinID(u, nranks, rank)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	if rank == 0 {
		ln = theLibrary.takeRoot(u)
	}
	ctx, cancel := context.WithCancelCause(idCtx)
	defer cancel(nil)
	defer context.AfterFunc(abort, func() { cancel(context.Cause(abort)) })()
	c, err := connect(ctx, bootstrap.World{Rank: rank, Size: nranks, Master: u.addr, Token: u.tokenString(), TokenFrom: "the ncclUniqueId"}, ln, dev, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.shareFallbackID(hasReal, realID); err != nil {
		c.end("its failed ncclCommInitRank")
		return nil, err
	}
	if err := c.setUpHost(u.tokenString(), func() *hostHub { return theLibrary.hostHub(u, nranks) }); err != nil {
		c.end("its failed ncclCommInitRank")
		return nil, err
	}
	return c, nil
}

// sharedDeviceVar allows ranks of one communicator in one process on one
// device (checkDevices).
const sharedDeviceVar = "MSCCLGO_NCCL_SHARED_DEVICE"

// checkDevices refuses, as NCCL does, two ranks of c that are threads of
// one process on one device, when the build runs plans on devices
// (their launches would wait for each other on the one device) and
// MSCCLGO_NCCL_SHARED_DEVICE=1 does not allow it. Ranks of different
// processes are not compared: each process may see other GPUs under a
// number (CUDA_VISIBLE_DEVICES). Every rank of c calls it at once.
func (c *comm) checkDevices() error {
	if !theLibrary.hasDevices() || c.size == 1 {
		return nil
	}
	switch v := os.Getenv(sharedDeviceVar); v {
	case "1":
		return nil
	case "", "0":
	default:
		return errorf(resultInvalidArgument, "rank %d of %d: %s=%q: want 1 (ranks of one process may share a device) or 0", c.rank, c.size, sharedDeviceVar, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	mine := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(os.Getpid())), uint64(int64(c.dev)))
	all, err := c.boot.AllGather(ctx, mine)
	if err != nil {
		return err
	}
	for r, p := range all {
		for q := range r {
			if bytes.Equal(all[q], p) {
				return errorf(resultInvalidUsage, "ranks %d and %d of %d are threads of one process on device %d: NCCL refuses a duplicate GPU (call cudaSetDevice before the init of each rank, or set %s=1 to let ranks share a device)",
					q, r, c.size, c.dev, sharedDeviceVar)
			}
		}
	}
	return nil
}

// allInProcess reports whether every rank of c is a thread of this
// process.
func (c *comm) allInProcess() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	pid := binary.BigEndian.AppendUint64(nil, uint64(os.Getpid()))
	all, err := c.boot.AllGather(ctx, pid)
	if err != nil {
		return false, err
	}
	for _, p := range all {
		if !bytes.Equal(p, pid) {
			return false, nil
		}
	}
	return true, nil
}

// shareFallbackID checks that every rank has a fallback NCCL, or none,
// and copies rank 0's fallback id into realID.
func (c *comm) shareFallbackID(hasReal bool, realID []byte) error {
	mine := make([]byte, 1+len(realID))
	if hasReal {
		mine[0] = 1
	}
	copy(mine[1:], realID)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	all, err := c.boot.AllGather(ctx, mine)
	if err != nil {
		return err
	}
	for r, p := range all {
		if len(p) != len(mine) {
			return errorf(resultInternal, "rank %d sent a fallback id of %d bytes, this rank %d", r, len(p), len(mine))
		}
		if p[0] != mine[0] {
			return errorf(resultInvalidUsage, "rank %d %s a fallback NCCL and rank %d %s: set MSCCLGO_NCCL_FALLBACK alike on every rank",
				r, hasOrNot(p[0] == 1), c.rank, hasOrNot(hasReal))
		}
	}
	copy(realID, all[0][1:])
	return nil
}

func hasOrNot(b bool) string {
	if b {
		return "has"
	}
	return "has no"
}

// initAll is ncclCommInitAll's mscclgo half: ndev ranks in this process,
// each joined from its own goroutine.
func initAll(devs []int) ([]*comm, error) {
	timeout, err := initTimeout()
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	max, err := maxSessions()
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	u, ln, err := newID("127.0.0.1")
	if err != nil {
		return nil, err
	}
	comms := make([]*comm, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for r := range devs {
		var l net.Listener
		if r == 0 {
			l = ln
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = connect(context.Background(), bootstrap.World{Rank: r, Size: len(devs), Master: u.addr, Token: u.tokenString(), TokenFrom: "the ncclUniqueId"}, l, devs[r], timeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.end("its failed ncclCommInitAll")
			}
		}
		return nil, err
	}
	h := newHostHub(len(comms))
	for _, c := range comms {
		c.hub = h
		h.join(max)
	}
	return comms, nil
}

// noColor is NCCL_SPLIT_NOCOLOR.
const noColor = -1

// split is ncclCommSplit's mscclgo half: the ranks of each color form a
// communicator, ordered by key then parent rank. A rank of noColor takes
// part and gets nil. Every rank of c must call it.
func (c *comm) split(color, key int) (*comm, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	mine := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(int64(color))), uint64(int64(key)))
	all, err := c.boot.AllGather(ctx, mine)
	if err != nil {
		return nil, err
	}
	type member struct{ rank, color, key int }
	var group []member
	for r, p := range all {
		if len(p) != 16 {
			return nil, errorf(resultInternal, "rank %d sent a split request of %d bytes, want 16", r, len(p))
		}
		m := member{rank: r, color: int(int64(binary.BigEndian.Uint64(p[:8]))), key: int(int64(binary.BigEndian.Uint64(p[8:])))}
		if m.color == color && color != noColor {
			group = append(group, m)
		}
	}
	sort.SliceStable(group, func(i, j int) bool { return group[i].key < group[j].key })
	newRank := -1
	for i, m := range group {
		if m.rank == c.rank {
			newRank = i
		}
	}
	// The new rank 0 of each color listens and tells its group where.
	var ln net.Listener
	var offer []byte
	if newRank == 0 {
		var token [16]byte
		if _, err := rand.Read(token[:]); err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(c.boot.Peers()[c.rank].Addr)
		if err != nil || c.size == 1 {
			host = "127.0.0.1"
		}
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("split: bootstrap listener on %s: %w", host, err)
		}
		offer = []byte(hex.EncodeToString(token[:]) + " " + ln.Addr().String())
	}
	offers, err := c.boot.AllGather(ctx, offer)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	if newRank < 0 {
		return nil, nil
	}
	var token, addr string
	if _, err := fmt.Sscan(string(offers[group[0].rank]), &token, &addr); err != nil {
		return nil, errorf(resultInternal, "split: rank %d offered %q: %v", group[0].rank, offers[group[0].rank], err)
	}
	nc, err := connect(context.Background(), bootstrap.World{Rank: newRank, Size: len(group), Master: addr, Token: token, TokenFrom: "the parent communicator's split"}, ln, c.dev, c.timeout)
	if err != nil {
		return nc, err
	}
	tok, err := hex.DecodeString(token)
	if err != nil || len(tok) != 16 {
		nc.boot.Close()
		return nil, errorf(resultInternal, "split: rank %d offered the token %q", group[0].rank, token)
	}
	var u uniqueID
	copy(u.token[:], tok)
	if err := nc.setUpHost(u.tokenString(), func() *hostHub { return theLibrary.hostHub(u, len(group)) }); err != nil {
		nc.end("its failed ncclCommSplit")
		return nil, err
	}
	return nc, nil
}

// use checks that the communicator may still run collectives.
func (c *comm) use() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != "" {
		return errorf(resultInvalidUsage, "rank %d of %d: used after %s", c.rank, c.size, c.state)
	}
	return nil
}

// finalize ends the communicator's collectives (ncclCommFinalize). A
// second finalize, or one after the end, is refused with
// ncclInvalidUsage (a call in the wrong state).
func (c *comm) finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != "" {
		return errorf(resultInvalidUsage, "rank %d of %d: ncclCommFinalize after %s", c.rank, c.size, c.state)
	}
	c.state = "ncclCommFinalize"
	return nil
}

// addOp records reduction op created (or, with created unset, destroyed)
// on the communicator.
func (c *comm) addOp(op int, created bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[int]bool{}
	}
	if created {
		c.ops[op] = true
	} else {
		delete(c.ops, op)
	}
}

// hasOp reports whether reduction op was created on the communicator.
func (c *comm) hasOp(op int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

// end ends the communicator for fn (ncclCommDestroy, ncclCommAbort, or a
// failed init): once; a second end, concurrent or later, is refused
// (ncclInvalidUsage).
// Every wait of its calls on the host is woken (stop), launches still
// running are stopped (abort) or waited for, and the bootstrap is closed:
// the peers learn that this rank left, not that it was lost.
func (c *comm) end(fn string) error {
	c.mu.Lock()
	if c.ended != "" {
		c.mu.Unlock()
		return errorf(resultInvalidUsage, "rank %d of %d: %s after %s", c.rank, c.size, fn, c.ended)
	}
	c.ended = fn
	if c.state == "" || c.state == "ncclCommFinalize" {
		c.state = fn
	}
	close(c.stop)
	c.mu.Unlock()
	c.endNow(fn == "ncclCommAbort")
	if c.hub != nil {
		theLibrary.releaseHub(c.hubKey, c.hub)
	}
	return nil
}

// endNow is end's work.
func (c *comm) endNow(abort bool) {
	if c.gpu != nil {
		if !abort {
			c.settleHosts()
		}
		// Launches still running end first (Abort stops them).
		var err error
		if abort {
			err = c.gpu.Abort()
		} else {
			err = c.gpu.Close()
		}
		if err != nil && logging() {
			logInfo("rank %d of %d: closing its plan sessions: %v", c.rank, c.size, err)
		}
	}
	if c.wire != nil {
		// Before the call returns: a process that exits with the
		// wire's progress loop still reading the completion queue
		// crashes in libfabric's teardown.
		if err := c.wire.Close(); err != nil && logging() {
			logInfo("rank %d of %d: closing its fabric wire: %v", c.rank, c.size, err)
		}
	}
	c.closeHost()
	c.boot.Close()
	c.mu.Lock()
	cs := c.custom
	c.mu.Unlock()
	if cs != nil {
		cs.close()
	}
}

// settleHosts is the first step of ncclCommDestroy on a communicator
// whose ranks span hosts: this rank waits for its launches to be served,
// then for every rank to have done the same (a bootstrap barrier), each
// at most the set-up timeout. A rank's port traffic to another host is
// applied there by that rank's receivers, which end with its
// communicator: without this, a rank whose last launch had ended
// destroyed its communicator while a peer's last launch still waited for
// it to apply that peer's traffic, and that launch failed (its output
// never written). A rank that aborts, or is lost, ends the barrier at
// once.
func (c *comm) settleHosts() {
	if len(c.boot.Hosts()) < 2 {
		return
	}
	if err := c.gpu.Quiet(c.timeout); err != nil && logging() {
		logInfo("rank %d of %d: waiting for its launches before the end: %v", c.rank, c.size, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.boot.Barrier(ctx); err != nil && logging() {
		logInfo("rank %d of %d: waiting for the ranks on other hosts to end their launches: %v", c.rank, c.size, err)
	}
}

// asyncError is ncclCommGetAsyncError's mscclgo half: a lost peer is a
// remote error, with the loss in the message.
func (c *comm) asyncError() error {
	if c.gpu != nil {
		if err := c.gpu.AsyncError(); err != nil {
			return &ncclError{code: resultRemote, err: fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err)}
		}
	}
	ctx := c.boot.Context()
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, bootstrap.ErrClosed) {
		return nil
	}
	return &ncclError{code: resultRemote, err: fmt.Errorf("rank %d of %d: %w", c.rank, c.size, cause)}
}
