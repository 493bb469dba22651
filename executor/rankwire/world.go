// Package rankwire is what the rank sessions of every backend share when a
// job runs one process per rank: the job a session belongs to (World and
// its Net, which package bootstrap provides), the set-up exchange
// that fails every rank alike and the check that only port channels
// cross hosts, the wire format of port-channel traffic between the
// processes, and the job-wide deadlock watch. A backend's OpenRank takes
// a World; it sends its port traffic with a Sender, applies what Receive
// returns, and starts Watch with its session as the WatchTarget.
package rankwire

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Net is what a rank session needs from the job's bootstrap; package
// bootstrap's *Bootstrap is one. Messages between two ranks with one tag
// arrive in order.
type Net interface {
	Rank() int
	Size() int
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	// Context ends when the job is lost (a peer died) or closed.
	Context() context.Context
}

// World is the job a rank session belongs to.
type World struct {
	Net Net
	// Host[r] numbers rank r's host: ranks with equal numbers share
	// memory (memory channels and switch groups may join them only).
	Host []int
	// Tag is the first of the TagsPerSession message tags the session
	// uses. Sessions of one job that may overlap need distinct tags; the
	// caller numbers them (every rank alike).
	Tag uint32
	// ShmDir is where the CPU backend creates its shared mappings'
	// files: default /dev/shm, else the temporary directory.
	ShmDir string
}

// Merge returns a context that ends when either a or b does (a launch's
// context and its session's life), and the function that releases it.
func Merge(a, b context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(a)
	stop := context.AfterFunc(b, func() { cancel(context.Cause(b)) })
	return ctx, func() { stop(); cancel(nil) }
}

// closeWait bounds how long Stop waits for a rank session's goroutines.
const closeWait = 5 * time.Second

// Stop ends a rank session's goroutines (the port receivers, the
// deadlock watch): it cancels their context and waits for wg. A
// goroutine stuck in a send to a peer that stopped reading keeps it
// waiting; after 5 s Stop gives up with an error naming the session
// (name, rank), and the caller should then keep the session's memory
// until the process ends rather than pull it from under that goroutine.
func Stop(cancel context.CancelFunc, wg *sync.WaitGroup, name string, rank int) error {
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s: rank %d: closing: port transport still busy after %v", name, rank, closeWait)
	}
}
