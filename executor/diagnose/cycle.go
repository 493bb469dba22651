package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// maxCycleShown bounds the waits a circular wait's text names.
const maxCycleShown = 4

// link is a blocked wait and the signal it needs, sent by a thread block
// that is itself blocked before it (next, an index into the blocked).
type link struct {
	signal OpRef
	next   int
}

// cycleCauses names the circular waits among the blocked thread blocks:
// a wait that needs a signal which the peer sends only from a thread
// block blocked before that signal, in a wait of its own, and so on back
// to the first.
func cycleCauses(inst *executor.Instance, blocked []Blocked) []Cause {
	links := make([]*link, len(blocked))
	for i, b := range blocked {
		links[i] = needs(inst, blocked, b)
	}
	var cs []Cause
	seen := map[int]bool{}
	for start := range blocked {
		if seen[start] || links[start] == nil {
			continue
		}
		// Follow the links from start; a return to a visited wait of
		// this walk closes a cycle.
		var path []int
		at := map[int]int{}
		i := start
		for links[i] != nil && !seen[i] {
			if _, ok := at[i]; ok {
				break
			}
			at[i] = len(path)
			path = append(path, i)
			i = links[i].next
		}
		for _, j := range path {
			seen[j] = true
		}
		k, ok := at[i]
		if !ok || links[i] == nil {
			continue
		}
		cs = append(cs, cycleCause(blocked, links, path[k:]))
	}
	return cs
}

// cycleCause describes the cycle of blocked waits cyc.
func cycleCause(blocked []Blocked, links []*link, cyc []int) Cause {
	// Start at the lowest rank and thread block, whatever order the
	// backend listed them in.
	lo := 0
	for n, j := range cyc {
		if b, m := blocked[j], blocked[cyc[lo]]; b.Rank < m.Rank || b.Rank == m.Rank && b.TB < m.TB {
			lo = n
		}
	}
	cyc = append(slices.Clone(cyc[lo:]), cyc[:lo]...)
	keys := make([]string, len(cyc))
	for n, j := range cyc {
		keys[n] = blocked[j].Op.Where()
	}
	slices.Sort(keys)
	first := blocked[cyc[0]]
	key := "cycle " + strings.Join(keys, ",")
	c := Cause{Kind: CircularWait, Op: first.Op, Other: links[cyc[0]].signal, Peer: links[cyc[0]].signal.Rank, Count: uint64(len(cyc)), Key: key}
	// One wait and one signal line for every member (a loop of the
	// program): say it once.
	same := first.Op.Line() != "" && links[cyc[0]].signal.Line() != ""
	ranks := make([]string, len(cyc))
	for n, j := range cyc {
		same = same && blocked[j].Op.Line() == first.Op.Line() && links[j].signal.Line() == c.Other.Line()
		ranks[n] = fmt.Sprintf("%d tb %d", blocked[j].Rank, blocked[j].TB)
	}
	if same {
		c.Text = fmt.Sprintf("a circular wait of %d thread blocks (rank %s): each blocks in %s, which needs %s of the next, sent only after that one's own wait (each waits before it signals)",
			len(cyc), strings.Join(ranks, ", rank "), first.Op.Name(), c.Other.Name())
		return c
	}
	var text strings.Builder
	text.WriteString("a circular wait: ")
	for n, j := range cyc {
		if n == maxCycleShown {
			fmt.Fprintf(&text, ", which comes after %d more such wait(s), the last needing a signal that", len(cyc)-n)
			break
		}
		b, l := blocked[j], links[j]
		if n > 0 {
			text.WriteString(", which comes after ")
		}
		fmt.Fprintf(&text, "%s%s, which needs %s%s", b.Op.Name(), where(b.Op), l.signal.Name(), where(l.signal))
	}
	text.WriteString(", which comes after the first wait (each thread block waits before it signals)")
	c.Text = text.String()
	return c
}

// needs is the signal blocked wait b needs on its first channel, when
// the thread block of the peer that sends it is blocked before it, or
// nil.
func needs(inst *executor.Instance, blocked []Blocked, b Blocked) *link {
	op := b.Op.Op
	if op == nil || !op.Type.Waits() || len(op.Channels) == 0 || b.Rank < 0 || b.Rank >= len(inst.Ranks) {
		return nil
	}
	ends := channels(&inst.Ranks[b.Rank], op.ChannelType)
	ci := op.Channels[0]
	if ci < 0 || ci >= len(ends) || ends[ci].PeerIndex < 0 {
		return nil
	}
	peer, pi := ends[ci].Peer, ends[ci].PeerIndex
	for j, o := range blocked {
		if o.Rank != peer || o.Op.Op == nil {
			continue
		}
		if s, ok := signalAfter(inst, o, op.ChannelType, pi); ok {
			return &link{signal: s, next: j}
		}
	}
	return nil
}

// signalAfter is the first op after the one blocked thread block b is
// blocked in that signals its channel ci of type ct.
func signalAfter(inst *executor.Instance, b Blocked, ct plan.ChannelType, ci int) (OpRef, bool) {
	ri := &inst.Ranks[b.Rank]
	for t := range ri.TBs {
		if ri.TBs[t].ID != b.TB {
			continue
		}
		after := false
		var found *executor.OpInstance
		eachOp(ri.TBs[t].Ops, 1, func(o *executor.OpInstance, _ int) {
			switch {
			case found != nil:
			case o == b.Op.Op:
				after = true
			case after && o.ChannelType == ct && o.Type.Signals() && slices.Contains(o.Channels, ci):
				found = o
			}
		})
		if found != nil {
			return OpRef{Rank: b.Rank, TB: b.TB, Op: found}, true
		}
	}
	return OpRef{}, false
}
