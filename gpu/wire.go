package gpu

// wire.go carries the port-channel traffic of a rank session to ranks in
// other processes, the host proxy's network side: a trigger whose
// destination is another process's rank is sent over the job's bootstrap
// (one ordered stream per pair of ranks), and a receiver goroutine per
// peer applies it to this rank's device memory and counters in order.
// The messages are package rankwire's, shared with the CPU backend
// (docs/multiprocess.md).

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/plan"
)

// locate returns the rank, buffer type and offset of the n bytes at
// device address p as this process addresses them.
func (m *multi) locate(p, n uint64) (rank int, bt plan.BufferType, off uint64, ok bool) {
	m.mu.Lock() // a communicator's session sets the bases per call (streamsession.go)
	defer m.mu.Unlock()
	for r, b := range m.base {
		for t := 2; t >= 0; t-- {
			if p >= b[t] && p-b[t] <= m.lens[t] && n <= m.lens[t]-(p-b[t]) {
				return r, plan.BufferType(t), p - b[t], true
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
			if idx, ok := m.fusedFlag(s, peer, kind, ch); ok {
				// A put with signal to that peer: one transfer.
				if err := d.Fence(); err != nil {
					return fmt.Errorf("%s: proxy of rank %d: %w", s.name, m.rank, err)
				}
				if err := m.send.SendDataFlag(m.ctx, peer, bt, off, kind&trigPackets != 0, data, idx); err != nil {
					return fmt.Errorf("%s: proxy of rank %d: sending %d bytes with a flag to rank %d: %w", s.name, m.rank, size, peer, err)
				}
				return nil
			}
			if err := m.send.SendData(m.ctx, peer, bt, off, kind&trigPackets != 0, data); err != nil {
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
		if err := m.send.Fence(m.ctx); err != nil {
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
			if err := s.raisePort(m.rank, end.PeerIndex); err != nil {
				return err
			}
		default:
			if err := m.send.SendFlag(m.ctx, end.Peer, end.PeerIndex); err != nil {
				return fmt.Errorf("%s: proxy of rank %d: flag to rank %d: %w", s.name, m.rank, end.Peer, err)
			}
		}
	}
	return nil
}

// fusedFlag returns the far end's channel index of port channel ch when
// a trigger of kind is a put with signal (no flush) whose flag goes to
// peer, the rank its data goes to: the two can travel as one.
func (m *multi) fusedFlag(s *session, peer int, kind uint64, ch int) (int, bool) {
	ri := s.ranks[m.rank].ri
	if kind&trigFlag == 0 || kind&trigSync != 0 || ch < 0 || ch >= len(ri.PortChannels) {
		return 0, false
	}
	end := ri.PortChannels[ch]
	return end.PeerIndex, end.Peer == peer && end.PeerIndex >= 0
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
		msg, err := rankwire.Receive(m.ctx, m.w.Net, m.w.Tag, peer)
		if err != nil {
			if m.ctx.Err() == nil {
				m.fail(s, fmt.Errorf("%s: rank %d: port traffic from rank %d: %w", s.name, m.rank, peer, err))
			}
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
		if aerr := s.abort(); aerr != nil {
			m.failure = errors.Join(err, aerr)
		}
	}
}

func (rc *receiver) apply(msg rankwire.Msg) error {
	m, s := rc.m, rc.s
	switch msg.Kind {
	case rankwire.Data:
		bt, n, off := int(msg.Buffer), uint64(len(msg.Bytes)), msg.Offset
		if err := rankwire.InRange(msg.Buffer, off, n, m.lens[bt]); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		m.mu.Lock()
		dst := DevPtr(m.base[m.rank][bt] + off)
		m.mu.Unlock()
		if !msg.Packets {
			return s.d.HtoD(dst, msg.Bytes)
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
		if err := s.d.HtoD(rc.staging, msg.Bytes); err != nil {
			return err
		}
		if err := s.d.Copy(dst, rc.staging, n, true); err != nil {
			return err
		}
		return s.d.Fence()
	case rankwire.Flag:
		rd := s.ranks[m.rank]
		if msg.Channel >= len(rd.ri.PortChannels) {
			return fmt.Errorf("FLAG for port channel %d of %d", msg.Channel, len(rd.ri.PortChannels))
		}
		return s.raisePort(m.rank, msg.Channel)
	}
	return nil
}
