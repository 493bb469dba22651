package executor

import (
	"context"
	"errors"
	"testing"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	cause := errors.New("deadlock")
	tests := []struct {
		name   string
		closed bool
		broken error
		ctx    context.Context
		bufs   int
		is     error  // errors.Is target, nil: no error
		msg    string // the error's text
	}{
		{name: "ready", ctx: live, bufs: 2},
		{name: "closed", closed: true, broken: cause, ctx: done, bufs: 1, is: ErrClosed, msg: "b: session closed"},
		{name: "broken", broken: cause, ctx: done, bufs: 1, is: ErrUnusable, msg: "b: session unusable after a failed launch: deadlock"},
		{name: "context", ctx: done, bufs: 1, is: context.Canceled, msg: "context canceled"},
		{name: "buffers", ctx: live, bufs: 1, msg: "b: launch: got buffers for 1 ranks, want 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := &Guard{Name: "b"}
			if tt.broken != nil {
				g.Fail(tt.broken)
			}
			if tt.closed {
				if !g.Close() {
					t.Fatal("Close of an open guard reported it closed")
				}
				if g.Close() {
					t.Error("a second Close reported the guard open")
				}
			}
			err := g.Launch(tt.ctx, make([]RankBuffers, tt.bufs), 2)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Launch: %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.msg {
				t.Fatalf("Launch: %v, want %q", err, tt.msg)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Launch: %v is not %v", err, tt.is)
			}
			if tt.is == ErrUnusable && !errors.Is(err, cause) {
				t.Errorf("Launch: %v does not wrap the cause", err)
			}
		})
	}
}
