package rankwire

// place_test.go: DATA written straight into the receiver's registered
// buffer (a Placer) ahead of its header, through an in-memory wire.

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"github.com/mscclgo/mscclgo/plan"
)

// memPlacer is a Placer over memNet: a message is its header's length,
// the header and the payload; memory registered by any rank is shared
// through mem (key: the registered bytes).
type memPlacer struct {
	memNet
	mu  *sync.Mutex
	mem map[uint64][]byte
	at  *int // SendPortAt calls
}

func (p memPlacer) SendPort(ctx context.Context, peer int, tag uint32, head, payload []byte) error {
	return p.Send(ctx, peer, tag, append(append([]byte{byte(len(head))}, head...), payload...))
}

func (p memPlacer) SendPort2(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte) error {
	if err := p.SendPort(ctx, peer, tag, head, payload); err != nil {
		return err
	}
	return p.SendPort(ctx, peer, tag, head2, nil)
}

func (p memPlacer) RecvPort(ctx context.Context, peer int, tag uint32) ([]byte, []byte, error) {
	m, err := p.Recv(ctx, peer, tag)
	if err != nil {
		return nil, nil, err
	}
	return m[1 : 1+m[0]], m[1+m[0]:], nil
}

func (p memPlacer) CanPlace() bool { return true }

func (p memPlacer) RegisterPlace(buf []byte) (uint64, uint64, func() error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := uint64(len(p.mem) + 1)
	p.mem[k] = buf
	return 0, k, func() error { return nil }, nil
}

func (p memPlacer) SendPortAt(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte, addr, key uint64) error {
	p.mu.Lock()
	copy(p.mem[key][addr:], payload)
	*p.at++
	p.mu.Unlock()
	if err := p.SendPort(ctx, peer, tag, head, nil); err != nil {
		return err
	}
	if head2 != nil {
		return p.SendPort(ctx, peer, tag, head2, nil)
	}
	return nil
}

func TestPlacedData(t *testing.T) {
	q, mu, mem, calls := newQueues(), &sync.Mutex{}, map[uint64][]byte{}, 0
	a := memPlacer{memNet{0, q}, mu, mem, &calls}
	b := memPlacer{memNet{1, q}, mu, mem, &calls}
	const tag = 40
	ctx := context.Background()
	out := make([]byte, 4*PlaceMin)
	addr, key, _, err := b.RegisterPlace(out)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSender(a, tag)
	s.SetPlace(1, plan.Output, addr, key, uint64(len(out)))
	place := func(bt plan.BufferType, off, n uint64, packets bool) []byte {
		if bt != plan.Output || packets || off+n > uint64(len(out)) {
			return nil
		}
		return out[off : off+n]
	}
	big := bytes.Repeat([]byte{7}, 2*PlaceMin)
	small := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := s.SendDataFlag(ctx, 1, plan.Output, 4096, false, big, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SendData(ctx, 1, plan.Output, 0, false, small); err != nil { // small: with its header
		t.Fatal(err)
	}
	if err := s.SendData(ctx, 1, plan.Input, 0, false, big); err != nil { // not registered
		t.Fatal(err)
	}
	if err := s.SendData(ctx, 1, plan.Output, uint64(len(out)-PlaceMin), false, big); err != nil { // past the end
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d DATA went straight into the receiver's memory, want 1 (the large one into its registered buffer)", calls)
	}
	m, err := ReceiveTo(ctx, b, tag, 0, place)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != Data || !m.Placed || m.Offset != 4096 || !bytes.Equal(m.Bytes, big) || &m.Bytes[0] != &out[4096] {
		t.Errorf("the placed DATA: kind %d, placed %v, offset %d, %d bytes (in place: %v)", m.Kind, m.Placed, m.Offset, len(m.Bytes), len(m.Bytes) > 0 && &m.Bytes[0] == &out[4096])
	}
	if m, err := ReceiveTo(ctx, b, tag, 0, place); err != nil || m.Kind != Flag || m.Channel != 2 {
		t.Errorf("after the placed DATA: %+v, %v; want its FLAG on channel 2", m, err)
	}
	for i, want := range []struct {
		bt  plan.BufferType
		off uint64
		n   int
	}{{plan.Output, 0, len(small)}, {plan.Input, 0, len(big)}, {plan.Output, uint64(len(out) - PlaceMin), len(big)}} {
		m, err := ReceiveTo(ctx, b, tag, 0, nil)
		if err != nil || m.Kind != Data || m.Placed || m.Buffer != want.bt || m.Offset != want.off || len(m.Bytes) != want.n {
			t.Errorf("DATA %d with its bytes: %+v, %v", i, m, err)
		}
	}
	// A placed header where the receiver takes no direct writes is an
	// error that says so.
	var h [24]byte
	h[0], h[1], h[2] = Data, byte(plan.Scratch), dataPlaced
	binary.LittleEndian.PutUint64(h[16:], 100)
	if err := a.SendPort(ctx, 1, tag+TagPort, h[:], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReceiveTo(ctx, b, tag, 0, place); err == nil || !strings.Contains(err.Error(), "takes no direct writes") {
		t.Errorf("a placed DATA into an unregistered buffer: %v", err)
	}
}
