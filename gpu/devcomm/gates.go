package devcomm

// gates.go holds a communicator's gate server: the one goroutine that
// serves the steady-state launches held on a gpu.Holder's stream (the CUDA
// driver, whose stream waits on a word in mapped host memory). For each
// held launch, in call order, it reads the peers' records of the call
// (steady.go's resolve: compare, map new peer allocations), then releases
// the hold with the launch's rank table, or, on a mismatch, a peer's
// refusal, a timeout or the communicator's end, with the abort word
// raised, so that the kernel writes nothing; the error becomes the
// communicator's asynchronous error. The call itself returned when the
// hold was enqueued.

import (
	"fmt"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/gpu"
)

// gateJob is one held launch.
type gateJob struct {
	hold    gpu.Hold
	resolve func() ([][2]gpu.DevPtr, error)
	// images returns the images of the hold's copies for every rank's
	// buffers, or with bufs nil those of an aborted launch.
	images func(bufs [][2]gpu.DevPtr) ([][]byte, error)
	// done, if set, is called once the hold was released.
	done func()
}

// gateServer runs the jobs in order on one goroutine.
type gateServer struct {
	fail func(error)

	mu      sync.Mutex
	jobs    []gateJob
	stopped bool
	wake    chan struct{} // a job was added or stop asked (capacity 1)
	done    chan struct{} // closed when the goroutine ends
}

func newGateServer(fail func(error)) *gateServer {
	g := &gateServer{fail: fail, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go g.run()
	return g
}

// add queues a job; it never waits.
func (g *gateServer) add(j gateJob) {
	g.mu.Lock()
	g.jobs = append(g.jobs, j)
	g.mu.Unlock()
	g.signal()
}

func (g *gateServer) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *gateServer) run() {
	defer close(g.done)
	for {
		g.mu.Lock()
		if len(g.jobs) == 0 {
			stopped := g.stopped
			g.mu.Unlock()
			if stopped {
				return
			}
			<-g.wake
			continue
		}
		j := g.jobs[0]
		g.jobs = g.jobs[1:]
		g.mu.Unlock()
		g.serve(j)
	}
}

// serve resolves a job's call and releases its hold.
func (g *gateServer) serve(j gateJob) {
	bufs, err := j.resolve()
	if err != nil {
		g.fail(err)
		bufs = nil
	}
	img, err := j.images(bufs)
	if err != nil && bufs != nil {
		g.fail(err)
		img, err = j.images(nil)
	}
	if err != nil {
		// No harmless images: the hold is released with its slot as it
		// is.
		g.fail(err)
	}
	if rerr := j.hold.Release(img); rerr != nil {
		g.fail(fmt.Errorf("releasing a held launch: %w", rerr))
	}
	if j.done != nil {
		j.done()
	}
}

// close ends the server once the jobs queued are served (the
// communicator has ended: each resolve fails at once and its hold is
// released aborted), waiting at most bound and a margin for that.
func (g *gateServer) close(bound time.Duration) error {
	g.mu.Lock()
	g.stopped = true
	left := len(g.jobs)
	g.mu.Unlock()
	g.signal()
	t := time.NewTimer(bound + 5*time.Second)
	defer t.Stop()
	select {
	case <-g.done:
		return nil
	case <-t.C:
		return fmt.Errorf("the gate server has not served its %d held launches within %v of the communicator's end", left, bound+5*time.Second)
	}
}
