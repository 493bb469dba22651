package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnectLocal: every rank of a job of goroutines gets its place and
// reaches every other; a job of no ranks is refused.
func TestConnectLocal(t *testing.T) {
	t.Parallel()
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := ConnectLocal(ctx, n, t.TempDir(), Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(bs)
	var wg sync.WaitGroup
	got := make([][][]byte, n)
	errs := make([]error, n)
	for r, b := range bs {
		if b.Rank() != r || b.Size() != n {
			t.Errorf("bootstrap %d: rank %d of %d", r, b.Rank(), b.Size())
		}
		wg.Go(func() { got[r], errs[r] = b.AllGather(ctx, []byte(fmt.Sprint(r))) })
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for p, m := range got[r] {
			if string(m) != fmt.Sprint(p) {
				t.Errorf("rank %d got %q from rank %d", r, m, p)
			}
		}
	}
	if _, err := ConnectLocal(ctx, 0, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "0 ranks") {
		t.Errorf("a job of 0 ranks: %v", err)
	}
}
