package cli

// deadlock.go prints run's deadlock report: the most likely cause first
// (for a thread block waiting for LL packets: the op that wrote the
// nearest wrong slot of that scratch, or that no op writes there), then
// the blocked thread blocks, at most maxReportLines lines unless
// --explain.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// reportDeadlock prints err (a launch's deadlock) after prefix, with the
// most likely cause first.
func reportDeadlock(w io.Writer, prefix string, inst *executor.Instance, err error, all bool) {
	limit := maxReportLines
	if all {
		limit = 0
	}
	var dl *executor.DeadlockError
	if !errors.As(err, &dl) || inst == nil {
		limitLines(w, prefix+err.Error()+"\n", limit)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%sdeadlock: %d thread block(s) blocked\n", prefix, len(dl.Blocked))
	var cs []*cause
	byKey := map[string]*cause{}
	for _, t := range dl.Blocked {
		for _, c := range packetCause(inst, t) {
			k := byKey[c.key]
			if k == nil {
				k = c
				byKey[c.key] = k
				cs = append(cs, k)
			}
			k.n++
			k.rank = min(k.rank, c.rank)
		}
	}
	slices.SortStableFunc(cs, func(a, b *cause) int {
		switch wa, wb := a.weight(), b.weight(); {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return 0
	})
	printCauses(&b, cs, uint64(len(dl.Blocked)), "blocked thread blocks")
	for _, t := range dl.Blocked {
		fmt.Fprintf(&b, "  rank %d tb %d %s: %s\n", t.Rank, t.TB, t.Op, t.Waiting)
	}
	limitLines(w, b.String(), limit)
}

// opOf finds the op a blocked thread block reports (by its description).
func opOf(inst *executor.Instance, t executor.BlockedTB) *executor.OpInstance {
	if t.Rank < 0 || t.Rank >= len(inst.Ranks) {
		return nil
	}
	for i := range inst.Ranks[t.Rank].TBs {
		tb := &inst.Ranks[t.Rank].TBs[i]
		if tb.ID != t.TB {
			continue
		}
		var found *executor.OpInstance
		eachOp(tb.Ops, func(op *executor.OpInstance) {
			if found == nil && op.Describe() == t.Op {
				found = op
			}
		})
		return found
	}
	return nil
}

// eachOp calls f on every op of ops, pipeline bodies included.
func eachOp(ops []executor.OpInstance, f func(op *executor.OpInstance)) {
	for i := range ops {
		f(&ops[i])
		eachOp(ops[i].Body, f)
	}
}

// packetWriter is an op that writes packets into a rank's scratch.
type packetWriter struct {
	rank, tb int
	op       *executor.OpInstance
	dst      executor.Region
}

// packetCause names the likely causes of a thread block that waits for
// LL packets that never come, likelier first: the packet writer into the
// same scratch whose destination is nearest to the slot waited for (a
// wrong slot), or the blocked op itself when that writer's slot is read
// as planned (it reads the wrong slot), or that no op writes packets
// into that scratch. It returns nil for other waits, and for a wait
// whose slot some op does write (that writer is itself held up: another
// blocked thread block names it).
func packetCause(inst *executor.Instance, t executor.BlockedTB) []*cause {
	// The typed record every backend gives (executor.PacketWait).
	if t.Packet == nil || t.Packet.Buffer != plan.Scratch {
		return nil
	}
	op := opOf(inst, t)
	if op == nil {
		return nil
	}
	pkt, flag := t.Packet.Offset, t.Packet.Want
	if inst.Plan != nil && inst.Plan.UseDoubleScratch && flag%2 == 0 && pkt >= inst.ScratchBytes/2 {
		pkt -= inst.ScratchBytes / 2
	}
	data := pkt / 2 // a packet region is twice its payload (docs/semantics.md §3.3)
	// The scratch operand of the op that holds the slot waited for.
	var want *executor.Region
	for i := range op.Src {
		s := &op.Src[i]
		if s.Buffer != plan.Scratch {
			continue
		}
		if want == nil || s.Offset <= data && data < s.Offset+s.Size {
			want = s
		}
	}
	if want == nil {
		return nil
	}
	var writers []packetWriter
	for _, ri := range inst.Ranks {
		for _, tb := range ri.TBs {
			eachOp(tb.Ops, func(o *executor.OpInstance) {
				// Writers of packets into one rank's scratch; a switch
				// store's reach the members through the multicast.
				if !o.Type.WritesPackets() || o.Type.Family() == plan.FamSwitch {
					return
				}
				for _, d := range o.Dst {
					if d.Buffer == plan.Scratch && d.Rank == t.Rank && d.Switch < 0 {
						writers = append(writers, packetWriter{rank: ri.Rank, tb: tb.ID, op: o, dst: d})
					}
				}
			})
		}
	}
	reader := opName(op, t.Rank, t.TB, false)
	slot := func(r executor.Region) string {
		if inst.ChunkBytes == 0 {
			return fmt.Sprintf("scratch[%d:%d]", r.Offset, r.Offset+r.Size)
		}
		if r.Size > inst.ChunkBytes {
			return fmt.Sprintf("slots %d-%d", r.Offset/inst.ChunkBytes, (r.Offset+r.Size-1)/inst.ChunkBytes)
		}
		return fmt.Sprintf("slot %d", r.Offset/inst.ChunkBytes)
	}
	if len(writers) == 0 {
		return []*cause{{key: "none " + strconv.Itoa(t.Rank) + " " + reader,
			text: fmt.Sprintf("no op writes packets into rank %d's scratch, where %s reads %s (rank %d tb %d %s)", t.Rank, reader, slot(*want), t.Rank, t.TB, op.Path)}}
	}
	// Writers into the slot itself: the wait is held up elsewhere.
	for _, w := range writers {
		if w.dst.Offset < want.Offset+want.Size && want.Offset < w.dst.Offset+w.dst.Size {
			return nil
		}
	}
	// How often each destination is written: a slot written more often
	// than once is the likelier wrong one.
	count := map[uint64]int{}
	for _, w := range writers {
		count[w.dst.Offset]++
	}
	dist := func(w packetWriter) uint64 {
		if w.dst.Offset > want.Offset {
			return w.dst.Offset - want.Offset
		}
		return want.Offset - w.dst.Offset
	}
	// readBy is an op of the rank, other than the blocked one, that
	// reads the slot w wrote: then w's slot is consumed as planned.
	readBy := func(w packetWriter) *executor.OpInstance {
		var other *executor.OpInstance
		for _, tb := range inst.Ranks[t.Rank].TBs {
			eachOp(tb.Ops, func(o *executor.OpInstance) {
				if other != nil || o == op || !o.Type.ReadsPackets() {
					return
				}
				for _, s := range o.Src {
					if s.Buffer == plan.Scratch && s.Switch < 0 && s.Offset < w.dst.Offset+w.dst.Size && w.dst.Offset < s.Offset+s.Size {
						other = o
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
	writer := opName(best.op, best.rank, best.tb, true)
	wrote := &cause{key: "slot " + writer,
		text: fmt.Sprintf("%s wrote %s of rank %d's scratch (rank %d tb %d %s), where %s reads %s (rank %d tb %d %s); no op writes %s",
			writer, slot(best.dst), t.Rank, best.rank, best.tb, best.op.Path, reader, slot(*want), t.Rank, t.TB, op.Path, slot(*want))}
	misread := &cause{key: "misread " + reader,
		text: fmt.Sprintf("%s reads %s of rank %d's scratch (rank %d tb %d %s), which no op writes; %s writes %s",
			reader, slot(*want), t.Rank, t.Rank, t.TB, op.Path, writer, slot(best.dst))}
	// A slot written and read as planned: the blocked op reads the wrong
	// slot. A slot written and never read: the write went astray, or
	// (as likely, from the slots alone) the read did.
	if bestRead != nil {
		misread.text += ", which " + opName(bestRead, t.Rank, -1, false) + " reads"
		wrote.rank = 1
		return []*cause{misread, wrote}
	}
	misread.rank = 1
	return []*cause{wrote, misread}
}
