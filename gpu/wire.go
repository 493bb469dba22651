package gpu

// wire.go carries the port-channel traffic of a rank session to ranks in
// other processes, the host proxy's network side: a trigger whose
// destination is another process's rank is sent over the job's bootstrap
// (one ordered stream per pair of ranks), and a receiver goroutine per
// peer applies it to this rank's device memory and counters in order.
// The messages are the CPU backend's (executor/cpu/transport.go), so one
// wire format serves both backends (docs/multiprocess.md):
//
//	DATA  kind=1, buffer type, packets flag, 5 zero bytes, offset u64,
//	      length u64; then a second message with the bytes
//	FLAG  kind=2, 3 zero bytes, the receiver's port channel index u32
//	FENCE kind=3, 7 zero bytes, sequence u64 (answered with the sequence
//	      on the acknowledgement tag)
//
// Everything is little-endian. Tags are relative to World.Tag: traffic
// +0, acknowledgements +1, the deadlock watch +2 and +3
// (cpu.TagsPerSession in all).

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mscclgo/mscclgo/executor"
)

const (
	tagPort  = 0
	tagAck   = 1
	tagWatch = 2

	msgData  = 1
	msgFlag  = 2
	msgFence = 3
)

// locate returns the rank, buffer type and offset of the n bytes at
// device address p as this process addresses them.
func (m *multi) locate(p, n uint64) (rank int, bt executor.BufferType, off uint64, ok bool) {
	for r, b := range m.base {
		for t := 2; t >= 0; t-- {
			if p >= b[t] && p-b[t] <= m.lens[t] && n <= m.lens[t]-(p-b[t]) {
				return r, executor.BufferType(t), p - b[t], true
			}
		}
	}
	return 0, 0, 0, false
}

// handle performs one trigger of this rank's FIFO in a rank session:
// copies to this rank stay on the device, DATA to another process is
// read back and sent, FLAG to another process is a message after the
// data, SYNC is a fence with every peer sent traffic.
func (m *multi) handle(s *session, dst, src, size, kind uint64, ch int) error {
	d := s.d
	if kind&trigData != 0 && size > 0 {
		peer, bt, off, ok := m.locate(dst, size)
		switch {
		case !ok:
			return fmt.Errorf("%s: proxy of rank %d: a copy of %d bytes to %#x, which is no rank's buffer", s.name, m.rank, size, dst)
		case peer == m.rank:
			if err := d.Copy(DevPtr(dst), DevPtr(src), size, kind&trigPackets != 0); err != nil {
				return fmt.Errorf("%s: proxy of rank %d: copy of %d bytes: %w", s.name, m.rank, size, err)
			}
		default:
			data := make([]byte, size)
			if err := d.DtoH(data, DevPtr(src)); err != nil {
				return fmt.Errorf("%s: proxy of rank %d: reading %d bytes to send: %w", s.name, m.rank, size, err)
			}
			if err := m.sendData(peer, bt, off, kind&trigPackets != 0, data); err != nil {
				return fmt.Errorf("%s: proxy of rank %d: sending %d bytes to rank %d: %w", s.name, m.rank, size, peer, err)
			}
		}
	}
	if kind&(trigFlag|trigSync) != 0 {
		if err := d.Fence(); err != nil {
			return fmt.Errorf("%s: proxy of rank %d: %w", s.name, m.rank, err)
		}
	}
	if kind&trigSync != 0 {
		if err := m.fence(m.ctx); err != nil {
			return fmt.Errorf("%s: proxy of rank %d: flush: %w", s.name, m.rank, err)
		}
	}
	if kind&trigFlag != 0 {
		ri := s.ranks[m.rank].ri
		if ch < 0 || ch >= len(ri.PortChannels) {
			return fmt.Errorf("%s: proxy of rank %d: trigger on port channel %d of %d", s.name, m.rank, ch, len(ri.PortChannels))
		}
		end := ri.PortChannels[ch]
		switch {
		case end.PeerIndex < 0:
		case end.Peer == m.rank:
			s.host.Add(s.ranks[m.rank].portOff+8*uint64(end.PeerIndex), 1)
		default:
			if err := m.sendFlag(end.Peer, end.PeerIndex); err != nil {
				return fmt.Errorf("%s: proxy of rank %d: flag to rank %d: %w", s.name, m.rank, end.Peer, err)
			}
		}
	}
	return nil
}

func (m *multi) tag(k uint32) uint32 { return m.w.Tag + k }

func (m *multi) sendData(peer int, bt executor.BufferType, off uint64, packets bool, data []byte) error {
	var h [24]byte
	h[0], h[1] = msgData, byte(bt)
	if packets {
		h[2] = 1
	}
	binary.LittleEndian.PutUint64(h[8:], off)
	binary.LittleEndian.PutUint64(h[16:], uint64(len(data)))
	if err := m.w.Net.Send(m.ctx, peer, m.tag(tagPort), h[:]); err != nil {
		return err
	}
	m.dirty[peer] = true
	return m.w.Net.Send(m.ctx, peer, m.tag(tagPort), data)
}

func (m *multi) sendFlag(peer, idx int) error {
	var h [8]byte
	h[0] = msgFlag
	binary.LittleEndian.PutUint32(h[4:], uint32(idx))
	m.dirty[peer] = true
	return m.w.Net.Send(m.ctx, peer, m.tag(tagPort), h[:])
}

// fence waits until every peer sent traffic since the last fence has
// applied it.
func (m *multi) fence(ctx context.Context) error {
	peers := make([]int, 0, len(m.dirty))
	for p := range m.dirty {
		peers = append(peers, p)
	}
	if len(peers) == 0 {
		return nil
	}
	slices.Sort(peers)
	m.seq++
	var h [16]byte
	h[0] = msgFence
	binary.LittleEndian.PutUint64(h[8:], m.seq)
	for _, p := range peers {
		if err := m.w.Net.Send(ctx, p, m.tag(tagPort), h[:]); err != nil {
			return err
		}
	}
	for _, p := range peers {
		for {
			a, err := m.w.Net.Recv(ctx, p, m.tag(tagAck))
			if err != nil {
				return err
			}
			if len(a) == 8 && binary.LittleEndian.Uint64(a) == m.seq {
				break
			}
			// The acknowledgement of a fence a failed launch abandoned.
		}
		delete(m.dirty, p)
	}
	return nil
}

// startReceivers starts one receiver per peer with a port channel into
// this rank.
func (m *multi) startReceivers(s *session) {
	seen := map[int]bool{}
	for _, end := range s.ranks[m.rank].ri.PortChannels {
		if end.Peer == m.rank || seen[end.Peer] {
			continue
		}
		seen[end.Peer] = true
		m.wg.Add(1)
		go m.receive(s, end.Peer)
	}
}

// receiver is one peer's inbound traffic: a device staging buffer for
// packet data, which must arrive in whole 8-byte words.
type receiver struct {
	m       *multi
	s       *session
	peer    int
	staging DevPtr
	size    uint64
}

// receive applies peer's port traffic until the session ends. A
// malformed message, or one outside the rank's buffers, aborts the
// running launch (it reports the error through the watch's verdict) and
// stops the receiver.
func (m *multi) receive(s *session, peer int) {
	defer m.wg.Done()
	rc := &receiver{m: m, s: s, peer: peer}
	defer func() {
		if rc.staging != 0 {
			_ = s.d.Free(rc.staging)
		}
	}()
	for {
		msg, err := m.w.Net.Recv(m.ctx, peer, m.tag(tagPort))
		if err != nil {
			return // the session or the job ended; launches see it in their context
		}
		if err := rc.apply(msg); err != nil {
			m.fail(s, fmt.Errorf("%s: rank %d: port traffic from rank %d: %w", s.name, m.rank, peer, err))
			return
		}
		m.moved()
	}
}

// fail stops the running launch with err.
func (m *multi) fail(s *session, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active && m.failure == nil {
		m.failure = err
		s.host.Store(0, 1)
	}
}

func (rc *receiver) apply(msg []byte) error {
	m, s := rc.m, rc.s
	if len(msg) == 0 {
		return fmt.Errorf("empty message")
	}
	switch msg[0] {
	case msgData:
		if len(msg) != 24 {
			return fmt.Errorf("DATA header of %d bytes", len(msg))
		}
		bt := int(msg[1])
		packets := msg[2] == 1
		off, n := binary.LittleEndian.Uint64(msg[8:]), binary.LittleEndian.Uint64(msg[16:])
		data, err := m.w.Net.Recv(m.ctx, rc.peer, m.tag(tagPort))
		if err != nil {
			return err
		}
		if uint64(len(data)) != n {
			return fmt.Errorf("DATA of %d bytes announced %d", len(data), n)
		}
		if bt >= 3 {
			return fmt.Errorf("DATA into buffer type %d", bt)
		}
		if off > m.lens[bt] || n > m.lens[bt]-off {
			return fmt.Errorf("DATA into %s[%d:%d] past its %d bytes", executor.BufferType(bt), off, off+n, m.lens[bt])
		}
		if n == 0 {
			return nil
		}
		dst := DevPtr(m.base[m.rank][bt] + off)
		if !packets {
			return s.d.HtoD(dst, data)
		}
		// Packets are polled while they arrive: they go through the
		// driver's copy in whole words.
		if rc.size < n {
			if rc.staging != 0 {
				_ = s.d.Free(rc.staging)
				rc.staging, rc.size = 0, 0
			}
			p, err := s.d.Alloc(n)
			if err != nil {
				return fmt.Errorf("staging %d bytes: %w", n, err)
			}
			rc.staging, rc.size = p, n
		}
		if err := s.d.HtoD(rc.staging, data); err != nil {
			return err
		}
		if err := s.d.Copy(dst, rc.staging, n, true); err != nil {
			return err
		}
		return s.d.Fence()
	case msgFlag:
		if len(msg) != 8 {
			return fmt.Errorf("FLAG of %d bytes", len(msg))
		}
		idx := int(binary.LittleEndian.Uint32(msg[4:]))
		rd := s.ranks[m.rank]
		if idx >= len(rd.ri.PortChannels) {
			return fmt.Errorf("FLAG for port channel %d of %d", idx, len(rd.ri.PortChannels))
		}
		s.host.Add(rd.portOff+8*uint64(idx), 1)
	case msgFence:
		if len(msg) != 16 {
			return fmt.Errorf("FENCE of %d bytes", len(msg))
		}
		return m.w.Net.Send(m.ctx, rc.peer, m.tag(tagAck), msg[8:16])
	default:
		return fmt.Errorf("unknown message kind %d", msg[0])
	}
	return nil
}
