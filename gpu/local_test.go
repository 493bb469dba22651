package gpu

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLocalHub checks the in-process exchange of a local session:
// messages in order per sender, receiver and tag; all-gathers in rounds;
// waits that end with the caller's context or the hub's close, naming
// what they waited for.
func TestLocalHub(t *testing.T) {
	t.Run("order", func(t *testing.T) {
		h := newLocalHub(3)
		defer h.close()
		ctx := context.Background()
		for i := range 5 {
			for tag := uint32(1); tag <= 2; tag++ {
				if err := h.net(0).Send(ctx, 2, tag, []byte(fmt.Sprint(tag, ":", i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for tag := uint32(2); tag >= 1; tag-- {
			for i := range 5 {
				got, err := h.net(2).Recv(ctx, 0, tag)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprint(tag, ":", i); string(got) != want {
					t.Errorf("tag %d message %d: %q, want %q", tag, i, got, want)
				}
			}
		}
	})
	t.Run("allgather", func(t *testing.T) {
		const n, rounds = 4, 3
		h := newLocalHub(n)
		defer h.close()
		got := make([][][][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					parts, err := h.net(r).AllGather(context.Background(), []byte(fmt.Sprint(r, "/", i)))
					if err != nil {
						errs[r] = err
						return
					}
					got[r] = append(got[r], parts)
				}
			}()
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("rank %d: %v", r, errs[r])
			}
			for i := range rounds {
				for p := range n {
					if want := fmt.Sprint(p, "/", i); string(got[r][i][p]) != want {
						t.Errorf("rank %d round %d part %d: %q, want %q", r, i, p, got[r][i][p], want)
					}
				}
			}
		}
		if len(h.rounds) != 0 {
			t.Errorf("%d rounds kept after every rank took them", len(h.rounds))
		}
	})
	for _, tc := range []struct {
		name string
		wait func(h *localHub, ctx context.Context) error
		want string
	}{
		{name: "recv timeout", want: "receiving from rank 1 (tag 7)",
			wait: func(h *localHub, ctx context.Context) error { _, err := h.net(0).Recv(ctx, 1, 7); return err }},
		{name: "allgather timeout", want: "1 of 2 ranks arrived",
			wait: func(h *localHub, ctx context.Context) error { _, err := h.net(0).AllGather(ctx, nil); return err }},
		{name: "recv closed", want: "the session is closed",
			wait: func(h *localHub, _ context.Context) error {
				time.AfterFunc(10*time.Millisecond, h.close)
				_, err := h.net(0).Recv(context.Background(), 1, 7)
				return err
			}},
		{name: "bad peer", want: "rank 5 of 2",
			wait: func(h *localHub, ctx context.Context) error { return h.net(0).Send(ctx, 5, 1, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLocalHub(2)
			defer h.close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := tc.wait(h, ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error that says %q", err, tc.want)
			}
		})
	}
}
