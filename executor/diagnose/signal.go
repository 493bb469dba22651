package diagnose

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// channelUse counts, over every thread block of rank ri, the ops that
// use channel ci of type ct for which is holds, each as often as it runs
// per launch, and returns the last of them.
func channelUse(ri *executor.RankInstance, ct plan.ChannelType, ci int, is func(plan.OpType) bool) (n int, last OpRef) {
	for _, tb := range ri.TBs {
		eachOp(tb.Ops, 1, func(o *executor.OpInstance, times int) {
			if o.ChannelType != ct || !is(o.Type) {
				return
			}
			for _, c := range o.Channels {
				if c == ci {
					n += times
					last = OpRef{Rank: ri.Rank, TB: tb.ID, Op: o}
				}
			}
		})
	}
	return n, last
}

// signalCauses names, for a thread block blocked in a wait, each channel
// of the wait whose peer cannot ever signal it often enough: a channel
// the peer declares no pair for, or one that the peer signals fewer times
// per launch than the rank waits on it. It returns nil when the counts
// match (the peer is itself held up before its signal: another blocked
// thread block names why).
func signalCauses(inst *executor.Instance, b Blocked) []Cause {
	op := b.Op.Op
	if !op.Type.Waits() || b.Rank < 0 || b.Rank >= len(inst.Ranks) {
		return nil
	}
	ri := &inst.Ranks[b.Rank]
	ends := channels(ri, op.ChannelType)
	var cs []Cause
	for _, ci := range op.Channels {
		if ci < 0 || ci >= len(ends) {
			continue
		}
		end := ends[ci]
		if end.PeerIndex < 0 {
			cs = append(cs, Cause{Kind: UnpairedChannel, Op: b.Op, Peer: end.Peer, Count: 1,
				Key: fmt.Sprintf("unpaired %d %s %d", b.Rank, op.ChannelType, ci),
				Text: fmt.Sprintf("%s waits on %s channel %d from rank %d%s, which declares no channel paired with it, so no signal arrives",
					b.Op.Name(), op.ChannelType, ci, end.Peer, where(b.Op))})
			continue
		}
		if end.Peer < 0 || end.Peer >= len(inst.Ranks) {
			continue
		}
		nWait, _ := channelUse(ri, op.ChannelType, ci, plan.OpType.Waits)
		nSig, last := channelUse(&inst.Ranks[end.Peer], op.ChannelType, end.PeerIndex, plan.OpType.Signals)
		if nSig >= nWait {
			continue
		}
		text := fmt.Sprintf("%s waits on %s channel %d from rank %d%s, which rank %d ", b.Op.Name(), op.ChannelType, ci, end.Peer, where(b.Op), end.Peer)
		if nSig == 0 {
			text += fmt.Sprintf("never signals (rank %d waits on it %d time(s) per launch)", b.Rank, nWait)
		} else {
			text += fmt.Sprintf("signals %d time(s) per launch, last by %s%s, where rank %d waits on it %d time(s)", nSig, last.Name(), where(last), b.Rank, nWait)
		}
		text += surplus(inst, b.Rank, end.Peer, op.ChannelType)
		cs = append(cs, Cause{Kind: MissingSignal, Op: b.Op, Other: last, Peer: end.Peer, Waits: nWait, Signals: nSig, Count: 1,
			Key:  fmt.Sprintf("signals %d %s %d", b.Rank, op.ChannelType, ci),
			Text: text})
	}
	return cs
}

// where is " (rank 1 tb 0 op 3)" for an op named by its .star lines, and
// "" for one that Name already places.
func where(r OpRef) string {
	if r.Line() == "" {
		return ""
	}
	return " (" + r.Where() + ")"
}

// surplus is "; rank 1's signals arrive on rank 0's memory channel(s) 0,
// 1, which it waits on less often (a wait on the wrong channel)" when
// peer signals some channels of type ct to rank more often per launch
// than rank waits on them (the counts per direction match, the channels
// do not), else "".
func surplus(inst *executor.Instance, rank, peer int, ct plan.ChannelType) string {
	ri, pi := &inst.Ranks[rank], &inst.Ranks[peer]
	var extra []string
	for c, end := range channels(ri, ct) {
		if end.Peer != peer || end.PeerIndex < 0 {
			continue
		}
		nWait, _ := channelUse(ri, ct, c, plan.OpType.Waits)
		if nSig, _ := channelUse(pi, ct, end.PeerIndex, plan.OpType.Signals); nSig > nWait {
			extra = append(extra, strconv.Itoa(c))
		}
	}
	if len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("; rank %d's signals arrive on rank %d's %s channel(s) %s, which it waits on less often (a wait on the wrong channel)",
		peer, rank, ct, strings.Join(extra, ", "))
}
