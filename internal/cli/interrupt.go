package cli

// interrupt.go turns SIGINT and SIGTERM into a cancelled context for the
// commands that write files (eval -o, install), so that they remove their
// temporary files and exit with 128 + the signal's number instead of
// dying where they stand.

import (
	"context"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/internal/sigctx"
)

// Exit statuses after a signal: 128 + its number, as a shell reports a
// process the signal killed.
const (
	// ExitInterrupted is the status after SIGINT (Ctrl-C).
	ExitInterrupted = sigctx.ExitInterrupted
	// ExitTerminated is the status after SIGTERM.
	ExitTerminated = sigctx.ExitTerminated
)

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
	ctx, stop := sigctx.Notify(parent)
	defer stop()
	c.Context = ctx
	defer func() { c.Context = parent }()
	err := action()
	var sig *sigctx.Signal
	if err == nil || !errors.As(context.Cause(ctx), &sig) {
		return err
	}
	var reported *reportedError
	switch {
	case errors.As(err, &sig):
		return &exitError{code: sig.Code(), msg: err.Error()}
	case errors.As(err, &reported) && reported.code > 128:
		// A worker process (--backend gpu) got the signal too and
		// reported it.
		return err
	}
	// The action stopped on the cancellation without saying so (an
	// evaluation cancelled mid-script has printed its traceback).
	return &exitError{code: sig.Code(), msg: sig.Error()}
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
