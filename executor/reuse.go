package executor

import (
	"fmt"

	"github.com/mscclgo/mscclgo/plan"
)

// reuse.go is the static check of the launch-boundary rule
// (docs/executor.md §5.3): a buffer a peer writes must not be written
// again in the next launch before every other rank's access to it in
// this launch is ordered before that write. CheckReuse finds the writes
// that nothing orders so, from the plan alone; the CPU backend's race
// detector finds the same races when it runs them.

// Reuse is a remote write that the next launch may make before another
// rank's access of this launch to the same bytes.
type Reuse struct {
	// Write is the remote write (by rank WriteRank, thread block
	// WriteTB), Access the other rank's access to the bytes it writes.
	Write, Access        *OpInstance
	WriteRank, WriteTB   int
	AccessRank, AccessTB int
	AccessWrites         bool
	Region               Region // the bytes both touch
}

func (r Reuse) String() string {
	kind := "reads"
	if r.AccessWrites {
		kind = "writes"
	}
	return fmt.Sprintf("%s writes rank %d %s[%d:%d] in every launch, which %s %s: no signal and wait orders rank %d's access before rank %d's write in the next launch (a race across the launch boundary; add a handshake, docs/executor.md §5.3)",
		opAtText(r.Write, r.WriteRank, r.WriteTB, true), r.Region.Rank, r.Region.Buffer.Name(), r.Region.Offset, r.Region.Offset+r.Region.Size,
		opAtText(r.Access, r.AccessRank, r.AccessTB, r.AccessRank != r.Region.Rank), kind, r.AccessRank, r.WriteRank)
}

// opAtText is "the put at x.star:12:20 (rank 0 tb 0)" or "the put of
// rank 0 tb 0 op 3"; of a fused op, the line of the sending part (the
// last) for a remote access, of the reading part (the first) else.
func opAtText(op *OpInstance, rank, tb int, remote bool) string {
	if n := len(op.Source); n > 0 {
		line := op.Source[0]
		if remote {
			line = op.Source[n-1]
		}
		return fmt.Sprintf("the %s at %s (rank %d tb %d)", op.Type, line, rank, tb)
	}
	return fmt.Sprintf("the %s of rank %d tb %d %s", op.Type, rank, tb, op.Path)
}

// reuseNode is an op of the graph of one launch.
type reuseNode struct {
	rank, tb int
	op       *OpInstance
	next     []int
	prev     []int
}

// CheckReuse returns the remote writes of inst that the next launch may
// make before another rank's access of this launch to the same bytes is
// done: the access reaches, through the plan's synchronisation, no op of
// a rank that reaches the write (either in this launch, before its end,
// or in the next one, before the write). Edges: program order, signals
// (and puts with signal) to the waits of the paired channel end, LL
// packet writes to the packet reads of the same bytes, semaphore
// releases to acquires, barriers; a rank's next launch follows all of
// its own. The k-th wait of a channel end takes its k-th signal when
// each side is on one thread block; otherwise every edge a channel could
// give is taken (a signal reaches every wait of its channel end), so the
// check may miss races there but warns of none the plan's
// synchronisation excludes, but for
// synchronisation it does not know: switch (NVLS) ops, and packet writes
// into a double-buffered scratch, whose next launch writes the other
// half, are not checked. One Reuse per pair of ops.
func CheckReuse(inst *Instance) []Reuse {
	var nodes []reuseNode
	add := func(n reuseNode) int {
		nodes = append(nodes, n)
		return len(nodes) - 1
	}
	edge := func(a, b int) {
		nodes[a].next = append(nodes[a].next, b)
		nodes[b].prev = append(nodes[b].prev, a)
	}
	type chanKey struct {
		rank int
		ct   plan.ChannelType
		idx  int
	}
	signals, waits := map[chanKey][]int{}, map[chanKey][]int{}
	type semKey struct{ rank, id int }
	releases, acquires := map[semKey][]int{}, map[semKey][]int{}
	barriers := map[semKey]int{}
	type access struct {
		node   int
		r      Region
		write  bool
		packet bool
	}
	var accesses []access
	for ri := range inst.Ranks {
		rk := &inst.Ranks[ri]
		chans := func(ct plan.ChannelType) []ChannelEnd {
			if ct == plan.Port {
				return rk.PortChannels
			}
			return rk.MemoryChannels
		}
		for ti := range rk.TBs {
			tb := &rk.TBs[ti]
			last := -1
			var walk func(ops []OpInstance)
			walk = func(ops []OpInstance) {
				for i := range ops {
					op := &ops[i]
					n := add(reuseNode{rank: rk.Rank, tb: tb.ID, op: op})
					if last >= 0 {
						edge(last, n)
					}
					last = n
					switch op.Type {
					case plan.OpSignal, plan.OpRelaxedSignal, plan.OpPutWithSignal, plan.OpPutWithSignalAndFlush:
						for _, c := range op.Channels {
							if ends := chans(op.ChannelType); c >= 0 && c < len(ends) && ends[c].PeerIndex >= 0 {
								k := chanKey{ends[c].Peer, op.ChannelType, ends[c].PeerIndex}
								signals[k] = append(signals[k], n)
							}
						}
					case plan.OpWait, plan.OpRelaxedWait:
						for _, c := range op.Channels {
							k := chanKey{rk.Rank, op.ChannelType, c}
							waits[k] = append(waits[k], n)
						}
					case plan.OpSemRelease:
						for _, s := range op.Semaphores {
							releases[semKey{rk.Rank, s}] = append(releases[semKey{rk.Rank, s}], n)
						}
					case plan.OpSemAcquire:
						for _, s := range op.Semaphores {
							acquires[semKey{rk.Rank, s}] = append(acquires[semKey{rk.Rank, s}], n)
						}
					case plan.OpBarrier:
						k := semKey{rk.Rank, op.BarrierID}
						b, ok := barriers[k]
						if !ok {
							b = add(reuseNode{rank: rk.Rank, tb: -1})
							barriers[k] = b
						}
						edge(n, b)
						edge(b, n)
					}
					for i, r := range op.Src {
						if r.Switch < 0 && r.Size > 0 {
							accesses = append(accesses, access{n, r, false, op.Type.SrcPacket(i)})
						}
					}
					for i, r := range op.Dst {
						if r.Switch < 0 && r.Size > 0 {
							accesses = append(accesses, access{n, r, true, op.Type.DstPacket(i)})
						}
					}
					walk(op.Body)
				}
			}
			walk(tb.Ops)
		}
	}
	oneTB := func(ns []int) bool {
		for _, n := range ns {
			if nodes[n].tb != nodes[ns[0]].tb {
				return false
			}
		}
		return true
	}
	for k, ss := range signals {
		ws := waits[k]
		if oneTB(ss) && oneTB(ws) {
			// The k-th wait takes the k-th signal.
			for i := range min(len(ss), len(ws)) {
				edge(ss[i], ws[i])
			}
			continue
		}
		for _, s := range ss {
			for _, w := range ws {
				edge(s, w)
			}
		}
	}
	for k, rs := range releases {
		for _, r := range rs {
			for _, a := range acquires[k] {
				edge(r, a)
			}
		}
	}
	overlap := func(a, b Region) bool {
		return a.Rank == b.Rank && a.Buffer == b.Buffer && a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size
	}
	// LL packets: a packet write reaches the packet reads of its bytes.
	for _, w := range accesses {
		if !w.write || !w.packet {
			continue
		}
		for _, r := range accesses {
			if !r.write && r.packet && r.node != w.node && overlap(w.r, r.r) {
				edge(w.node, r.node)
			}
		}
	}
	// reach returns the ranks of the nodes reachable from n along next
	// (or prev), memoised.
	memo := [2]map[int][]bool{{}, {}}
	reach := func(n int, back bool) []bool {
		dir := 0
		if back {
			dir = 1
		}
		if got, ok := memo[dir][n]; ok {
			return got
		}
		ranks := make([]bool, len(inst.Ranks))
		seen := make([]bool, len(nodes))
		stack := []int{n}
		seen[n] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if r := nodes[x].rank; r >= 0 && r < len(ranks) {
				ranks[r] = true
			}
			succ := nodes[x].next
			if back {
				succ = nodes[x].prev
			}
			for _, y := range succ {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		memo[dir][n] = ranks
		return ranks
	}
	double := inst.Plan != nil && inst.Plan.UseDoubleScratch
	var out []Reuse
	seen := map[[2]string]bool{}
	for _, w := range accesses {
		wn := &nodes[w.node]
		if !w.write || w.r.Rank == wn.rank || double && w.packet && w.r.Buffer == plan.Scratch {
			continue
		}
		for _, a := range accesses {
			an := &nodes[a.node]
			if an.rank == wn.rank || !overlap(w.r, a.r) {
				continue
			}
			from, to := reach(a.node, false), reach(w.node, true)
			ordered := false
			for r := range from {
				ordered = ordered || from[r] && to[r]
			}
			if ordered {
				continue
			}
			key := [2]string{opKey(wn, true), opKey(an, an.rank != a.r.Rank)}
			if seen[key] {
				continue
			}
			seen[key] = true
			lo, hi := max(w.r.Offset, a.r.Offset), min(w.r.Offset+w.r.Size, a.r.Offset+a.r.Size)
			out = append(out, Reuse{Write: wn.op, WriteRank: wn.rank, WriteTB: wn.tb, Access: an.op, AccessRank: an.rank, AccessTB: an.tb,
				AccessWrites: a.write, Region: Region{Rank: w.r.Rank, Buffer: w.r.Buffer, Offset: lo, Size: hi - lo, Switch: -1}})
		}
	}
	return out
}

// opKey identifies an op for CheckReuse's one report per pair: the .star
// line its report names (see opAtText), or its place.
func opKey(n *reuseNode, remote bool) string {
	if k := len(n.op.Source); k > 0 {
		if remote {
			return n.op.Source[k-1]
		}
		return n.op.Source[0]
	}
	return fmt.Sprintf("%d/%d/%s", n.rank, n.tb, n.op.Path)
}
