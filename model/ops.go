// This file holds what each op costs and does in the simulation: its
// latency, its transfer (work units, a block's throughput, its demands on
// shared resources), the LL packets it reads and writes, and its effects
// (signals, semaphore releases, proxy triggers).

package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// cost is an op's latency before its transfer, and the transfer.
type cost struct {
	pre   float64
	units float64
	cap   float64
	uses  []use
}

// regionBytes is the data bytes of reg in step st (a pipeline iteration
// moves at most unit_size bytes from its offset; packet ops ignore it).
func regionBytes(reg executor.Region, st step) uint64 {
	if st.pipe == nil || st.op.Type.Packet() {
		return reg.Size
	}
	o := uint64(st.iter) * st.pipe.UnitSize
	if reg.Size <= o {
		return 0
	}
	return min(reg.Size-o, st.pipe.UnitSize)
}

// demand accumulates an op's demands on resources.
type demand struct {
	s     *sim
	units float64
	w     map[int]float64
	order []int
}

func (d *demand) add(res int, b float64) {
	if _, ok := d.w[res]; !ok {
		d.order = append(d.order, res)
	}
	d.w[res] += b
}

// dev is the GPU of rank r's resources: r's own, or with
// Options.OneDevice rank 0's.
func (s *sim) dev(r int) int {
	if s.opts.OneDevice {
		return 0
	}
	return r
}

// move adds b bytes from rank a to rank b's memory (a == b: local).
func (d *demand) move(from, to int, b float64) {
	s := d.s
	from, to = s.dev(from), s.dev(to)
	d.add(from*resPerRank+resHBM, b)
	if from == to {
		return
	}
	d.add(to*resPerRank+resHBM, b)
	if s.net != nil {
		d.moveOnNetwork(from, to, b)
		return
	}
	if s.node(from) == s.node(to) {
		d.add(from*resPerRank+resEgress, b)
		d.add(to*resPerRank+resIngress, b)
	} else {
		d.add(from*resPerRank+resNICOut, b)
		d.add(to*resPerRank+resNICIn, b)
	}
}

// uses returns the demands per unit of work.
func (d *demand) uses() []use {
	if d.units <= 0 {
		return nil
	}
	out := make([]use, 0, len(d.order))
	for _, r := range d.order {
		out = append(out, use{res: r, weight: d.w[r] / d.units})
	}
	return out
}

// costOf returns the cost of step st on rank r.
func (s *sim) costOf(r int, st step) cost {
	p := s.prof
	op := st.op
	// The dispatch of an op: MSCCL++'s op_us, or this kernel's dispatch
	// path, which a no-op pays too.
	opUS, nopUS := p.OpUS.Value, 0.0
	if s.kc != nil {
		opUS, nopUS = s.kc.dispatch, s.kc.dispatch
	}
	switch ty := op.Type; {
	case ty == plan.OpNop:
		return cost{pre: nopUS + p.NopUS.Value}
	case ty == plan.OpBarrier:
		return cost{pre: nopUS + 2*p.NopUS.Value}
	case ty.IsDataSync() && ty.Signals():
		if op.ChannelType == plan.Port {
			return cost{pre: opUS + p.FIFOPushUS.Value}
		}
		return cost{pre: opUS}
	case ty.IsDataSync(): // waits, flushes, semaphores
		return cost{pre: opUS}
	}
	if op.Type.UsesPort(op.ChannelType) {
		return cost{pre: opUS + p.FIFOPushUS.Value}
	}
	d := demand{s: s, w: map[int]float64{}}
	remoteRead, sw := false, false
	var srcBytes float64
	for i, reg := range op.Src {
		f := 1.0
		if op.Type.SrcPacket(i) {
			f = 2
		}
		b := float64(regionBytes(reg, st)) * f
		d.units += b
		srcBytes += b
		if reg.Switch >= 0 {
			sw = true
			for _, m := range s.inst.Ranks[r].Switches[reg.Switch].Ranks {
				d.add(m*resPerRank+resHBM, b)
				d.add(m*resPerRank+resEgress, b*s.nvlsScale)
				d.add(r*resPerRank+resIngress, b*s.nvlsScale/float64(len(s.inst.Ranks[r].Switches[reg.Switch].Ranks)))
			}
			continue
		}
		remoteRead = remoteRead || s.dev(reg.Rank) != s.dev(r)
		d.move(reg.Rank, r, b)
	}
	for i, reg := range op.Dst {
		f := 1.0
		if op.Type.DstPacket(i) {
			f = 2
		}
		b := float64(regionBytes(reg, st)) * f
		d.units += b
		if reg.Switch >= 0 {
			sw = true
			d.add(r*resPerRank+resEgress, b*s.nvlsScale)
			for _, m := range s.inst.Ranks[r].Switches[reg.Switch].Ranks {
				d.add(m*resPerRank+resHBM, b)
				d.add(m*resPerRank+resIngress, b*s.nvlsScale)
			}
			continue
		}
		d.move(r, reg.Rank, b)
	}
	// The block's loads are what wait (Little's law); its stores, local
	// or remote, are posted and become visible later (packet writes and
	// signals add the NVLink latency).
	lat := p.LocalLatencyUS.Value
	switch {
	case sw:
		lat = max(p.NVLSLatencyUS.Value, p.LocalLatencyUS.Value)
	case remoteRead:
		lat = max(p.NVLinkLatencyUS.Value, p.LocalLatencyUS.Value)
	}
	threads := float64(s.inst.Plan.NumThreadsPerBlock) / plan.MaxThreadsPerBlock
	if threads <= 0 {
		threads = 1
	}
	if s.kc != nil {
		// The entry's loops set the block's rate; LL8 is its own entry.
		cp := s.kc.rate(op.Type, srcBytes, d.units-srcBytes, lat)
		return cost{pre: opUS + lat, units: d.units, cap: cp, uses: d.uses()}
	}
	cp := p.BlockInflightKiB.Value * 1024 * threads / lat
	if s.opts.LL8 && op.Type.Packet() {
		cp *= p.LL8Factor.Value
	}
	return cost{pre: p.OpUS.Value + lat, units: d.units, cap: cp, uses: d.uses()}
}

// packetReads appends the packet regions step st on rank r reads.
func (s *sim) packetReads(r int, st step, out []pktRead) []pktRead {
	op := st.op
	if op.ChannelType == plan.Port && op.Type == plan.OpPutPacket {
		return out // the source is copied as it is, flags included
	}
	for i, reg := range op.Src {
		if op.Type.SrcPacket(i) && reg.Switch < 0 && reg.Size > 0 {
			out = append(out, pktRead{rank: reg.Rank, buf: reg.Buffer, off: reg.Offset, end: reg.Offset + reg.Size})
		}
	}
	return out
}

// registerWrites records the packet writes t's op starts (memory
// channels, local and switch destinations) and wakes the readers of the
// ranks written.
func (s *sim) registerWrites(t *tbRun, st step) []*pktWrite {
	op := st.op
	if !op.Type.Packet() || op.Type.UsesPort(op.ChannelType) {
		return nil
	}
	var ws []*pktWrite
	add := func(rank int, buf plan.BufferType, off, size uint64) {
		w := &pktWrite{rank: rank, buf: buf, off: off, end: off + size, slice: t.slice}
		s.ranks[rank].pkts = append(s.ranks[rank].pkts, w)
		ws = append(ws, w)
	}
	for i, reg := range op.Dst {
		if !op.Type.DstPacket(i) || reg.Size == 0 {
			continue
		}
		if reg.Switch >= 0 {
			g := s.inst.Ranks[t.rank].Switches[reg.Switch]
			for _, m := range g.Ranks {
				add(m, g.Buffer, reg.Offset, reg.Size)
			}
			continue
		}
		add(reg.Rank, reg.Buffer, reg.Offset, reg.Size)
	}
	s.wakeWriters(ws)
	return ws
}

// wakeWriters re-checks the readers of the ranks ws write.
func (s *sim) wakeWriters(ws []*pktWrite) {
	for i, w := range ws {
		seen := false
		for _, x := range ws[:i] {
			seen = seen || x.rank == w.rank
		}
		if !seen {
			s.wakeAll(&s.ranks[w.rank].pktWaiters)
		}
	}
}

// effects applies what t's op does when its transfer ends.
func (s *sim) effects(t *tbRun, st step, writes []*pktWrite) {
	p := s.prof
	op := st.op
	r := t.rank
	ri := &s.inst.Ranks[r]
	rs := &s.ranks[r]
	if len(writes) > 0 {
		vis := p.NVLinkLatencyUS.Value
		if s.opts.OneDevice {
			vis = p.LocalLatencyUS.Value // another block of the same GPU
		}
		for _, w := range writes {
			w.done, w.at = true, s.now+vis
		}
		s.wakeWriters(writes)
	}
	switch ty := op.Type; {
	case ty.IsDataSync() && ty.Signals():
		for _, c := range op.Channels {
			switch op.ChannelType {
			case plan.Memory:
				end := ri.MemoryChannels[c]
				s.deliver(end.Peer, plan.Memory, end.PeerIndex, s.now+s.latency(r, end.Peer), t.slice)
			case plan.Port:
				s.push(&trigger{rank: r, ch: c, flag: true, src: r, dst: ri.PortChannels[c].Peer, slice: t.slice})
			}
		}
	case ty == plan.OpSemRelease:
		for _, id := range op.Semaphores {
			id := id
			slice := t.slice
			s.at(s.now+p.AtomicUS.Value, func() {
				sm := &rs.sems[id]
				if len(sm.queue) > 0 {
					w := sm.queue[0]
					sm.queue = sm.queue[1:]
					w.semWant--
					s.flowFrom(w, slice)
					s.check(w)
					return
				}
				sm.v++
				sm.lastRel = slice
			})
		}
	}
	if !op.Type.UsesPort(op.ChannelType) {
		return
	}
	flag := op.Type.Signals()
	sync := op.Type == plan.OpPutWithSignalAndFlush
	for i, dst := range op.Dst {
		if i >= len(op.Channels) {
			break
		}
		tr := &trigger{rank: r, ch: op.Channels[i], data: true, flag: flag, src: r, dst: dst.Rank, dstRegion: dst, slice: t.slice}
		switch op.Type {
		case plan.OpPutPacket:
			tr.bytes, tr.pkt = 2*dst.Size, true
		case plan.OpReadPutPacket:
			tr.bytes, tr.pkt = 2*op.Src[0].Size, true
		default:
			tr.bytes = regionBytes(dst, st)
		}
		if sync {
			tr.sync = t
			t.syncs++
		}
		s.push(tr)
	}
}

// latency is the one-way latency of a store from rank a to rank b.
func (s *sim) latency(a, b int) float64 {
	if s.opts.OneDevice {
		return s.prof.LocalLatencyUS.Value
	}
	if s.node(a) != s.node(b) {
		return s.prof.NICLatencyUS.Value
	}
	return s.prof.NVLinkLatencyUS.Value
}

// The cross-node path of a port-channel trigger, after the proxy has
// posted its work request (docs/model.md, "The cross-node path"):
//
//	post:    the doorbell crosses PCIe to the NIC; for data, the NIC reads
//	         the payload from GPU memory (a PCIe round trip); the NIC
//	         spends nic_msg_us on the work request, one at a time
//	transfer: the bytes at the NIC's rate
//	arrive:  the wire (nic_latency_us), the receiving NIC's write into GPU
//	         memory (one PCIe traversal), the waiting thread's poll (one
//	         HBM load)
//	ack:     the completion returns (nic_latency_us), crosses PCIe into the
//	         host's completion queue, waits for the proxy to poll it
//	         (proxy_poll_us), and the proxy's release of the GPU crosses
//	         PCIe again
//
// A flag (a signal, or the flag of a put-with-signal) is one more work
// request with its value inline: no payload read.

// crossNode reports whether a trigger from rank a to rank b goes over the
// NICs.
func (s *sim) crossNode(a, b int) bool { return s.node(a) != s.node(b) }

// postDelay is the time from the proxy's post to the NIC starting the
// work request: the doorbell, and for data the payload read.
func (s *sim) postDelay(data bool) float64 {
	p := s.prof
	d := p.PCIeLatencyUS.Value
	if data {
		d += 2 * p.PCIeLatencyUS.Value
	}
	return d
}

// arriveDelay is the time from the last byte leaving the sending NIC to
// the waiting thread seeing it.
func (s *sim) arriveDelay() float64 {
	p := s.prof
	return p.NICLatencyUS.Value + p.PCIeLatencyUS.Value + p.LocalLatencyUS.Value
}

// ackDelay is the time from the last byte leaving the sending NIC to the
// GPU learning that the transfer completed.
func (s *sim) ackDelay() float64 {
	p := s.prof
	return 2*p.NICLatencyUS.Value + 3*p.PCIeLatencyUS.Value + p.ProxyPollUS.Value + p.LocalLatencyUS.Value
}

// nicSlot reserves rank r's NIC for one work request ready at t and
// returns when the NIC has processed it.
func (s *sim) nicSlot(r int, t float64) float64 {
	rs := &s.ranks[r]
	start := max(t, rs.nicFree)
	rs.nicFree = start + s.prof.NICMsgUS.Value
	return rs.nicFree
}

// deliver adds a signal to rank peer's channel end idx of type ct at
// time at.
func (s *sim) deliver(peer int, ct plan.ChannelType, idx int, at float64, slice int) {
	if idx < 0 {
		return // an unpaired channel: the signal is lost
	}
	s.at(at, func() {
		ch := &s.chans(peer, ct)[idx]
		ch.arrivals = append(ch.arrivals, arrival{at: at, slice: slice})
		s.wakeAll(&ch.waiters)
	})
}

// push hands a trigger to its rank's proxy: the trigger crosses PCIe into
// the host's FIFO, waits for the proxy to see it (proxy_poll_us), and is
// served in order, proxy_us each.
func (s *sim) push(tr *trigger) {
	p := s.prof
	rs := &s.ranks[tr.rank]
	rs.port[tr.ch].pushed++
	seen := s.now + p.PCIeLatencyUS.Value + p.ProxyPollUS.Value
	start := max(seen, rs.proxyFree) + p.ProxyUS.Value
	rs.proxyFree = start
	s.at(start, func() { s.serve(tr) })
}

// serve performs a trigger: the data transfer, then (in order on its
// channel) the flag. Across nodes the work request first waits for its
// post (postDelay) and a NIC slot.
func (s *sim) serve(tr *trigger) {
	if tr.data {
		// In flight from now: a later flag of the channel, posted
		// after it, waits for it.
		s.ranks[tr.rank].port[tr.ch].inflight++
	}
	if s.crossNode(tr.src, tr.dst) {
		ready := s.nicSlot(tr.src, s.now+s.postDelay(tr.data))
		s.at(ready, func() { s.transfer(tr) })
		return
	}
	s.transfer(tr)
}

// transfer moves tr's bytes and delivers its flag.
func (s *sim) transfer(tr *trigger) {
	rs := &s.ranks[tr.rank]
	ch := &rs.port[tr.ch]
	end := s.inst.Ranks[tr.rank].PortChannels[tr.ch]
	cross := s.crossNode(tr.src, tr.dst)
	lat := s.latency(tr.src, tr.dst)
	if cross {
		lat = s.arriveDelay()
	}
	if !tr.data {
		ch.done++
		s.flag(tr, ch, end, lat)
		s.wakeAll(&ch.waiters)
		return
	}
	var w *pktWrite
	if tr.pkt {
		reg := tr.dstRegion
		w = &pktWrite{rank: tr.dst, buf: reg.Buffer, off: reg.Offset, end: reg.Offset + reg.Size, slice: tr.slice}
		s.ranks[tr.dst].pkts = append(s.ranks[tr.dst].pkts, w)
		s.wakeAll(&s.ranks[tr.dst].pktWaiters)
	}
	d := demand{s: s, w: map[int]float64{}, units: float64(tr.bytes)}
	d.move(tr.src, tr.dst, float64(tr.bytes))
	s.startFlow(d.units, math.Inf(1), d.uses(), func() {
		ch.inflight--
		if w != nil {
			w.done, w.at = true, s.now+lat
			s.wakeAll(&s.ranks[tr.dst].pktWaiters)
		}
		flagLat := lat
		if cross {
			// The flag is one more work request after the data.
			flagLat = s.nicSlot(tr.src, s.now) - s.now + lat
		}
		if tr.flag {
			s.flag(tr, ch, end, flagLat)
		} else if ch.inflight == 0 {
			s.flushFlags(ch, end, flagLat)
		}
		complete := func() {
			ch.done++
			if tr.sync != nil {
				tr.sync.syncs--
				s.tail(tr.sync)
			}
			s.wakeAll(&ch.waiters)
		}
		if cross {
			s.at(s.now+s.ackDelay(), complete)
			return
		}
		complete()
	})
}

// flag delivers tr's signal once no data transfer of its channel is in
// flight (the proxy's connection keeps order), else queues it.
func (s *sim) flag(tr *trigger, ch *chanState, end executor.ChannelEnd, lat float64) {
	ch.pendingFlags = append(ch.pendingFlags, tr)
	if ch.inflight == 0 {
		s.flushFlags(ch, end, lat)
	}
}

func (s *sim) flushFlags(ch *chanState, end executor.ChannelEnd, lat float64) {
	for _, tr := range ch.pendingFlags {
		s.deliver(end.Peer, plan.Port, end.PeerIndex, s.now+lat, tr.slice)
	}
	ch.pendingFlags = ch.pendingFlags[:0]
}

// sliceOf is the timeline slice of step st of t, started now.
func (s *sim) sliceOf(t *tbRun, st step) timeline.Slice {
	op := st.op
	sl := timeline.Slice{Rank: t.rank, TB: t.id, Op: op.Path, Index: op.Index, Name: op.Type.String(),
		Iteration: st.iter, Start: s.now, Source: op.Source}
	var src, dst uint64
	peers := map[int]bool{}
	for _, reg := range op.Src {
		src += regionBytes(reg, st)
		s.regionPeers(t.rank, reg, peers)
	}
	for _, reg := range op.Dst {
		dst += regionBytes(reg, st)
		s.regionPeers(t.rank, reg, peers)
	}
	sl.Bytes = max(src, dst)
	ri := &s.inst.Ranks[t.rank]
	if len(op.Channels) > 0 {
		ids := make([]string, len(op.Channels))
		for i, c := range op.Channels {
			ids[i] = fmt.Sprint(c)
			switch op.ChannelType {
			case plan.Memory:
				peers[ri.MemoryChannels[c].Peer] = true
			case plan.Port:
				peers[ri.PortChannels[c].Peer] = true
			}
		}
		sl.Channel = op.ChannelType.String() + " " + strings.Join(ids, ",")
	}
	for p := range peers {
		sl.Peers = append(sl.Peers, p)
	}
	sortInts(sl.Peers)
	return sl
}

// regionPeers adds the remote ranks reg reaches.
func (s *sim) regionPeers(r int, reg executor.Region, peers map[int]bool) {
	if reg.Switch >= 0 {
		for _, m := range s.inst.Ranks[r].Switches[reg.Switch].Ranks {
			if m != r {
				peers[m] = true
			}
		}
		return
	}
	if reg.Rank != r {
		peers[reg.Rank] = true
	}
}
