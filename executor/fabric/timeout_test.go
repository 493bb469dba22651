//go:build cgo

package fabric

import (
	"context"
	"strings"
	"testing"
	"time"
)

// lateNet is rank 0 of two whose peer never comes: its all-gathers wait
// until their context ends.
type lateNet struct{ hubNet }

func (lateNet) Rank() int { return 0 }
func (lateNet) Size() int { return 2 }
func (lateNet) AllGather(ctx context.Context, _ []byte) ([][]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestSetupTimeout: a peer that never comes to the set-up fails it within
// Options.Timeout, whatever the caller's context (issue 44: the set-up
// waited 32 s past MSCCLGO_NCCL_TIMEOUT=5s), with an error that names
// the bound.
func TestSetupTimeout(t *testing.T) {
	h := newHub(2)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		w, err := Open(context.Background(), lateNet{hubNet{h, 0}}, Options{Provider: "tcp;ofi_rxm", Timeout: 300 * time.Millisecond, TimeoutBound: "the test's bound"})
		if err == nil {
			_ = w.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "not every rank came within 300ms (the test's bound)") {
			t.Errorf("Open: %v, want the bound named", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Open waited past a minute for a peer, with a Timeout of 300ms")
	}
}
