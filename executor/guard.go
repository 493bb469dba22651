package executor

import (
	"context"
	"errors"
	"fmt"
)

// ErrClosed is returned (after the backend's name) by the Launch of a
// closed session, on every backend.
var ErrClosed = errors.New("session closed")

// ErrUnusable is returned (after the backend's name, with the original
// cause) by Launch after a launch stopped part-way (a deadlock, a
// cancellation, an op or device error): channel counters, semaphores and
// barriers are then inconsistent, as on a hung GPU. Open a new session.
var ErrUnusable = errors.New("session unusable after a failed launch")

// Guard is what every backend's session checks before a launch: that it
// is not closed, that no earlier launch left it unusable, that the
// caller's context is live, and that it got buffers for each of its
// ranks. The session guards it with the mutex that serialises its Launch
// and Close.
type Guard struct {
	// Name is the backend's name, which starts the guard's errors.
	Name   string
	closed bool
	broken error
}

// Ready returns the error a launch should fail with before it starts,
// or nil: ErrClosed, ErrUnusable with the cause, or the context's error.
func (g *Guard) Ready(ctx context.Context) error {
	if g.closed {
		return fmt.Errorf("%s: %w", g.Name, ErrClosed)
	}
	if g.broken != nil {
		return fmt.Errorf("%s: %w: %w", g.Name, ErrUnusable, g.broken)
	}
	return ctx.Err()
}

// Launch is Ready, and then that a launch got buffers for want ranks.
func (g *Guard) Launch(ctx context.Context, bufs []RankBuffers, want int) error {
	if err := g.Ready(ctx); err != nil {
		return err
	}
	if len(bufs) != want {
		return fmt.Errorf("%s: launch: got buffers for %d ranks, want %d", g.Name, len(bufs), want)
	}
	return nil
}

// Fail records that a launch stopped part-way with err: later launches
// fail with ErrUnusable and err.
func (g *Guard) Fail(err error) { g.broken = err }

// Close marks the session closed and reports whether it was open (the
// caller then releases what the session holds, once).
func (g *Guard) Close() bool {
	was := !g.closed
	g.closed = true
	return was
}
