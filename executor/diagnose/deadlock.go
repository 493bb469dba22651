package diagnose

import (
	"fmt"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// Report is the diagnosis of a deadlocked launch.
type Report struct {
	// Causes are the candidate causes, likelier first; Count is how
	// many blocked thread blocks each explains. Empty when the blocked
	// state names none (every wait is on something another blocked
	// thread block would have done).
	Causes []Cause
	// Blocked are the blocked thread blocks, in the order reported.
	Blocked []Blocked
}

// Blocked is one blocked thread block with the op it is blocked in and
// what it waits for, in the same words on every backend.
type Blocked struct {
	executor.BlockedTB
	// Op is the op it is blocked in (Op.Op nil before its first op, or
	// when the instance does not hold the op reported).
	Op OpRef
	// Line is "rank 0 tb 1 op 3 upkt (x.star:16:35): packets at
	// scratch[8192:12288] (slot 1) have flag 0, want 1": a packet wait
	// names the slot of the op's operand it waits in, not the one packet
	// the backend happened to check, so that every backend prints the
	// same line.
	Line string
}

// Deadlock diagnoses a deadlocked launch of inst from its blocked thread
// blocks (an *executor.DeadlockError's Blocked, from any backend).
func Deadlock(inst *executor.Instance, blocked []executor.BlockedTB) *Report {
	r := &Report{}
	var cs []Cause
	for _, t := range blocked {
		b := Blocked{BlockedTB: t, Op: OpRef{Rank: t.Rank, TB: t.TB, Op: opOf(inst, t)}}
		b.Line = fmt.Sprintf("rank %d tb %d %s: %s", t.Rank, t.TB, t.Op, waiting(inst, b))
		r.Blocked = append(r.Blocked, b)
		if b.Op.Op == nil {
			continue
		}
		cs = append(cs, packetCauses(inst, b)...)
		cs = append(cs, signalCauses(inst, b)...)
	}
	cs = append(cs, cycleCauses(inst, r.Blocked)...)
	r.Causes = Rank(cs)
	return r
}

// opOf finds the op a blocked thread block reports, by its description
// (executor.OpInstance.Describe, as the backends give it) or by its place
// and type alone ("op 3.1 wait", as the cost model gives it).
func opOf(inst *executor.Instance, t executor.BlockedTB) *executor.OpInstance {
	if inst == nil || t.Rank < 0 || t.Rank >= len(inst.Ranks) {
		return nil
	}
	for i := range inst.Ranks[t.Rank].TBs {
		tb := &inst.Ranks[t.Rank].TBs[i]
		if tb.ID != t.TB {
			continue
		}
		var found *executor.OpInstance
		eachOp(tb.Ops, 1, func(op *executor.OpInstance, _ int) {
			if found == nil && (op.Describe() == t.Op || op.Path != "" && op.Path+" "+op.Type.String() == t.Op) {
				found = op
			}
		})
		return found
	}
	return nil
}

// waiting is what b waits for: the backend's words, except for a packet
// wait, which names the slot of the op's operand that holds the packet.
func waiting(inst *executor.Instance, b Blocked) string {
	p := b.Packet
	if p == nil || b.Op.Op == nil {
		return b.Waiting
	}
	span, ok := packetSpan(inst, b.Op.Op, *p)
	if !ok {
		return b.Waiting
	}
	text := fmt.Sprintf("packets at %s[%d:%d]", p.Buffer.Name(), span.Offset, span.Offset+span.Size)
	if d, ok := dataSlot(inst, b.Op.Op, *p); ok && inst.ChunkBytes > 0 {
		text += " (" + slotText(inst, d) + ")"
	}
	text += fmt.Sprintf(" have flag %d, want %d", p.Got, p.Want)
	// The backend's own words carry what follows the packet (the
	// pipeline iteration).
	if rest, ok := strings.CutPrefix(b.Waiting, p.String()); ok {
		text += rest
	}
	return text
}

// half is the byte offset of the second half of a double-buffered
// scratch that packet wait p waits in, or 0: launches alternate halves,
// and an even flag waits in the second (docs/semantics.md §1.11).
func half(inst *executor.Instance, p executor.PacketWait) uint64 {
	if inst.Plan != nil && inst.Plan.UseDoubleScratch && p.Want%2 == 0 && p.Offset >= inst.ScratchBytes/2 {
		return inst.ScratchBytes / 2
	}
	return 0
}

// dataSlot is the scratch source operand of op that holds the packet of
// p (as data: a packet region is twice its payload,
// docs/semantics.md §3.3); failing that, op's first scratch source.
func dataSlot(inst *executor.Instance, op *executor.OpInstance, p executor.PacketWait) (executor.Region, bool) {
	if p.Buffer != plan.Scratch {
		return executor.Region{}, false
	}
	data := (p.Offset - half(inst, p)) / 2
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
		return executor.Region{}, false
	}
	return *want, true
}

// packetSpan is the packet bytes of the operand of op that holds the
// packet of p.
func packetSpan(inst *executor.Instance, op *executor.OpInstance, p executor.PacketWait) (executor.Region, bool) {
	d, ok := dataSlot(inst, op, p)
	if !ok || 2*d.Offset+half(inst, p) > p.Offset || p.Offset >= 2*(d.Offset+d.Size)+half(inst, p) {
		return executor.Region{}, false
	}
	d.Offset = 2*d.Offset + half(inst, p)
	d.Size *= 2
	return d, true
}

// slotText is "slot 2" (or "slots 2-3") of a scratch region, in chunks of
// the instance, or "scratch[a:b]" when its chunks have no size.
func slotText(inst *executor.Instance, r executor.Region) string {
	switch {
	case inst.ChunkBytes == 0:
		return fmt.Sprintf("scratch[%d:%d]", r.Offset, r.Offset+r.Size)
	case r.Size > inst.ChunkBytes:
		return fmt.Sprintf("slots %d-%d", r.Offset/inst.ChunkBytes, (r.Offset+r.Size-1)/inst.ChunkBytes)
	}
	return fmt.Sprintf("slot %d", r.Offset/inst.ChunkBytes)
}
