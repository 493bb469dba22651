package rankwire

// wire.go is the wire format of port-channel traffic between the
// processes of a job: a rank's proxy sends each DATA and FLAG trigger
// whose destination lives in another process to that process (one
// ordered stream per pair of ranks, over the job's bootstrap), where a
// receiver applies them in order; a FENCE, answered once everything
// before it is applied, gives flush and the end of a launch their
// meaning.
//
// Messages on tag Tag+TagPort, little-endian:
//
//	DATA  kind=1, buffer type, flags (1: LL packets; 2: placed, below),
//	      5 zero bytes, offset u64, length u64; then a second message
//	      with the bytes
//	FLAG  kind=2, 3 zero bytes, the receiver's port channel index u32
//	FENCE kind=3, 7 zero bytes, sequence u64
//
// A FENCE is acknowledged with its 8-byte sequence on Tag+TagAck.
//
// Over a PortWire (package fabric: libfabric RMA writes instead of the
// bootstrap's TCP connections) the messages are the same, but a DATA
// header and its bytes travel as one message; over a Placer, where the
// receiver registered its buffers (SetPlace), the bytes of a large DATA
// are written straight into the receiver's buffer ahead of a header
// flagged placed, which travels without them.

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mscclgo/mscclgo/plan"
)

// The tags a rank session uses, relative to its first tag.
const (
	TagPort        = 0 // port traffic
	TagAck         = 1 // fence acknowledgements
	TagWatch       = 2 // the deadlock watch's reports to rank 0
	TagWatchReply  = 3 // the deadlock watch's probes and verdicts
	TagsPerSession = 4
)

// Kinds of message.
const (
	Data  = 1
	Flag  = 2
	Fence = 3
)

// Link is what the transport needs of the job's bootstrap (a Net is
// one): ordered messages per (sender, receiver, tag).
type Link interface {
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
}

// PortWire is a Link that carries port traffic over a transport of its
// own (package fabric's libfabric wire): one message is a header and a
// payload, sent as one. Messages between two ranks with one tag arrive in
// order. When a session's Link is a PortWire, Sender and Receive use it
// for the port and acknowledgement tags, with the same messages.
type PortWire interface {
	SendPort(ctx context.Context, peer int, tag uint32, head, payload []byte) error
	// SendPort2 sends two messages, the second a header only, as one
	// transfer; they arrive as two, in order.
	SendPort2(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte) error
	// RecvPort returns the next message; its payload may be the
	// transport's memory, valid until the next RecvPort for the same
	// peer and tag.
	RecvPort(ctx context.Context, peer int, tag uint32) (head, payload []byte, err error)
}

// PortWireTo is a PortWire that can write a large payload where the
// receiver says as it arrives (package fabric: out of its ring, part by
// part), instead of handing it over for the receiver to copy.
type PortWireTo interface {
	PortWire
	// RecvPortTo is RecvPort, except that dest (where not nil), given a
	// message's header and payload length n, may return n bytes where
	// the payload goes; the payload returned is then that slice, written.
	RecvPortTo(ctx context.Context, peer int, tag uint32, dest func(head []byte, n int) []byte) (head, payload []byte, err error)
}

// Placer is a PortWire that can write a DATA message's bytes straight
// into the receiver's memory, the receiver getting the header once they
// are in place (package fabric: one RMA write of the bytes into memory
// the receiver registered and of the header into its ring).
type Placer interface {
	PortWire
	// CanPlace says whether the wire's provider can.
	CanPlace() bool
	// RegisterPlace registers buf for peers' writes: they address it as
	// addr + offset with key. release undoes it, before buf is unmapped.
	RegisterPlace(buf []byte) (addr, key uint64, release func() error, err error)
	// SendPortAt writes payload at addr (key) of peer's memory, then
	// sends head, and head2 where not nil, as messages without payload.
	SendPortAt(ctx context.Context, peer int, tag uint32, head, payload, head2 []byte, addr, key uint64) error
}

// PlaceMin is the smallest DATA payload a Sender writes straight into
// the receiver's memory where it can (SetPlace): smaller ones cost less
// copied with their header.
const PlaceMin = 64 << 10

// Header byte 2 of a DATA message.
const (
	dataPackets = 1 // LL packet words, stored whole
	dataPlaced  = 2 // the bytes are already in the receiver's buffer (Placer)
)

// Sender is a rank's proxy side: it remembers the peers sent traffic
// since their last fence. It is used by one goroutine (the proxy).
type Sender struct {
	net    Link
	wire   PortWire // nil: messages over net
	placer Placer   // nil: no DATA goes straight into a peer's memory
	tag    uint32
	dirty  map[int]bool
	seq    uint64
	places map[int]*[3]place
}

// place is a peer's buffer registered for direct writes (SetPlace).
type place struct{ addr, key, size uint64 }

// NewSender returns the proxy side of a session whose first tag is tag.
func NewSender(net Link, tag uint32) *Sender {
	s := &Sender{net: net, tag: tag, dirty: map[int]bool{}}
	s.wire, _ = net.(PortWire)
	if p, ok := net.(Placer); ok && p.CanPlace() {
		s.placer = p
	}
	return s
}

// SetPlace says that peer's buffer bt, size bytes, takes direct writes
// at addr with key (its RegisterPlace): DATA of PlaceMin bytes or more
// into it, not packets, goes there ahead of its header. A no-op where
// the wire cannot place.
func (s *Sender) SetPlace(peer int, bt plan.BufferType, addr, key, size uint64) {
	if s.placer == nil || bt >= 3 {
		return
	}
	if s.places == nil {
		s.places = map[int]*[3]place{}
	}
	ps := s.places[peer]
	if ps == nil {
		ps = &[3]place{}
		s.places[peer] = ps
	}
	ps[bt] = place{addr, key, size}
}

// placeFor returns where data for peer's buffer bt at off goes directly,
// if it does.
func (s *Sender) placeFor(peer int, bt plan.BufferType, off uint64, packets bool, n int) (place, bool) {
	if s.placer == nil || packets || n < PlaceMin || bt >= 3 {
		return place{}, false
	}
	ps := s.places[peer]
	if ps == nil {
		return place{}, false
	}
	pl := ps[bt]
	if pl.size == 0 || off > pl.size || uint64(n) > pl.size-off {
		return place{}, false
	}
	return place{addr: pl.addr + off, key: pl.key}, true
}

// Transport names what carries the port traffic of a session over net:
// "tcp" (the bootstrap's connections) or the PortWire's own name.
func Transport(net Link) string {
	if n, ok := net.(interface{ TransportName() string }); ok {
		return n.TransportName()
	}
	return "tcp"
}

// SendData sends data for peer's buffer bt at byte offset off (packets:
// LL packet words, to be stored whole).
func (s *Sender) SendData(ctx context.Context, peer int, bt plan.BufferType, off uint64, packets bool, data []byte) error {
	return s.sendData(ctx, peer, bt, off, packets, data, nil)
}

// SendDataFlag sends data as SendData does, then signals peer's port
// channel idx (a put with signal): over a PortWire, one transfer (the
// receiver still sees a DATA and then a FLAG).
func (s *Sender) SendDataFlag(ctx context.Context, peer int, bt plan.BufferType, off uint64, packets bool, data []byte, idx int) error {
	if s.wire == nil {
		if err := s.SendData(ctx, peer, bt, off, packets, data); err != nil {
			return err
		}
		return s.SendFlag(ctx, peer, idx)
	}
	f := flagHeader(idx)
	return s.sendData(ctx, peer, bt, off, packets, data, f[:])
}

// sendData sends a DATA message and, where head2 is not nil (over a
// PortWire only), the header-only message head2 with it as one
// transfer.
func (s *Sender) sendData(ctx context.Context, peer int, bt plan.BufferType, off uint64, packets bool, data, head2 []byte) error {
	var h [24]byte
	h[0], h[1] = Data, byte(bt)
	if packets {
		h[2] = dataPackets
	}
	binary.LittleEndian.PutUint64(h[8:], off)
	binary.LittleEndian.PutUint64(h[16:], uint64(len(data)))
	if pl, ok := s.placeFor(peer, bt, off, packets, len(data)); ok {
		h[2] = dataPlaced
		s.dirty[peer] = true
		return s.placer.SendPortAt(ctx, peer, s.tag+TagPort, h[:], data, head2, pl.addr, pl.key)
	}
	if s.wire != nil {
		s.dirty[peer] = true
		if head2 != nil {
			return s.wire.SendPort2(ctx, peer, s.tag+TagPort, h[:], data, head2)
		}
		return s.wire.SendPort(ctx, peer, s.tag+TagPort, h[:], data)
	}
	if err := s.net.Send(ctx, peer, s.tag+TagPort, h[:]); err != nil {
		return err
	}
	s.dirty[peer] = true
	return s.net.Send(ctx, peer, s.tag+TagPort, data)
}

// flagHeader is the message that signals the receiver's port channel idx.
func flagHeader(idx int) [8]byte {
	var h [8]byte
	h[0] = Flag
	binary.LittleEndian.PutUint32(h[4:], uint32(idx))
	return h
}

// SendFlag signals peer's port channel idx.
func (s *Sender) SendFlag(ctx context.Context, peer, idx int) error {
	h := flagHeader(idx)
	s.dirty[peer] = true
	if s.wire != nil {
		return s.wire.SendPort(ctx, peer, s.tag+TagPort, h[:], nil)
	}
	return s.net.Send(ctx, peer, s.tag+TagPort, h[:])
}

// Fence waits until every peer sent traffic since the last fence has
// applied all of it.
func (s *Sender) Fence(ctx context.Context) error {
	peers := make([]int, 0, len(s.dirty))
	for p := range s.dirty {
		peers = append(peers, p)
	}
	if len(peers) == 0 {
		return nil
	}
	slices.Sort(peers)
	s.seq++
	var h [16]byte
	h[0] = Fence
	binary.LittleEndian.PutUint64(h[8:], s.seq)
	for _, p := range peers {
		var err error
		if s.wire != nil {
			err = s.wire.SendPort(ctx, p, s.tag+TagPort, h[:], nil)
		} else {
			err = s.net.Send(ctx, p, s.tag+TagPort, h[:])
		}
		if err != nil {
			return err
		}
	}
	for _, p := range peers {
		for {
			var a []byte
			var err error
			if s.wire != nil {
				a, _, err = s.wire.RecvPort(ctx, p, s.tag+TagAck)
			} else {
				a, err = s.net.Recv(ctx, p, s.tag+TagAck)
			}
			if err != nil {
				return err
			}
			if len(a) == 8 && binary.LittleEndian.Uint64(a) == s.seq {
				break
			}
			// The acknowledgement of a fence that a failed launch
			// abandoned: skip it.
		}
		delete(s.dirty, p)
	}
	return nil
}

// Msg is one received DATA or FLAG.
type Msg struct {
	Kind    int
	Buffer  plan.BufferType // DATA
	Packets bool            // DATA
	Offset  uint64          // DATA
	Bytes   []byte          // DATA; over a PortWire valid only until the next Receive from that peer
	Placed  bool            // DATA: Bytes is the memory Place returned, already written (ReceiveTo)
	Channel int             // FLAG: the receiver's port channel index
}

// Receive returns the next DATA or FLAG from peer, answering the FENCEs
// before it. A malformed message is an error that says what is wrong
// with it; the caller checks the buffer range and the channel index.
func Receive(ctx context.Context, net Link, tag uint32, peer int) (Msg, error) {
	return ReceiveTo(ctx, net, tag, peer, nil)
}

// Place says where the n bytes of a DATA message for buffer bt at byte
// offset off go: n bytes of the receiver's memory, or nil (the receiver
// copies Msg.Bytes itself). It checks the range itself.
type Place func(bt plan.BufferType, off, n uint64, packets bool) []byte

// ReceiveTo is Receive, except that over a PortWireTo the bytes of a
// DATA message may be written where place says as they arrive (one copy
// fewer): Msg.Placed says so.
func ReceiveTo(ctx context.Context, net Link, tag uint32, peer int, place Place) (Msg, error) {
	wire, _ := net.(PortWire)
	wireTo, _ := net.(PortWireTo)
	var placed []byte
	dest := func(head []byte, n int) []byte {
		placed = nil
		if len(head) == 24 && head[0] == Data && head[1] < 3 && binary.LittleEndian.Uint64(head[16:]) == uint64(n) {
			if d := place(plan.BufferType(head[1]), binary.LittleEndian.Uint64(head[8:]), uint64(n), head[2] == dataPackets); len(d) == n {
				placed = d
			}
		}
		return placed
	}
	for {
		var msg, payload []byte
		var err error
		switch {
		case wireTo != nil && place != nil:
			placed = nil
			msg, payload, err = wireTo.RecvPortTo(ctx, peer, tag+TagPort, dest)
		case wire != nil:
			msg, payload, err = wire.RecvPort(ctx, peer, tag+TagPort)
		default:
			msg, err = net.Recv(ctx, peer, tag+TagPort)
		}
		if err != nil {
			return Msg{}, err
		}
		if len(msg) == 0 {
			return Msg{}, fmt.Errorf("empty message")
		}
		switch msg[0] {
		case Data:
			if len(msg) != 24 {
				return Msg{}, fmt.Errorf("DATA header of %d bytes", len(msg))
			}
			if msg[1] >= 3 {
				return Msg{}, fmt.Errorf("DATA into buffer type %d", msg[1])
			}
			m := Msg{Kind: Data, Buffer: plan.BufferType(msg[1]), Packets: msg[2] == dataPackets, Offset: binary.LittleEndian.Uint64(msg[8:])}
			n := binary.LittleEndian.Uint64(msg[16:])
			if msg[2] == dataPlaced {
				// Written into this rank's buffer ahead of the header.
				if len(payload) != 0 {
					return Msg{}, fmt.Errorf("DATA placed in the receiver's buffer with %d bytes of its own", len(payload))
				}
				var d []byte
				if place != nil {
					d = place(m.Buffer, m.Offset, n, false)
				}
				if uint64(len(d)) != n {
					return Msg{}, fmt.Errorf("DATA of %d bytes placed at %s[%d], where this rank's receiver takes no direct writes", n, m.Buffer.Name(), m.Offset)
				}
				m.Bytes, m.Placed = d, true
				return m, nil
			}
			if wire != nil {
				m.Bytes = payload
				m.Placed = placed != nil && len(payload) > 0 && &payload[0] == &placed[0]
			} else if m.Bytes, err = net.Recv(ctx, peer, tag+TagPort); err != nil {
				return Msg{}, err
			}
			if uint64(len(m.Bytes)) != n {
				return Msg{}, fmt.Errorf("DATA of %d bytes announced %d", len(m.Bytes), n)
			}
			return m, nil
		case Flag:
			if len(msg) != 8 {
				return Msg{}, fmt.Errorf("FLAG of %d bytes", len(msg))
			}
			return Msg{Kind: Flag, Channel: int(binary.LittleEndian.Uint32(msg[4:]))}, nil
		case Fence:
			if len(msg) != 16 {
				return Msg{}, fmt.Errorf("FENCE of %d bytes", len(msg))
			}
			if wire != nil {
				err = wire.SendPort(ctx, peer, tag+TagAck, msg[8:16], nil)
			} else {
				err = net.Send(ctx, peer, tag+TagAck, msg[8:16])
			}
			if err != nil {
				return Msg{}, err
			}
		default:
			return Msg{}, fmt.Errorf("unknown message kind %d", msg[0])
		}
	}
}

// InRange checks that n bytes at off fit a buffer of size bytes.
func InRange(bt plan.BufferType, off, n, size uint64) error {
	if off > size || n > size-off {
		return fmt.Errorf("DATA into %s[%d:%d] past its %d bytes", bt.Name(), off, off+n, size)
	}
	return nil
}
