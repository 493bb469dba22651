package sigctx

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestNotifyInterrupt sends SIGTERM to the test process itself while
// Notify listens: the context is cancelled with the signal as its
// cause, and the process lives. Not parallel: no other test may be
// listening to the signal meanwhile.
func TestNotifyInterrupt(t *testing.T) {
	ctx, stop := Notify(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("no cancellation a minute after SIGTERM")
	}
	var sig *Signal
	if !errors.As(context.Cause(ctx), &sig) || sig.Code() != ExitTerminated || sig.Error() != "interrupted by SIGTERM" {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Error("the cause is not a context.Canceled")
	}
	if (&Signal{Sig: os.Interrupt}).Code() != ExitInterrupted {
		t.Error("SIGINT's status")
	}
}
