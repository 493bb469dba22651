package executor

import (
	"fmt"

	"github.com/mscclgo/mscclgo/plan"
)

// reuse.go is the static check of the launch-boundary rule
// (docs/executor.md §5.3): a buffer must not be accessed in the next
// launch before every other rank's conflicting access to it in this
// launch is ordered before that access (a peer's put into a slot the
// rank has not read yet, a rank's write into its own buffer that a peer,
// or its own proxy, is still reading). CheckReuse finds the accesses
// that nothing orders so, from the plan alone; the CPU backend's race
// detector finds the same races when it runs them
// (executor/cpu's TestReuseDifferential compares the two).

// Reuse is an access of a later launch that may come before another
// rank's conflicting access of an earlier launch to the same bytes
// (one of the two writes).
type Reuse struct {
	// Later is the op of the later launch (by rank LaterRank, thread
	// block LaterTB), Earlier the op of the earlier launch, by another
	// rank or by the proxy of the same one (EarlierProxy).
	Later, Earlier             *OpInstance
	LaterRank, LaterTB         int
	EarlierRank, EarlierTB     int
	LaterWrites, EarlierWrites bool
	// EarlierProxy says that the earlier access is the rank's proxy's,
	// a port channel's transfer, which the thread block does not wait
	// for unless it flushes.
	EarlierProxy bool
	// Apart is how many launches apart the two are: 1, or 2 for the
	// shifted accesses of a double-buffered scratch, whose next launch
	// uses the other half.
	Apart int
	// Region is the memory both touch, in bytes of the buffer (an LL
	// packet operand of n data bytes at offset o takes [2o, 2o+2n)).
	Region Region
}

func (r Reuse) String() string {
	verb := func(w bool) string {
		if w {
			return "writes"
		}
		return "reads"
	}
	noun := "read"
	if r.LaterWrites {
		noun = "write"
	}
	when := "in the next launch"
	if r.Apart == 2 {
		when = "two launches later (scratch is double-buffered: the next launch uses the other half)"
	}
	who, fix := fmt.Sprintf("rank %d's", r.EarlierRank), "add a handshake"
	if r.EarlierProxy {
		who, fix = fmt.Sprintf("rank %d's proxy's", r.EarlierRank), "flush the transfer, or add a handshake"
	}
	return fmt.Sprintf("%s %s rank %d %s[%d:%d] in every launch, which %s %s: no signal and wait orders %s access before rank %d's %s %s (a race across the launch boundary; %s, docs/executor.md §5.3)",
		opAtText(r.Later, r.LaterRank, r.LaterTB, r.LaterRank != r.Region.Rank), verb(r.LaterWrites), r.Region.Rank, r.Region.Buffer.Name(), r.Region.Offset, r.Region.Offset+r.Region.Size,
		opAtText(r.Earlier, r.EarlierRank, r.EarlierTB, r.EarlierRank != r.Region.Rank), verb(r.EarlierWrites), who, r.LaterRank, noun, when, fix)
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

// reuseNode is an op of the graph of one launch, or the work of a port
// channel's op that the rank's proxy does for it (proxy).
type reuseNode struct {
	rank, tb int
	op       *OpInstance
	proxy    bool
	next     []int
	prev     []int
}

// CheckReuse returns the accesses of inst that a later launch may make
// before another rank's conflicting access (one of the two writes) of
// an earlier launch to the same bytes is done: the earlier access
// reaches, through the plan's synchronisation, no op of a rank that
// reaches the later one (either in the earlier launch, or in a launch
// of its own before the later access). Both launches are the next one
// apart, or two for the accesses that see one half of a double-buffered
// scratch (packet accesses and local ones), which alternate halves.
// A port channel's put, signal and transfer are the proxy's work, in
// push order after the thread block's push; the thread block waits for
// it at a flush (pwsf's included), and the proxy's accesses may still be
// under way when the rank's next launch starts (the proxy's own work of
// the next launch follows it: one FIFO).
// Edges: program order, signals (and puts with signal) to the waits of
// the paired channel end, LL packet writes to the packet reads of the
// same bytes, semaphore releases to acquires, barriers; a rank's next
// launch follows all of its own. The k-th wait of a channel end takes
// its k-th signal when each side is on one thread block; otherwise every
// edge a channel could give is taken (a signal reaches every wait of its
// channel end), so the check may miss races there but warns of none the
// plan's synchronisation excludes, but for synchronisation it does not
// know: switch (NVLS) ops are not checked, nor pairs of a double-buffered
// scratch where one access sees a half and the other the whole (a port
// put's source, a remote non-packet access). One Reuse per pair of ops.
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
		node    int
		r       Region
		write   bool
		packet  bool
		shifted bool // sees the launch's half of a double-buffered scratch
	}
	var accesses []access
	// The actors, whose launches follow each other: rank r's thread
	// blocks are actor r, its proxy actor nr+r (it works through its
	// FIFO in push order, across launches too). starts[a] is the first
	// node of each thread block (of each one's proxy work).
	nr := len(inst.Ranks)
	actor := func(n *reuseNode) int {
		if n.proxy {
			return nr + n.rank
		}
		return n.rank
	}
	starts := make([][]int, 2*nr)
	// earlierProxy(r) stands for rank r's proxy's work of the launch
	// before: a flush waits for it too (the FIFO spans launches). It has
	// no accesses and nothing leads to it.
	earlier := make([]int, nr)
	for r := range earlier {
		earlier[r] = -1
	}
	earlierProxy := func(r int) int {
		if earlier[r] < 0 {
			earlier[r] = add(reuseNode{rank: inst.Ranks[r].Rank, tb: -1, proxy: true})
		}
		return earlier[r]
	}
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
			// lastProxy is the proxy's work for the thread block's
			// latest port op: the proxy does it in push order.
			lastProxy := -1
			var walk func(ops []OpInstance)
			walk = func(ops []OpInstance) {
				for i := range ops {
					op := &ops[i]
					n := add(reuseNode{rank: rk.Rank, tb: tb.ID, op: op})
					if last >= 0 {
						edge(last, n)
					}
					last = n
					// at is the node of the op's data accesses and of
					// its signal: on a port channel, the proxy's work,
					// after the push and after the proxy's earlier
					// work; a flush (pwsf's too) waits for that work.
					at := n
					if op.ChannelType == plan.Port {
						switch t := op.Type; {
						case t.Family() == plan.FamPut && !t.Packet(), t.Signals(): // handed to the proxy
							at = add(reuseNode{rank: rk.Rank, tb: tb.ID, op: op, proxy: true})
							edge(n, at)
							if lastProxy >= 0 {
								edge(lastProxy, at)
							}
							if lastProxy < 0 {
								starts[nr+ri] = append(starts[nr+ri], at)
							}
							lastProxy = at
							if op.Type == plan.OpPutWithSignalAndFlush {
								last = add(reuseNode{rank: rk.Rank, tb: tb.ID, op: op})
								edge(at, last)
								edge(earlierProxy(ri), last)
							}
						case t == plan.OpFlush:
							if lastProxy >= 0 {
								edge(lastProxy, n)
							}
							edge(earlierProxy(ri), n)
						}
					}
					switch t := op.Type; {
					case t.Signals():
						for _, c := range op.Channels {
							if ends := chans(op.ChannelType); c >= 0 && c < len(ends) && ends[c].PeerIndex >= 0 {
								k := chanKey{ends[c].Peer, op.ChannelType, ends[c].PeerIndex}
								signals[k] = append(signals[k], at)
							}
						}
					case t.Waits():
						for _, c := range op.Channels {
							k := chanKey{rk.Rank, op.ChannelType, c}
							waits[k] = append(waits[k], n)
						}
					case t == plan.OpSemRelease:
						for _, s := range op.Semaphores {
							releases[semKey{rk.Rank, s}] = append(releases[semKey{rk.Rank, s}], n)
						}
					case t == plan.OpSemAcquire:
						for _, s := range op.Semaphores {
							acquires[semKey{rk.Rank, s}] = append(acquires[semKey{rk.Rank, s}], n)
						}
					case t == plan.OpBarrier:
						k := semKey{rk.Rank, op.BarrierID}
						b, ok := barriers[k]
						if !ok {
							b = add(reuseNode{rank: rk.Rank, tb: -1})
							barriers[k] = b
						}
						edge(n, b)
						edge(b, n)
					}
					// Port transfers read their source through its
					// registration at the buffer's base, unshifted
					// (as Operands does).
					portSrc := op.Type.Family() == plan.FamPut && op.ChannelType == plan.Port
					for i, r := range op.Src {
						if r.Switch < 0 && r.Size > 0 {
							pk := op.Type.SrcPacket(i)
							accesses = append(accesses, access{at, r, false, pk, pk || r.Rank == rk.Rank && !portSrc})
						}
					}
					for i, r := range op.Dst {
						if r.Switch < 0 && r.Size > 0 {
							pk := op.Type.DstPacket(i)
							accesses = append(accesses, access{at, r, true, pk, pk || r.Rank == rk.Rank})
						}
					}
					walk(op.Body)
				}
			}
			first := len(nodes)
			walk(tb.Ops)
			if first < len(nodes) {
				starts[ri] = append(starts[ri], first)
			}
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
	// reach returns the actors of the nodes reachable from n along next
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
		actors := make([]bool, 2*nr)
		seen := make([]bool, len(nodes))
		stack := []int{n}
		seen[n] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if r := nodes[x].rank; r >= 0 && r < nr {
				actors[actor(&nodes[x])] = true
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
		memo[dir][n] = actors
		return actors
	}
	// whole[a] is the actors that actor a's launch reaches: a launch of
	// an actor that one of them starts after this launch of a began
	// follows all of it.
	whole := make([][]bool, 2*nr)
	for r := range whole {
		whole[r] = make([]bool, 2*nr)
		whole[r][r] = true
		for _, n := range starts[r] {
			for s, ok := range reach(n, false) {
				whole[r][s] = whole[r][s] || ok
			}
		}
	}
	// ordered says whether the access at node e is ordered before the
	// one at node l, apart launches later: a chain leads from e to an
	// actor (in e's launch), from that actor's next launch on to further
	// actors (one launch each), and from the last to l in l's launch.
	ordered := func(e, l, apart int) bool {
		from, to := reach(e, false), reach(l, true)
		for r, ok := range from {
			if !ok {
				continue
			}
			if to[r] {
				return true
			}
			if apart == 2 {
				for s, ok := range whole[r] {
					if ok && to[s] {
						return true
					}
				}
			}
		}
		return false
	}
	// bytes is the part of its buffer an access touches: LL packets take
	// twice their data's bytes, at twice its offset (packetOffset).
	bytes := func(a access) (lo, hi uint64) {
		if a.packet {
			return packetOffset(a.r.Offset), packetOffset(a.r.Offset + a.r.Size)
		}
		return a.r.Offset, a.r.Offset + a.r.Size
	}
	double := inst.Plan != nil && inst.Plan.UseDoubleScratch
	var out []Reuse
	seen := map[[2]string]bool{}
	for _, l := range accesses {
		ln := &nodes[l.node]
		for _, e := range accesses {
			en := &nodes[e.node]
			// A rank's launches follow each other, and so does its
			// proxy's work; the proxy may still be at a launch's
			// transfers when the rank's next launch starts.
			if actor(en) == actor(ln) || !l.write && !e.write || l.r.Rank != e.r.Rank || l.r.Buffer != e.r.Buffer {
				continue
			}
			llo, lhi := bytes(l)
			elo, ehi := bytes(e)
			if llo >= ehi || elo >= lhi {
				continue
			}
			apart := 1
			if double && l.r.Buffer == plan.Scratch {
				if l.shifted != e.shifted {
					// One sees a half, the other the whole scratch:
					// not modelled.
					continue
				}
				if l.shifted {
					apart = 2
				}
			}
			if ordered(e.node, l.node, apart) {
				continue
			}
			key := [2]string{opKey(ln, ln.rank != l.r.Rank), opKey(en, en.rank != e.r.Rank)}
			if seen[key] {
				continue
			}
			seen[key] = true
			lo, hi := max(llo, elo), min(lhi, ehi)
			out = append(out, Reuse{Later: ln.op, LaterRank: ln.rank, LaterTB: ln.tb, Earlier: en.op, EarlierRank: en.rank, EarlierTB: en.tb,
				LaterWrites: l.write, EarlierWrites: e.write, EarlierProxy: en.proxy, Apart: apart,
				Region: Region{Rank: l.r.Rank, Buffer: l.r.Buffer, Offset: lo, Size: hi - lo, Switch: -1}})
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
