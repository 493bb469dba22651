package diagnose

import (
	"fmt"
	"strconv"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// packetWriter is an op that writes packets into the waiting rank's
// scratch, and the region it writes there.
type packetWriter struct {
	ref OpRef
	dst executor.Region
}

// overlaps reports whether regions a and b share a byte.
func overlaps(a, b executor.Region) bool {
	return a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size
}

// packetCauses names the likely causes of a thread block that waits for
// LL packets that never come, likelier first: the packet writer into the
// same scratch whose destination is nearest to the slot waited for (a
// wrong slot written), or the blocked op itself when that writer's slot
// is read as planned (a wrong slot read), or that no op writes packets
// into that scratch. It returns nil for other waits, and for a wait
// whose slot some op does write (that writer is itself held up: another
// blocked thread block names it).
func packetCauses(inst *executor.Instance, b Blocked) []Cause {
	if b.Packet == nil {
		return nil
	}
	want, ok := dataSlot(inst, b.Op.Op, *b.Packet)
	if !ok {
		return nil
	}
	reader := b.Op
	var writers []packetWriter
	for _, ri := range inst.Ranks {
		for _, tb := range ri.TBs {
			eachOp(tb.Ops, 1, func(o *executor.OpInstance, _ int) {
				// Writers of packets into one rank's scratch; a switch
				// store's reach the members through the multicast.
				if !o.Type.WritesPackets() || o.Type.Family() == plan.FamSwitch {
					return
				}
				for _, d := range o.Dst {
					if d.Buffer == plan.Scratch && d.Rank == b.Rank && d.Switch < 0 {
						writers = append(writers, packetWriter{ref: OpRef{Rank: ri.Rank, TB: tb.ID, Op: o}, dst: d})
					}
				}
			})
		}
	}
	if len(writers) == 0 {
		return []Cause{{Kind: NoPacketWriter, Op: reader, Peer: -1, Place: want, Count: 1,
			Key: "none " + strconv.Itoa(b.Rank) + " " + reader.Name(),
			Text: fmt.Sprintf("no op writes packets into rank %d's scratch, where %s reads %s (%s)",
				b.Rank, reader.Name(), slotText(inst, want), reader.Where())}}
	}
	// A writer of the packet waited for: the wait is held up elsewhere.
	// Writers of only other parts of the slot: the rest is never written.
	elem := executor.Region{Offset: (b.Packet.Offset - half(inst, *b.Packet)) / 2, Size: 1}
	var part []packetWriter
	for _, w := range writers {
		switch {
		case overlaps(w.dst, elem):
			return nil
		case overlaps(w.dst, want):
			part = append(part, w)
		}
	}
	if len(part) > 0 {
		return []Cause{partialCause(inst, b, want, elem.Offset, part)}
	}
	// How often each destination is written: a slot written more often
	// than once is the likelier wrong one.
	count := map[uint64]int{}
	for _, w := range writers {
		count[w.dst.Offset]++
	}
	dist := func(w packetWriter) uint64 {
		return max(w.dst.Offset, want.Offset) - min(w.dst.Offset, want.Offset)
	}
	// readBy is an op of the rank, other than the blocked one, that
	// reads the slot w wrote: then w's slot is consumed as planned.
	readBy := func(w packetWriter) *OpRef {
		var other *OpRef
		for _, tb := range inst.Ranks[b.Rank].TBs {
			eachOp(tb.Ops, 1, func(o *executor.OpInstance, _ int) {
				if other != nil || o == reader.Op || !o.Type.ReadsPackets() {
					return
				}
				for _, s := range o.Src {
					if s.Buffer == plan.Scratch && s.Switch < 0 && overlaps(s, w.dst) {
						other = &OpRef{Rank: b.Rank, TB: tb.ID, Op: o}
					}
				}
			})
		}
		return other
	}
	// The nearest writer; at the same distance, one whose slot no op
	// reads (a write gone astray), then one whose slot more ops write.
	best := writers[0]
	bestRead := readBy(best)
	for _, w := range writers[1:] {
		d, bd := dist(w), dist(best)
		if d > bd {
			continue
		}
		wr := readBy(w)
		switch {
		case d < bd, wr == nil && bestRead != nil, (wr == nil) == (bestRead == nil) && count[w.dst.Offset] > count[best.dst.Offset]:
			best, bestRead = w, wr
		}
	}
	writer := best.ref
	wrote := Cause{Kind: WrongSlotWrite, Op: writer, Peer: -1, Other: reader, Place: want, Wrote: best.dst, Count: 1,
		Key: "slot " + writer.SendingName(),
		Text: fmt.Sprintf("%s wrote %s of rank %d's scratch (%s), where %s reads %s (%s); no op writes %s",
			writer.SendingName(), slotText(inst, best.dst), b.Rank, writer.Where(), reader.Name(), slotText(inst, want), reader.Where(), slotText(inst, want))}
	misread := Cause{Kind: WrongSlotRead, Op: reader, Peer: -1, Other: writer, Place: want, Wrote: best.dst, Count: 1,
		Key: "misread " + reader.Name(),
		Text: fmt.Sprintf("%s reads %s of rank %d's scratch (%s), which no op writes; %s writes %s",
			reader.Name(), slotText(inst, want), b.Rank, reader.Where(), writer.SendingName(), slotText(inst, best.dst))}
	// A slot written and read as planned: the blocked op reads the wrong
	// slot. A slot written and never read: the write went astray, or
	// (as likely, from the slots alone) the read did.
	if bestRead != nil {
		misread.Text += ", which " + bestRead.Name() + " reads"
		wrote.Evidence = 1
		return []Cause{misread, wrote}
	}
	misread.Evidence = 1
	return []Cause{wrote, misread}
}

// partialCause names the writer nearest the part of the slot want that
// holds data byte d and that no op writes, among the writers part of
// other parts of want.
func partialCause(inst *executor.Instance, b Blocked, want executor.Region, d uint64, part []packetWriter) Cause {
	lo, hi := want.Offset, want.Offset+want.Size
	best := part[0]
	for _, w := range part {
		if end := w.dst.Offset + w.dst.Size; end <= d && end > lo {
			lo = end
		}
		if w.dst.Offset > d && w.dst.Offset < hi {
			hi = w.dst.Offset
		}
	}
	dist := func(w packetWriter) uint64 {
		if w.dst.Offset > d {
			return w.dst.Offset - d
		}
		return d - (w.dst.Offset + w.dst.Size - 1)
	}
	for _, w := range part[1:] {
		if dist(w) < dist(best) {
			best = w
		}
	}
	gap := executor.Region{Rank: b.Rank, Buffer: plan.Scratch, Offset: lo, Size: hi - lo, Switch: -1}
	return Cause{Kind: PartialWrite, Op: best.ref, Other: b.Op, Peer: -1, Place: gap, Wrote: best.dst, Count: 1,
		Key: "part " + best.ref.SendingName() + " " + b.Op.Name(),
		Text: fmt.Sprintf("%s wrote the packets at %s of rank %d (%s), part of %s, which %s reads (%s); no op writes %s",
			best.ref.SendingName(), packets(inst, *b.Packet, best.dst), b.Rank, best.ref.Where(),
			packets(inst, *b.Packet, want), b.Op.Name(), b.Op.Where(), packets(inst, *b.Packet, gap))}
}

// packets is "scratch[A:B]", the packet bytes of data region r in the
// scratch half that packet wait p waits in (as the blocked lines name
// them).
func packets(inst *executor.Instance, p executor.PacketWait, r executor.Region) string {
	h := half(inst, p)
	return fmt.Sprintf("scratch[%d:%d]", 2*r.Offset+h, 2*(r.Offset+r.Size)+h)
}
