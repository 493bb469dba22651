package rankwire

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestStop: Stop cancels the session's context and waits for its
// goroutines; one that ignores the cancellation makes it give up with an
// error naming the session.
func TestStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		stuck bool
		want  string
	}{
		{name: "goroutines end"},
		{name: "a goroutine stuck", stuck: true, want: "gpu-emu: rank 3: closing: port transport still busy after 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			release := make(chan struct{})
			defer close(release)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ctx.Done()
				if tt.stuck {
					<-release
				}
			}()
			err := Stop(cancel, &wg, "gpu-emu", 3)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Stop: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Stop: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestMerge: the merged context ends with either parent, with its cause.
func TestMerge(t *testing.T) {
	t.Parallel()
	for _, first := range []bool{true, false} {
		a, cancelA := context.WithCancelCause(context.Background())
		b, cancelB := context.WithCancelCause(context.Background())
		ctx, stop := Merge(a, b)
		cause := errors.New("rank 2 lost")
		if first {
			cancelA(cause)
		} else {
			cancelB(cause)
		}
		<-ctx.Done()
		if got := context.Cause(ctx); got != cause {
			t.Errorf("cancel a=%v: cause %v, want %v", first, got, cause)
		}
		stop()
		cancelA(nil)
		cancelB(nil)
	}
}
