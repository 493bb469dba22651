package cpu

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/mscclgo/mscclgo/executor"
)

// LL packets (docs/semantics.md §3) live in memory with their device
// byte layout: LL16 = {data_lo, flag, data_hi, flag}, LL8 = {data, flag},
// little-endian 32-bit words. Every 8-byte word {data, flag} is written
// and read with one atomic operation, so a reader that sees the current
// flag in a word also sees its data, and polling never races at the Go
// level. A packet region is twice its payload (docs/semantics.md §3.3).

// words views an 8-byte aligned byte slice as 64-bit words.
func words(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

// firstStale returns the first packet in [a, b) of w whose flag words are
// not all the launch flag, or b.
func (l *launch) firstStale(w []uint64, a, b uint64) uint64 {
	f := uint64(l.flag)
	if l.s.packet == 16 {
		for i := a; i < b; i++ {
			if atomic.LoadUint64(&w[2*i])>>32 != f || atomic.LoadUint64(&w[2*i+1])>>32 != f {
				return i
			}
		}
		return b
	}
	for i := a; i < b; i++ {
		if atomic.LoadUint64(&w[i])>>32 != f {
			return i
		}
	}
	return b
}

// unpack stores the payloads of packets [a, b) of w into raw and returns
// b, or stops at the first packet without the launch flag and returns its
// index.
func (l *launch) unpack(w []uint64, a, b uint64, raw []byte) uint64 {
	f := uint64(l.flag)
	if l.s.packet == 16 {
		for i := a; i < b; i++ {
			w0, w1 := atomic.LoadUint64(&w[2*i]), atomic.LoadUint64(&w[2*i+1])
			if w0>>32 != f || w1>>32 != f {
				return i
			}
			binary.LittleEndian.PutUint64(raw[8*(i-a):], w0&0xffffffff|w1<<32)
		}
		return b
	}
	for i := a; i < b; i++ {
		w0 := atomic.LoadUint64(&w[i])
		if w0>>32 != f {
			return i
		}
		binary.LittleEndian.PutUint32(raw[4*(i-a):], uint32(w0))
	}
	return b
}

// pack writes the payloads in raw as packets starting at packet a of w,
// with the launch flag.
func (l *launch) pack(w []uint64, a uint64, raw []byte) {
	f := uint64(l.flag) << 32
	if l.s.packet == 16 {
		n := uint64(len(raw) / 8)
		w = w[2*a : 2*(a+n)]
		for j := uint64(0); j < n; j++ {
			v := binary.LittleEndian.Uint64(raw[8*j:])
			atomic.StoreUint64(&w[2*j], v&0xffffffff|f)
			atomic.StoreUint64(&w[2*j+1], v>>32|f)
		}
		return
	}
	n := uint64(len(raw) / 4)
	w = w[a : a+n]
	for j := uint64(0); j < n; j++ {
		atomic.StoreUint64(&w[j], uint64(binary.LittleEndian.Uint32(raw[4*j:]))|f)
	}
}

// samePackets reports whether packets a… of w already hold the payloads
// of raw with the launch flag (an idempotent rewrite).
func (l *launch) samePackets(w []uint64, a uint64, raw []byte) bool {
	f := uint64(l.flag) << 32
	if l.s.packet == 16 {
		n := uint64(len(raw) / 8)
		w = w[2*a : 2*(a+n)]
		for j := uint64(0); j < n; j++ {
			v := binary.LittleEndian.Uint64(raw[8*j:])
			if atomic.LoadUint64(&w[2*j]) != v&0xffffffff|f || atomic.LoadUint64(&w[2*j+1]) != v>>32|f {
				return false
			}
		}
		return true
	}
	n := uint64(len(raw) / 4)
	w = w[a : a+n]
	for j := uint64(0); j < n; j++ {
		if atomic.LoadUint64(&w[j]) != uint64(binary.LittleEndian.Uint32(raw[4*j:]))|f {
			return false
		}
	}
	return true
}

// copyWords copies packet words atomically (port transfers of packets).
func copyWords(dst, src []uint64) {
	for i := range dst {
		atomic.StoreUint64(&dst[i], atomic.LoadUint64(&src[i]))
	}
}

// sameWords reports whether dst already holds the words of src.
func sameWords(dst, src []uint64) bool {
	for i := range dst {
		if atomic.LoadUint64(&dst[i]) != atomic.LoadUint64(&src[i]) {
			return false
		}
	}
	return true
}

// notify wakes the thread blocks waiting for packets of sp's buffer, if
// any. Writers call it after storing packets.
func (l *launch) notify(sp span) {
	if l.s.isRemote(sp.rank) {
		l.s.mp.ringBell(sp.rank)
		return
	}
	pw := &l.pkt[sp.rank][sp.bt]
	if pw.n.Load() > 0 {
		l.s.mu.Lock()
		pw.wl.wake(l)
		l.s.mu.Unlock()
	}
}

// awaitPackets parks t until packets [a, b) of sp carry the launch flag.
//
// Ordering: the reader registers in pw.n (under the monitor) before it
// re-reads the packets, and a writer stores its packets before it reads
// pw.n. Go's atomics are sequentially consistent, so either the reader
// sees the packets or the writer sees the reader and wakes it under the
// monitor (where the reader is already parked, or has yet to re-check).
func (t *tbRun) awaitPackets(sp span, a, b uint64) error {
	l := t.l
	w := words(sp.b)
	i := l.firstStale(w, a, b)
	if i == b {
		return nil
	}
	pw := &l.pkt[sp.rank][sp.bt]
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	pw.n.Add(1)
	defer pw.n.Add(-1)
	return t.parkOn(&pw.wl,
		func() bool { i = l.firstStale(w, i, b); return i == b },
		func() string { return l.staleWait(sp, i).String() },
		func() *executor.PacketWait { pw := l.staleWait(sp, i); return &pw })
}

// staleWait is the wait on packet i of sp, which is not yet this launch's.
func (l *launch) staleWait(sp span, i uint64) executor.PacketWait {
	w := words(sp.b)
	var got uint64
	if l.s.packet == 16 {
		if got = atomic.LoadUint64(&w[2*i]) >> 32; got == uint64(l.flag) {
			got = atomic.LoadUint64(&w[2*i+1]) >> 32
		}
	} else {
		got = atomic.LoadUint64(&w[i]) >> 32
	}
	return executor.PacketWait{Buffer: sp.bt, Offset: sp.off + i*l.s.packet, Got: got, Want: uint64(l.flag)}
}

// packetOp runs a packet op block by block: wait for the block's source
// packets, then read, reduce and write it as one step.
func (t *tbRun) packetOp(p *pktPlan) error {
	for a := uint64(0); a < p.np; {
		if err := t.stopped(); err != nil {
			return err
		}
		b := min(a+pktBlock, p.np)
		for _, in := range p.pktIn {
			if err := t.awaitPackets(in, a, b); err != nil {
				return err
			}
			t.l.s.rec.readPackets(t, in, a, b)
		}
		t.l.s.rec.writePackets(t, p.pktOut, a, b)
		if !t.packetBlock(p, a, b) {
			continue // a packet changed after the wait (racy plan): wait again
		}
		for _, out := range p.pktOut {
			t.l.notify(out)
		}
		t.l.progress.Add(1)
		a = b
	}
	return nil
}

// packetBlock processes packets [a, b) of p. It reads every source before
// writing anything, and returns false without writing if a source packet
// no longer carries the launch flag.
func (t *tbRun) packetBlock(p *pktPlan, a, b uint64) bool {
	l := t.l
	s := l.s
	pl := s.payload
	m := int((b - a) * pl)
	if rs := l.race; rs != nil {
		rs.mu.Lock()
		defer rs.mu.Unlock()
	} else {
		pk := s.packet
		h := &rangeHold{}
		for _, in := range p.rawIn {
			h.add(false, in.sub(a*pl, (b-a)*pl))
		}
		for _, in := range p.pktIn {
			h.add(false, in.sub(a*pk, (b-a)*pk))
		}
		for _, out := range p.rawOut {
			h.add(true, out.sub(a*pl, (b-a)*pl))
		}
		for _, out := range p.pktOut {
			h.add(true, out.sub(a*pk, (b-a)*pk))
		}
		l.ranges.acquire(h)
		defer l.ranges.release(h)
	}
	var payload []byte
	switch {
	case p.reduce:
		// acc = the first packet source; acc ⊕= each further packet
		// source in operand order; acc ⊕= the raw source last
		// (docs/semantics.md §2.6). The accumulator starts at a source,
		// not at zero: 0 + (−0) would be +0, and zero is no identity of
		// PROD, MAX or MIN.
		raw := p.rawIn[0].b[a*pl : b*pl]
		if len(p.pktIn) == 0 {
			payload = raw
			break
		}
		acc := t.accBuf(m)
		if l.unpack(words(p.pktIn[0].b), a, b, acc) != b {
			return false
		}
		if len(p.pktIn) > 1 {
			tmp := t.tmpBuf(m)
			for _, in := range p.pktIn[1:] {
				if l.unpack(words(in.b), a, b, tmp) != b {
					return false
				}
				s.combine(acc, acc, tmp)
			}
		}
		s.combine(acc, acc, raw)
		payload = acc
	case len(p.rawIn) > 0:
		payload = p.rawIn[0].b[a*pl : b*pl]
	default:
		payload = t.accBuf(m)
		if l.unpack(words(p.pktIn[0].b), a, b, payload) != b {
			return false
		}
	}
	if l.race != nil {
		t.racePackets(p, a, b, payload)
	}
	for _, out := range p.rawOut {
		copy(out.b[a*pl:b*pl], payload)
	}
	for _, out := range p.pktOut {
		l.pack(words(out.b), a, payload)
	}
	return true
}

// readPutPort is rppkt over port channels (docs/semantics.md §2.5): wait until every source
// packet carries the flag, then push one packet transfer per destination.
func (t *tbRun) readPutPort(op *executor.OpInstance, sp *opSpans) error {
	src := sp.src[0]
	np := uint64(len(src.b)) / t.l.s.packet
	for a := uint64(0); a < np; a += pktBlock {
		if err := t.awaitPackets(src, a, min(a+pktBlock, np)); err != nil {
			return err
		}
		t.l.s.rec.readPackets(t, src, a, min(a+pktBlock, np))
	}
	if rs := t.l.race; rs != nil {
		rs.mu.Lock()
		rs.access(t.actor(), src, false, true, nil)
		rs.mu.Unlock()
	}
	srcs := make([]span, len(sp.dst))
	for i := range srcs {
		srcs[i] = src
	}
	return t.portPut(op, srcs, sp.dst, true)
}
