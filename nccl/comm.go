package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/gpu"
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
	gpu      *gpu.Comm
	plansRun planFiles

	// custom is the state of a communicator of mscclgo.h (custom.go); nil
	// for an NCCL communicator. Guarded by mu.
	custom *customState

	mu    sync.Mutex
	state string // "" live, else the call that ended its use: "ncclCommFinalize"
}

// connect joins the bootstrap of w and makes the communicator.
func connect(w bootstrap.World, ln net.Listener, dev int, timeout time.Duration) (*comm, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b, err := bootstrap.Connect(ctx, w, bootstrap.Options{Timeout: timeout, Listener: ln})
	if err != nil {
		return nil, err
	}
	c := &comm{rank: w.Rank, size: w.Size, dev: dev, boot: b, timeout: timeout, ranksPerNode: w.Size}
	for _, h := range b.Hosts() {
		for _, r := range h.Ranks {
			if r == w.Rank {
				c.ranksPerNode = len(h.Ranks)
			}
		}
	}
	c.plans = loadPlans()
	if err := c.openDevice(); err != nil {
		b.Close()
		return nil, err
	}
	return c, nil
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
func initRank(nranks, rank int, id []byte, dev int, hasReal bool, realID []byte) (*comm, error) {
	if err := checkRanks(nranks, rank); err != nil {
		return nil, err
	}
	u, err := decodeID(id)
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	timeout, err := initTimeout()
	if err != nil {
		return nil, &ncclError{code: resultInvalidArgument, err: err}
	}
	var ln net.Listener
	if rank == 0 {
		ln = theLibrary.takeRoot(u)
	}
	c, err := connect(bootstrap.World{Rank: rank, Size: nranks, Master: u.addr, Token: u.tokenString()}, ln, dev, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.shareFallbackID(hasReal, realID); err != nil {
		c.boot.Close()
		return nil, err
	}
	if err := c.setUpHost(func() *hostHub { return theLibrary.hostHub(u, nranks) }); err != nil {
		c.boot.Close()
		return nil, err
	}
	return c, nil
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
			comms[r], errs[r] = connect(bootstrap.World{Rank: r, Size: len(devs), Master: u.addr, Token: u.tokenString()}, l, devs[r], timeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.boot.Close()
			}
		}
		return nil, err
	}
	h := newHostHub(len(comms))
	for _, c := range comms {
		c.hub = h
		h.join()
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
	nc, err := connect(bootstrap.World{Rank: newRank, Size: len(group), Master: addr, Token: token}, ln, c.dev, c.timeout)
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
	if err := nc.setUpHost(func() *hostHub { return theLibrary.hostHub(u, len(group)) }); err != nil {
		nc.boot.Close()
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

// finalize ends the communicator's collectives (ncclCommFinalize).
func (c *comm) finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != "" {
		return errorf(resultInvalidUsage, "rank %d of %d: ncclCommFinalize after %s", c.rank, c.size, c.state)
	}
	c.state = "ncclCommFinalize"
	return nil
}

// end closes the bootstrap (ncclCommDestroy, ncclCommAbort): the peers
// learn that this rank left, not that it was lost.
func (c *comm) end(abort bool) {
	if c.gpu != nil {
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
	c.closeHost()
	c.boot.Close()
	c.mu.Lock()
	cs := c.custom
	c.mu.Unlock()
	if cs != nil {
		cs.close()
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
