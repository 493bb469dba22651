package rankwire

// wire_test.go: messages through an in-memory network, in order, with
// fences answered by the receiver; malformed messages are named errors.

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/plan"
)

// memNet is an ordered in-memory network: queues per (from, to, tag).
type memNet struct {
	me int
	q  *queues
}

type key struct {
	from, to int
	tag      uint32
}

type queues struct {
	mu   sync.Mutex
	cond *sync.Cond
	m    map[key][][]byte
}

func newQueues() *queues {
	q := &queues{m: map[key][][]byte{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (n memNet) Send(_ context.Context, peer int, tag uint32, data []byte) error {
	n.q.mu.Lock()
	defer n.q.mu.Unlock()
	k := key{n.me, peer, tag}
	n.q.m[k] = append(n.q.m[k], append([]byte(nil), data...))
	n.q.cond.Broadcast()
	return nil
}

func (n memNet) Recv(_ context.Context, peer int, tag uint32) ([]byte, error) {
	n.q.mu.Lock()
	defer n.q.mu.Unlock()
	k := key{peer, n.me, tag}
	for len(n.q.m[k]) == 0 {
		n.q.cond.Wait()
	}
	m := n.q.m[k][0]
	n.q.m[k] = n.q.m[k][1:]
	return m, nil
}

func TestRoundTrip(t *testing.T) {
	q := newQueues()
	a, b := memNet{0, q}, memNet{1, q}
	const tag = 40
	ctx := context.Background()
	s := NewSender(a, tag)
	got := make(chan Msg, 8)
	go func() {
		for {
			m, err := Receive(ctx, b, tag, 0)
			if err != nil {
				t.Error(err)
				return
			}
			got <- m
		}
	}()
	if err := s.SendData(ctx, 1, plan.Scratch, 64, true, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.SendFlag(ctx, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	want := []Msg{
		{Kind: Data, Buffer: plan.Scratch, Packets: true, Offset: 64, Bytes: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Kind: Flag, Channel: 3},
	}
	var have []Msg
	for range want {
		have = append(have, <-got)
	}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	// Nothing sent since: a fence returns at once.
	if err := s.Fence(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		msgs [][]byte
		want string
	}{
		{"empty", [][]byte{{}}, "empty message"},
		{"short DATA", [][]byte{{Data, 0, 0}}, "DATA header of 3 bytes"},
		{"DATA buffer", [][]byte{append([]byte{Data, 7}, make([]byte, 22)...)}, "buffer type 7"},
		{"DATA length", [][]byte{append([]byte{Data, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, make([]byte, 7)...), {1}}, "DATA of 1 bytes announced 9"},
		{"FLAG", [][]byte{{Flag, 0}}, "FLAG of 2 bytes"},
		{"FENCE", [][]byte{{Fence}}, "FENCE of 1 bytes"},
		{"kind", [][]byte{{9}}, "unknown message kind 9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueues()
			a, b := memNet{0, q}, memNet{1, q}
			for _, m := range tc.msgs {
				a.Send(context.Background(), 1, TagPort, m)
			}
			_, err := Receive(context.Background(), b, 0, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if err := InRange(plan.Output, 8, 16, 16); err == nil || !strings.Contains(err.Error(), "output[8:24] past its 16 bytes") {
		t.Errorf("InRange: %v", err)
	}
}
