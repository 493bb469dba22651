package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// ConnectLocal connects the n ranks of a job whose ranks are all
// goroutines of this process, over the loopback interface, meeting
// through a rendezvous file in dir. It returns rank r's Bootstrap at index
// r, or, when any rank fails, closes those that connected and returns
// every rank's error.
func ConnectLocal(ctx context.Context, n int, dir string, opts Options) ([]*Bootstrap, error) {
	if n < 1 {
		return nil, fmt.Errorf("bootstrap: %d ranks: a job has at least one", n)
	}
	file := filepath.Join(dir, "rank0.addr")
	bs := make([]*Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			w := World{Rank: r, Size: n, RendezvousFile: file, RendezvousHost: "127.0.0.1", Host: "localhost"}
			bs[r], errs[r] = Connect(ctx, w, opts)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseAll(bs)
		return nil, err
	}
	return bs, nil
}

// CloseAll closes every non-nil Bootstrap of bs at once (a Close waits
// for its peers to close theirs).
func CloseAll(bs []*Bootstrap) {
	var wg sync.WaitGroup
	for _, b := range bs {
		if b != nil {
			wg.Go(func() { b.Close() })
		}
	}
	wg.Wait()
}
