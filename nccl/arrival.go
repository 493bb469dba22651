package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor/cpu"
)

// arrive is the start of every call of a communicator whose ranks are
// processes running on host memory (hostProcs): this rank tells every
// other rank that it has come to the communicator's next call and which
// call it makes (sig, hostSig), and waits until every rank has said so of
// the same call. The caller holds p.mu.
//
// The wait is the call's only wait for peers that have not come: once
// every rank has arrived they launch together, so the CPU backend's
// deadlock watch (a launch that makes no progress for a second) never
// mistakes a late rank for a deadlock. Its bound is MSCCLGO_NCCL_TIMEOUT
// counted from this rank's own arrival, the first moment a peer could
// have come; a rank that arrives later still finds its early peers
// waiting. It ends at once when a peer is lost or leaves (its bootstrap
// connection closes) and when this rank's communicator ends (ncclCommAbort
// from another thread). Ranks that make different calls, at the first
// call or after any number of matching ones, fail on every rank with an
// error that names both calls.
//
// Where every rank is on this host the arrival goes through the ranks'
// arrival board in shared memory (arriveBoard), without a message;
// otherwise through the bootstrap, as follows.
//
// Each message is the sender's call number (8 bytes) and sig. A rank that
// gave up on a call (its timeout) has counted it: a late peer's message of
// that call is skipped by the ranks that moved on, and the late peer
// learns that they did.
func (p *hostProcs) arrive(c *comm, sig string) error {
	n := p.calls
	p.calls++
	if c.size == 1 {
		return nil
	}
	if p.board != nil {
		return p.arriveBoard(c, n, sig)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	defer context.AfterFunc(c.boot.Context(), cancel)()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-stopped:
		}
	}()
	where := arrivalWhere(c, sig, n)
	msg := binary.BigEndian.AppendUint64(nil, n)
	msg = append(msg, sig...)
	for q := range c.size {
		if q == c.rank {
			continue
		}
		if err := c.boot.Send(ctx, q, arrivalTag, msg); err != nil {
			return c.arrivalError(where, []int{q}, time.Since(start), err)
		}
	}
	type answer struct {
		from int
		sig  string
		err  error
	}
	answers := make(chan answer, c.size)
	for q := range c.size {
		if q == c.rank {
			continue
		}
		go func() {
			for {
				m, err := c.boot.Recv(ctx, q, arrivalTag)
				if err != nil {
					answers <- answer{from: q, err: err}
					return
				}
				if len(m) < 8 {
					answers <- answer{from: q, err: errorf(resultInternal, "a message of %d bytes from rank %d is not an arrival", len(m), q)}
					return
				}
				switch theirs := binary.BigEndian.Uint64(m); {
				case theirs < n:
					continue // a call this rank gave up on
				case theirs > n:
					answers <- answer{from: q, err: errorf(resultInvalidUsage, "rank %d has moved on to the communicator's call %d: it gave up on this one (its MSCCLGO_NCCL_TIMEOUT ended before this rank came)", q, theirs)}
					return
				}
				answers <- answer{from: q, sig: string(m[8:])}
				return
			}
		}()
	}
	missing := make([]int, 0, c.size-1)
	for q := range c.size {
		if q != c.rank {
			missing = append(missing, q)
		}
	}
	var first error
	for range c.size - 1 {
		a := <-answers
		missing = slices.DeleteFunc(missing, func(q int) bool { return q == a.from })
		switch {
		case a.err != nil:
			if first == nil {
				first = c.arrivalError(where, append(slices.Clone(missing), a.from), time.Since(start), a.err)
				cancel() // the others need not wait
			}
		case a.sig != sig && first == nil:
			at := "the communicator's first call"
			if n > 0 {
				at = fmt.Sprintf("the communicator's call %d, after %d that matched", n, n)
			}
			first = errorf(resultInvalidUsage, "mismatched calls: rank %d called %s, rank %d called %s (%s)", c.rank, sig, a.from, a.sig, at)
			cancel()
		}
	}
	return first
}

// arrivalWhere names call n of c with signature sig for arrive's errors.
func arrivalWhere(c *comm, sig string, n uint64) string {
	return fmt.Sprintf("rank %d of %d: %s (the communicator's call %d)", c.rank, c.size, sig, n)
}

// arriveBoard is arrive through the ranks' arrival board in shared
// memory (p.board): this rank posts call n and sig in its slot, then
// waits until every peer's slot says it has come to n (a short spin,
// then sleeps on the board's bell), with arrive's bound and its errors:
// the timeout, this rank's end, a peer's loss (the bootstrap's context)
// or departure (its slot says it left), a peer that gave up on n, and
// mismatched calls. A rank that stops waiting says so in its slot
// (GiveUp), so that a late peer learns that it moved on.
func (p *hostProcs) arriveBoard(c *comm, n uint64, sig string) error {
	b, mine, start := p.board, []byte(sig), time.Now()
	b.Post(n, mine)
	pending := make([]int, 0, c.size-1)
	for q := range c.size {
		if q != c.rank {
			pending = append(pending, q)
		}
	}
	where := arrivalWhere(c, sig, n)
	var first error
	check := func() bool {
		if c.stopped() {
			return true
		}
		pending = slices.DeleteFunc(pending, func(q int) bool {
			st, theirs, same, past := b.Peer(q, n, mine)
			switch {
			case st == cpu.PeerAbsent:
				return false
			case first != nil:
			case st == cpu.PeerArrived && !same:
				at := "the communicator's first call"
				if n > 0 {
					at = fmt.Sprintf("the communicator's call %d, after %d that matched", n, n)
				}
				first = errorf(resultInvalidUsage, "mismatched calls: rank %d called %s, rank %d called %s (%s)", c.rank, sig, q, theirs, at)
			case st == cpu.PeerMovedOn:
				first = c.arrivalError(where, []int{q}, time.Since(start), errorf(resultInvalidUsage, "rank %d has moved on to the communicator's call %d: it gave up on this one (its MSCCLGO_NCCL_TIMEOUT ended before this rank came)", q, max(past-1, n+1)))
			case st == cpu.PeerLeft:
				// It ended its communicator, which closes its
				// bootstrap: the error of the sockets' arrival.
				first = fmt.Errorf("%s: waiting for ranks %v to call: %w", where, []int{q}, &bootstrap.PeerClosedError{Rank: q})
			}
			return true
		})
		return len(pending) == 0 || first != nil
	}
	err := b.Wait(c.boot.Context(), c.timeout, check)
	switch {
	case err == nil && first != nil:
		return first
	case err == nil && !c.stopped():
		return nil
	}
	b.GiveUp(n)
	if err == nil {
		err = context.Canceled // this rank's end: arrivalError names it
	}
	return c.arrivalError(where, pending, time.Since(start), err)
}

// arrivalError is the error of a wait for the ranks missing to arrive
// that ended with err: the timeout, the communicator's end, or a peer's
// loss or departure (err names it).
func (c *comm) arrivalError(where string, missing []int, waited time.Duration, err error) error {
	slices.Sort(missing)
	var ne *ncclError
	switch {
	case errors.As(err, &ne) && ne.code == resultInvalidUsage:
		return fmt.Errorf("%s: %w", where, err)
	case c.stopped():
		return errorf(resultInvalidUsage, "%s: this rank ended its communicator (ncclCommDestroy or ncclCommAbort) while it waited for ranks %v to call", where, missing)
	case c.boot.Context().Err() != nil:
		return fmt.Errorf("%s: waiting for ranks %v to call: %w", where, missing, context.Cause(c.boot.Context()))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return errorf(resultInvalidUsage, "%s: ranks %v did not call within %v (MSCCLGO_NCCL_TIMEOUT, counted from this rank's call; waited %.1f s)", where, missing, c.timeout, waited.Seconds())
	}
	return fmt.Errorf("%s: waiting for ranks %v to call: %w", where, missing, err)
}

// stopped reports whether c's end (ncclCommDestroy, ncclCommAbort) has
// begun.
func (c *comm) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
