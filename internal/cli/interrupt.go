package cli

// interrupt.go turns SIGINT and SIGTERM into a cancelled context for the
// commands that write files (eval -o, install), so that they remove their
// temporary files and exit with 128 + the signal's number instead of
// dying where they stand.

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit statuses after a signal: 128 + its number, as a shell reports a
// process the signal killed.
const (
	// ExitInterrupted is the status after SIGINT (Ctrl-C).
	ExitInterrupted = 128 + 2
	// ExitTerminated is the status after SIGTERM.
	ExitTerminated = 128 + 15
)

// interruptedError is the cause of a context that interruptible cancelled:
// the signal that arrived. It is a context.Canceled.
type interruptedError struct{ sig os.Signal }

func (e *interruptedError) Error() string {
	switch e.sig {
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return "interrupted by " + e.sig.String()
}

// Is makes the error a context.Canceled.
func (e *interruptedError) Is(target error) bool { return target == context.Canceled }

// code is the exit status the signal gives.
func (e *interruptedError) code() int {
	if e.sig == syscall.SIGTERM {
		return ExitTerminated
	}
	return ExitInterrupted
}

// notifyInterrupt returns a context that SIGINT or SIGTERM cancels with an
// *interruptedError cause, and the function that stops listening. Until
// then, the signals do not kill the process: the first cancels the
// context, later ones are ignored while the command cleans up.
func notifyInterrupt(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(&interruptedError{sig: sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptible runs action with c.Context cancelled by SIGINT or SIGTERM.
// If a signal arrived and action failed (it stopped early and removed what
// it had written), the error carries the signal's exit status
// (ExitInterrupted or ExitTerminated) and action's message ("interrupted
// by SIGINT: removed ..."). An action that succeeded despite a late signal
// (it was past the point of no return) succeeds.
func interruptible(c *cli.Context, action func() error) error {
	parent := c.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := notifyInterrupt(parent)
	defer stop()
	c.Context = ctx
	defer func() { c.Context = parent }()
	err := action()
	var sig *interruptedError
	if err == nil || !errors.As(context.Cause(ctx), &sig) {
		return err
	}
	var reported *reportedError
	switch {
	case errors.As(err, &sig):
		return &exitError{code: sig.code(), msg: err.Error()}
	case errors.As(err, &reported) && reported.code > 128:
		// A worker process (--backend gpu) got the signal too and
		// reported it.
		return err
	}
	// The action stopped on the cancellation without saying so (an
	// evaluation cancelled mid-script has printed its traceback).
	return &exitError{code: sig.code(), msg: sig.Error()}
}

// interruptibleOutput is interruptible for a command with an -o OUT to
// clean up after (eval): without -o, nothing is written but standard
// output, and the signals keep their default effect.
func interruptibleOutput(c *cli.Context, action func() error) error {
	if c.String("output") == "" {
		return action()
	}
	return interruptible(c, action)
}
