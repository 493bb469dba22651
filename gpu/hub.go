package gpu

// hub.go is the in-process exchange that connects a localSession's rank
// sessions (local.go) in place of a bootstrap: a rankwire.Net whose
// messages and all-gathers go through memory.

import (
	"context"
	"fmt"
	"sync"

	"github.com/mscclgo/mscclgo/executor/rankwire"
)

// localHub is the in-process exchange of a localSession's ranks: ordered
// messages per sender, receiver and tag, and all-gathers in rounds.
// Waits end with the caller's context or when the hub is closed.
type localHub struct {
	n      int
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	queues map[hubKey]*hubQueue
	rounds map[int]*hubRound
	calls  []int // all-gathers each rank has entered
}

type hubKey struct {
	from, to int
	tag      uint32
}

type hubQueue struct {
	msgs  [][]byte
	ready chan struct{} // closed and replaced at each message
}

type hubRound struct {
	parts [][]byte
	in    int // ranks that contributed
	out   int // ranks that took the result
	done  chan struct{}
}

func newLocalHub(n int) *localHub {
	ctx, cancel := context.WithCancel(context.Background())
	return &localHub{n: n, ctx: ctx, cancel: cancel, queues: map[hubKey]*hubQueue{}, rounds: map[int]*hubRound{},
		calls: make([]int, n)}
}

func (h *localHub) close() { h.cancel() }

func (h *localHub) queue(k hubKey) *hubQueue {
	q, ok := h.queues[k]
	if !ok {
		q = &hubQueue{ready: make(chan struct{})}
		h.queues[k] = q
	}
	return q
}

// net returns rank's end of the hub.
func (h *localHub) net(rank int) rankwire.Net { return hubNet{h: h, rank: rank} }

// hubNet is one rank's rankwire.Net over a localHub.
type hubNet struct {
	h    *localHub
	rank int
}

func (n hubNet) Rank() int                { return n.rank }
func (n hubNet) Size() int                { return n.h.n }
func (n hubNet) Context() context.Context { return n.h.ctx }

func (n hubNet) check(peer int) error {
	if peer < 0 || peer >= n.h.n {
		return fmt.Errorf("in-process exchange: rank %d of %d", peer, n.h.n)
	}
	return n.h.ctx.Err()
}

func (n hubNet) Send(_ context.Context, peer int, tag uint32, data []byte) error {
	if err := n.check(peer); err != nil {
		return err
	}
	h := n.h
	h.mu.Lock()
	q := h.queue(hubKey{n.rank, peer, tag})
	q.msgs = append(q.msgs, append([]byte(nil), data...))
	close(q.ready)
	q.ready = make(chan struct{})
	h.mu.Unlock()
	return nil
}

func (n hubNet) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	if err := n.check(peer); err != nil {
		return nil, err
	}
	h := n.h
	for {
		h.mu.Lock()
		q := h.queue(hubKey{peer, n.rank, tag})
		if len(q.msgs) > 0 {
			m := q.msgs[0]
			q.msgs = q.msgs[1:]
			h.mu.Unlock()
			return m, nil
		}
		ready := q.ready
		h.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("rank %d: receiving from rank %d (tag %d): %w", n.rank, peer, tag, context.Cause(ctx))
		case <-h.ctx.Done():
			return nil, fmt.Errorf("rank %d: receiving from rank %d (tag %d): the session is closed", n.rank, peer, tag)
		}
	}
}

func (n hubNet) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	if err := n.h.ctx.Err(); err != nil {
		return nil, err
	}
	h := n.h
	h.mu.Lock()
	i := h.calls[n.rank]
	h.calls[n.rank]++
	rd, ok := h.rounds[i]
	if !ok {
		rd = &hubRound{parts: make([][]byte, h.n), done: make(chan struct{})}
		h.rounds[i] = rd
	}
	rd.parts[n.rank] = append([]byte(nil), data...)
	rd.in++
	if rd.in == h.n {
		close(rd.done)
	}
	h.mu.Unlock()
	select {
	case <-rd.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("rank %d: all-gather %d: %d of %d ranks arrived: %w", n.rank, i, h.arrived(rd), h.n, context.Cause(ctx))
	case <-h.ctx.Done():
		return nil, fmt.Errorf("rank %d: all-gather %d: the session is closed", n.rank, i)
	}
	h.mu.Lock()
	rd.out++
	if rd.out == h.n {
		delete(h.rounds, i)
	}
	h.mu.Unlock()
	out := make([][]byte, len(rd.parts))
	for r, p := range rd.parts {
		out[r] = append([]byte(nil), p...)
	}
	return out, nil
}

func (h *localHub) arrived(rd *hubRound) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return rd.in
}
