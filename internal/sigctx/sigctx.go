// Package sigctx turns SIGINT and SIGTERM into the cancellation of a
// context, so that a command can remove what it was writing and exit with
// 128 + the signal's number instead of dying where it stands.
//
// To start:
//
//	ctx, stop := sigctx.Notify(context.Background())
//	defer stop()
//	// ... on ctx.Done(), context.Cause(ctx) is a *sigctx.Signal.
package sigctx

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses after a signal: 128 + its number, as a shell reports a
// process the signal killed.
const (
	// ExitInterrupted is the status after SIGINT (Ctrl-C).
	ExitInterrupted = 128 + 2
	// ExitTerminated is the status after SIGTERM.
	ExitTerminated = 128 + 15
)

// Signal is the cause of a context that Notify cancelled: the signal
// that arrived. It is a context.Canceled.
type Signal struct{ Sig os.Signal }

// Error says which signal arrived: "interrupted by SIGINT".
func (e *Signal) Error() string {
	switch e.Sig {
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return "interrupted by " + e.Sig.String()
}

// Is makes the error a context.Canceled.
func (e *Signal) Is(target error) bool { return target == context.Canceled }

// Code is the exit status the signal gives: ExitTerminated or
// ExitInterrupted.
func (e *Signal) Code() int {
	if e.Sig == syscall.SIGTERM {
		return ExitTerminated
	}
	return ExitInterrupted
}

// Notify returns a context that SIGINT or SIGTERM cancels with a *Signal
// cause, and the function that stops listening. Until
// then, the signals do not kill the process: the first cancels the
// context, later ones are ignored while the command cleans up.
func Notify(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(&Signal{Sig: sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}
