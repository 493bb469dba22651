package cpu

// transport.go carries port-channel traffic between the processes of a
// multi-process session, the CPU analogue of the InfiniBand proxy (and of
// MSCCL++'s Ethernet transport): a rank's proxy sends each trigger's DATA
// and FLAG to the destination rank over the job's bootstrap connection
// (one ordered stream per pair of ranks), and a receiver goroutine per
// peer applies them in order to the rank's own memory and counters. A
// SYNC, and the end of every launch, is a fence: the proxy waits until
// each peer it sent traffic to has acknowledged applying all of it, so a
// flush, and a finished launch, mean what they mean in one process.
//
// Messages (tag World.Tag+0; acknowledgements on +1), little-endian:
//
//	DATA  kind=1, buffer type, packets flag, 5 zero bytes, offset u64,
//	      length u64; then a second message with the bytes
//	FLAG  kind=2, 3 zero bytes, the receiver's port channel index u32
//	FENCE kind=3, 7 zero bytes, sequence u64 (answered with the sequence)

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor"
)

const (
	msgData  = 1
	msgFlag  = 2
	msgFence = 3
)

// isRemote reports whether rank lives in another process of the job.
func (s *session) isRemote(rank int) bool { return s.mp != nil && rank != s.mp.rank }

// sendData sends a DATA trigger to the process of its destination rank.
func (m *multi) sendData(ctx context.Context, tr *trigger) error {
	var h [24]byte
	h[0], h[1] = msgData, byte(tr.dst.bt)
	if tr.packets {
		h[2] = 1
	}
	binary.LittleEndian.PutUint64(h[8:], tr.dst.off)
	binary.LittleEndian.PutUint64(h[16:], uint64(len(tr.dst.b)))
	peer := tr.dst.rank
	if err := m.w.Net.Send(ctx, peer, m.tag(tagPort), h[:]); err != nil {
		return err
	}
	m.dirty[peer] = true
	return m.w.Net.Send(ctx, peer, m.tag(tagPort), tr.src.b)
}

// sendFlag sends a FLAG for the peer's port channel idx.
func (m *multi) sendFlag(ctx context.Context, peer, idx int) error {
	var h [8]byte
	h[0] = msgFlag
	binary.LittleEndian.PutUint32(h[4:], uint32(idx))
	m.dirty[peer] = true
	return m.w.Net.Send(ctx, peer, m.tag(tagPort), h[:])
}

// fence waits until every peer sent traffic since the last fence has
// applied it.
func (m *multi) fence(ctx context.Context) error {
	peers := sortedKeys(m.dirty)
	if len(peers) == 0 {
		return nil
	}
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
			// An acknowledgement of an earlier fence abandoned by a
			// failed launch: skip it.
		}
		delete(m.dirty, p)
	}
	return nil
}

// startReceivers starts one receiver per peer that has a port channel
// into this rank.
func (m *multi) startReceivers(s *session) {
	peers := map[int]bool{}
	for _, end := range s.ranks[m.rank].ri.PortChannels {
		if end.Peer != m.rank {
			peers[end.Peer] = true
		}
	}
	for _, p := range sortedKeys(peers) {
		m.wg.Add(1)
		go m.receive(s, p)
	}
}

// receive applies peer's port traffic to this rank until the session
// ends. A malformed message or one that falls outside the rank's buffers
// stops the current launch with an error naming the peer.
func (m *multi) receive(s *session, peer int) {
	defer m.wg.Done()
	for {
		msg, err := m.w.Net.Recv(m.ctx, peer, m.tag(tagPort))
		if err != nil {
			return // the session or the job ended; launches see it in their context
		}
		if err := m.apply(s, peer, msg); err != nil {
			s.failCurrent(fmt.Errorf("cpu: rank %d: port traffic from rank %d: %w", m.rank, peer, err))
			return
		}
	}
}

func (m *multi) apply(s *session, peer int, msg []byte) error {
	if len(msg) == 0 {
		return fmt.Errorf("empty message")
	}
	switch msg[0] {
	case msgData:
		if len(msg) != 24 {
			return fmt.Errorf("DATA header of %d bytes", len(msg))
		}
		bt := executor.BufferType(msg[1])
		packets := msg[2] == 1
		off, n := binary.LittleEndian.Uint64(msg[8:]), binary.LittleEndian.Uint64(msg[16:])
		data, err := m.w.Net.Recv(m.ctx, peer, m.tag(tagPort))
		if err != nil {
			return err
		}
		if uint64(len(data)) != n {
			return fmt.Errorf("DATA of %d bytes announced %d", len(data), n)
		}
		if int(bt) >= 3 {
			return fmt.Errorf("DATA into buffer type %d", bt)
		}
		buf := m.bufs[m.rank][bt]
		if off > uint64(len(buf)) || n > uint64(len(buf))-off {
			return fmt.Errorf("DATA into %s[%d:%d] past its %d bytes", bufName(bt), off, off+n, len(buf))
		}
		dst := buf[off : off+n]
		if packets {
			copyWords(words(dst), words(data))
		} else {
			copy(dst, data)
		}
		s.mu.Lock()
		if l := s.cur; l != nil {
			if packets {
				l.pkt[m.rank][bt].wl.wake(l)
			}
			l.progress.Add(1)
		}
		s.mu.Unlock()
	case msgFlag:
		if len(msg) != 8 {
			return fmt.Errorf("FLAG of %d bytes", len(msg))
		}
		idx := int(binary.LittleEndian.Uint32(msg[4:]))
		rs := s.ranks[m.rank]
		if idx >= len(rs.port) {
			return fmt.Errorf("FLAG for port channel %d of %d", idx, len(rs.port))
		}
		s.mu.Lock()
		c := &rs.port[idx]
		if l := s.cur; l != nil {
			c.signal(l, nil)
			l.progress.Add(1)
		} else {
			c.signalIdle()
		}
		s.mu.Unlock()
	case msgFence:
		if len(msg) != 16 {
			return fmt.Errorf("FENCE of %d bytes", len(msg))
		}
		return m.w.Net.Send(m.ctx, peer, m.tag(tagAck), msg[8:16])
	default:
		return fmt.Errorf("unknown message kind %d", msg[0])
	}
	return nil
}

// failCurrent stops the current launch, if any, with err.
func (s *session) failCurrent(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.cur; l != nil {
		l.abort(err)
	}
}

// poll wakes the parked thread blocks of this rank whose condition a
// same-host peer made true through shared memory (a memory-channel
// signal, packets), which no wake-up inside this process announces. It
// sleeps on the rank's doorbell, which such peers ring, and looks at
// least every millisecond.
func (l *launch) poll(done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	b := l.s.mp.bells[l.s.mp.rank]
	for {
		seen := atomic.LoadUint32(&b.ring)
		woke := false
		l.s.mu.Lock()
		if l.err != nil || l.tbsDone {
			l.s.mu.Unlock()
			return
		}
		for _, t := range l.tbs {
			if t.parked && t.ready != nil && t.ready() {
				t.unpark()
				woke = true
			}
		}
		l.s.mu.Unlock()
		select {
		case <-done:
			return
		default:
		}
		if woke {
			l.progress.Add(1)
			continue
		}
		atomic.StoreUint32(&b.sleeping, 1)
		if atomic.LoadUint32(&b.ring) == seen {
			sleepOn(&b.ring, seen, time.Millisecond)
		}
		atomic.StoreUint32(&b.sleeping, 0)
	}
}
