package diagnose

import (
	"fmt"
	"slices"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// GuardingWait returns the wait that op (run by thread block tb of rank)
// comes before but should come after: the first later wait of its thread
// block on a channel from a rank other than rank that writes, by the
// plan's operands, into rank's region read (the peer's write the wait
// would have ordered before the read), when no signal, barrier or
// semaphore release lies between the two (a wait after the op's own
// signal guards the next step, not this one). It returns false when
// there is none.
func GuardingWait(inst *executor.Instance, rank, tb int, op *executor.OpInstance, read executor.Region) (Cause, bool) {
	if inst == nil || op == nil || rank < 0 || rank >= len(inst.Ranks) || read.Rank != rank {
		return Cause{}, false
	}
	for _, peer := range writersInto(inst, read) {
		if w, ok := nextWait(inst, rank, tb, op, peer); ok {
			ref := OpRef{Rank: rank, TB: tb, Op: op}
			return Cause{Kind: ReadBeforeWait, Op: ref, Other: w, Peer: peer, Place: read, Count: 1,
				Key: "late " + ref.Name() + " " + w.Name(),
				Text: fmt.Sprintf("%s reads %s[%d:%d] of rank %d before its guarding wait: %s, which comes after it, orders it after rank %d's write there (%s)",
					ref.Name(), read.Buffer.Name(), read.Offset, read.Offset+read.Size, rank, w.Name(), peer, ref.Where())}, true
		}
	}
	return Cause{}, false
}

// nextWait is the first wait after op in thread block tb of rank on a
// channel from peer, when no signal, barrier or semaphore release lies
// between them.
func nextWait(inst *executor.Instance, rank, tb int, op0 *executor.OpInstance, peer int) (OpRef, bool) {
	ri := &inst.Ranks[rank]
	var ops []*executor.OpInstance
	for i := range ri.TBs {
		if ri.TBs[i].ID == tb {
			eachOp(ri.TBs[i].Ops, 1, func(op *executor.OpInstance, _ int) { ops = append(ops, op) })
		}
	}
	at := slices.Index(ops, op0)
	if at < 0 {
		return OpRef{}, false
	}
	fromPeer := func(op *executor.OpInstance) bool {
		ends := channels(ri, op.ChannelType)
		for _, c := range op.Channels {
			if c >= 0 && c < len(ends) && ends[c].Peer == peer {
				return true
			}
		}
		return false
	}
	for _, op := range ops[at+1:] {
		switch {
		case op.Type.Waits():
			if fromPeer(op) {
				return OpRef{Rank: rank, TB: tb, Op: op}, true
			}
		case op.Type.Signals(), op.Type == plan.OpBarrier, op.Type == plan.OpSemRelease:
			return OpRef{}, false
		}
	}
	return OpRef{}, false
}

// writersInto is the ranks other than the region's own with an op that
// writes into it (by the plan's operands), in rank order.
func writersInto(inst *executor.Instance, r executor.Region) []int {
	var ws []int
	for i := range inst.Ranks {
		ri := &inst.Ranks[i]
		if ri.Rank == r.Rank {
			continue
		}
		found := false
		for j := range ri.TBs {
			eachOp(ri.TBs[j].Ops, 1, func(op *executor.OpInstance, _ int) {
				for _, d := range op.Dst {
					if d.Rank == r.Rank && d.Buffer == r.Buffer && overlaps(d, r) {
						found = true
					}
				}
			})
		}
		if found {
			ws = append(ws, ri.Rank)
		}
	}
	return ws
}
