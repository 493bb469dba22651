package cli

// interrupt_test.go tests the signal context and the interrupted writes of
// eval -o in process; tests/hostile sends real signals to real mscclgo
// processes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNotifyInterrupt sends SIGTERM to the test process itself while
// notifyInterrupt listens: the context is cancelled with the signal as its
// cause, and the process lives. Not parallel: no other test may be
// listening to the signal meanwhile.
func TestNotifyInterrupt(t *testing.T) {
	ctx, stop := notifyInterrupt(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("no cancellation a minute after SIGTERM")
	}
	var sig *interruptedError
	if !errors.As(context.Cause(ctx), &sig) || sig.code() != ExitTerminated || sig.Error() != "interrupted by SIGTERM" {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Error("the cause is not a context.Canceled")
	}
	if (&interruptedError{sig: os.Interrupt}).code() != ExitInterrupted {
		t.Error("SIGINT's status")
	}
}

// TestWriteAllInterrupted: a cancellation while writing removes every
// temporary file, leaves the existing outputs alone, and says what it
// removed.
func TestWriteAllInterrupted(t *testing.T) {
	t.Parallel()
	for _, stopAt := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.json"), "old")
			ctx, cancel := context.WithCancelCause(context.Background())
			paths := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")}
			err := writeAll(ctx, paths, func(i int, w io.Writer) error {
				if _, err := io.WriteString(w, "new "); err != nil {
					return err
				}
				if i == stopAt {
					cancel(&interruptedError{sig: os.Interrupt})
				}
				_, err := io.WriteString(w, "plan")
				return err
			})
			if stopAt == 3 {
				// Never cancelled: everything written.
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(paths[0]); string(b) != "new plan" {
					t.Errorf("a.json = %q", b)
				}
				return
			}
			var sig *interruptedError
			if !errors.As(err, &sig) || !strings.HasPrefix(err.Error(), "interrupted by SIGINT: removed the partial output "+filepath.Join(dir, ".a.json.tmp")) {
				t.Errorf("got %v", err)
			}
			if stopAt > 0 && !strings.Contains(err.Error(), fmt.Sprintf("(and %d more)", stopAt)) {
				t.Errorf("got %v", err)
			}
			des, _ := os.ReadDir(dir)
			var names []string
			for _, de := range des {
				names = append(names, de.Name())
			}
			if !slices.Equal(names, []string{"a.json"}) {
				t.Errorf("left %v", names)
			}
			if b, _ := os.ReadFile(paths[0]); string(b) != "old" {
				t.Errorf("a.json = %q", b)
			}
		})
	}
}
