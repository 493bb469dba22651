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
// The messages are package rankwire's, shared with the GPU backend.

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/plan"
)

// isRemote reports whether rank lives in another process of the job.
func (s *session) isRemote(rank int) bool { return s.mp != nil && rank != s.mp.rank }

// startReceivers starts one receiver per peer that has a port channel
// into this rank.
func (m *multi) startReceivers(s *session) {
	peers := map[int]bool{}
	for _, end := range s.ranks[m.rank].ri.PortChannels {
		if end.Peer != m.rank {
			peers[end.Peer] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(peers)) {
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
		msg, err := rankwire.ReceiveTo(m.ctx, m.w.Net, m.w.Tag, peer, m.place)
		if err != nil {
			if m.ctx.Err() == nil {
				s.failCurrent(fmt.Errorf("cpu: rank %d: port traffic from rank %d: %w", m.rank, peer, err))
			}
			return // the session or the job ended; launches see it in their context
		}
		if err := m.apply(s, msg); err != nil {
			s.failCurrent(fmt.Errorf("cpu: rank %d: port traffic from rank %d: %w", m.rank, peer, err))
			return
		}
	}
}

// place is where the bytes of a DATA message go as they arrive (over a
// transport that can write them there): the rank's buffer, but not for
// packets (stored in whole words while they are polled) nor out of range
// (apply names the error).
func (m *multi) place(bt plan.BufferType, off, n uint64, packets bool) []byte {
	buf := m.bufs[m.rank][bt]
	if packets || rankwire.InRange(bt, off, n, uint64(len(buf))) != nil {
		return nil
	}
	return buf[off : off+n]
}

func (m *multi) apply(s *session, msg rankwire.Msg) error {
	switch msg.Kind {
	case rankwire.Data:
		bt, n := msg.Buffer, uint64(len(msg.Bytes))
		buf := m.bufs[m.rank][bt]
		if err := rankwire.InRange(bt, msg.Offset, n, uint64(len(buf))); err != nil {
			return err
		}
		dst := buf[msg.Offset : msg.Offset+n]
		switch {
		case msg.Placed: // written there as it arrived
		case msg.Packets:
			copyWords(words(dst), words(msg.Bytes))
		default:
			copy(dst, msg.Bytes)
		}
		s.mu.Lock()
		if l := s.cur; l != nil {
			if msg.Packets {
				l.pkt[m.rank][bt].wl.wake(l)
			}
			l.progress.Add(1)
		}
		s.mu.Unlock()
	case rankwire.Flag:
		rs := s.ranks[m.rank]
		if msg.Channel >= len(rs.port) {
			return fmt.Errorf("FLAG for port channel %d of %d", msg.Channel, len(rs.port))
		}
		s.mu.Lock()
		c := &rs.port[msg.Channel]
		if l := s.cur; l != nil {
			c.signal(l, nil, -1)
			l.progress.Add(1)
		} else {
			c.signalIdle()
		}
		s.mu.Unlock()
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
func (l *launch) poll(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
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
		case <-stop:
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
