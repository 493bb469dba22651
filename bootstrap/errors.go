// This file holds the package's error values: the sentinel errors callers
// test with errors.Is, Error (which rank, which step), PeerLostError and
// PeerClosedError (which peer), and EnvError (which variable, which value).

package bootstrap

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error of the package wraps one of them (or a
// context error, or a network error) inside an *Error that names the rank
// and the step.
var (
	// ErrPeerLost: a rank went away without saying goodbye (its process
	// was killed or crashed, its host or the network went down, or it
	// stopped answering heartbeats). The error wrapping it is a
	// *PeerLostError naming the rank.
	ErrPeerLost = errors.New("peer lost")

	// ErrPeerClosed: a rank closed its Bootstrap (cleanly), so operations
	// that need it can no longer complete. The error wrapping it is a
	// *PeerClosedError naming the rank.
	ErrPeerClosed = errors.New("peer closed its bootstrap")

	// ErrClosed: this rank's Bootstrap is closed.
	ErrClosed = errors.New("bootstrap closed")

	// ErrFrameTooLarge: a frame longer than the receiver's limit
	// (Options.MaxMessage, or 64 KiB during the handshake), or a message
	// longer than the sender's limit.
	ErrFrameTooLarge = errors.New("frame too large")

	// ErrBadFrame: bytes that are not a frame of this protocol (wrong
	// magic, version or kind, or a malformed payload), or a frame that is
	// not expected at that point of the protocol.
	ErrBadFrame = errors.New("bad frame")

	// ErrCollective: a collective could not complete on every rank: ranks
	// called different collectives, or a rank abandoned one (its context
	// ended). Every later collective of the Bootstrap fails too.
	ErrCollective = errors.New("collective failed")
)

// Error is the error of every Bootstrap operation: the rank that reports
// it, the step that failed, and why.
//
//	bootstrap: rank 3: waiting for rank 0 at 10.0.0.1:29500: connect: connection refused after 30s
//	bootstrap: rank 0: handshake: rank 5 reported world size 4, this rank has 8
//	bootstrap: rank 2: barrier #7: rank 5 lost: connection closed without a goodbye (seen by rank 0)
type Error struct {
	Rank int    // the rank that reports the error
	Step string // what it was doing
	Err  error  // why it failed
}

// Error formats the error as "bootstrap: rank R: STEP: CAUSE".
func (e *Error) Error() string {
	return fmt.Sprintf("bootstrap: rank %d: %s: %v", e.Rank, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// PeerLostError says which rank was lost and how that was noticed. It
// wraps ErrPeerLost.
type PeerLostError struct {
	Rank   int    // the lost rank
	Reason string // e.g. "connection closed without a goodbye (seen by rank 0)"
}

// Error formats the error as "rank K lost: REASON".
func (e *PeerLostError) Error() string {
	return fmt.Sprintf("rank %d lost: %s", e.Rank, e.Reason)
}

// Unwrap returns ErrPeerLost.
func (e *PeerLostError) Unwrap() error { return ErrPeerLost }

// PeerClosedError says which rank closed its Bootstrap. It wraps
// ErrPeerClosed.
type PeerClosedError struct {
	Rank int // the rank that closed
}

// Error formats the error as "rank K closed its bootstrap".
func (e *PeerClosedError) Error() string {
	return fmt.Sprintf("rank %d closed its bootstrap", e.Rank)
}

// Unwrap returns ErrPeerClosed.
func (e *PeerClosedError) Unwrap() error { return ErrPeerClosed }

// EnvError is an environment variable FromEnv cannot accept.
type EnvError struct {
	Var    string // the variable, e.g. "OMPI_COMM_WORLD_RANK"
	Value  string // its value
	Reason string // what is wrong with it
}

// Error formats the error as `bootstrap: environment: VAR="VALUE": REASON`.
func (e *EnvError) Error() string {
	return fmt.Sprintf("bootstrap: environment: %s=%q: %s", e.Var, e.Value, e.Reason)
}
