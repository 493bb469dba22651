// This file holds the hierarchical synthesis of a machine of several
// nodes (topo.Replicate): trees packed within one node, a ring over every
// rail between the nodes, the two composed into one program.

package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/topo"
)

// hierLarge is the world size above which fewer candidates are
// modelled (more than two nodes of 8).
const hierLarge = 16

// hierPipelined is the world size above which no pipelined candidate
// is modelled (on 256 ranks one costs minutes of model time and loses).
const hierPipelined = 64

// hierRunOne is the world size above which the CPU backend runs each
// variant with one instance (its race detector's clocks grow with the
// thread blocks of the machine: on 4 x 8 with 16 instances, 4096 thread
// blocks, the runs doubled the synthesis time).
const hierRunOne = 16

// hierGroup bounds the nodes' shards one thread block handles (the
// executor's 64 ops per thread block, 4 of them kept for the handshake
// and the flushes): ops per shard and chunk of each collective, counted
// on the busiest rank (a tree's root on the rail: waits, puts, signals
// and the nops between them; 54 ops for 8 shards of allgather), and the
// pipeline op of each shard's partial sums (up).
func hierGroup(c Collective, nodes, chunks int) int {
	per := map[Collective]int{AllGather: 7, ReduceScatter: 8, AllReduce: 14}[c] * chunks
	if c != AllGather {
		per++
	}
	return max(1, min(nodes, 60/per))
}

// nodeTrees returns the trees within one node that the composed
// program runs fastest on tp's links: the star (every rank a child of
// the root: on a switch, one hop), or the packed trees of 1, 2 or 4
// chunks per shard (one tree per shard on the smaller counts).
func nodeTrees(tp *topo.Topology, reduce bool, rounds int) *Packing {
	var best *Packing
	bestRate := 0.0
	try := func(pk *Packing) {
		if pk == nil {
			return
		}
		if r, _ := hierRate(tp, pk); r > bestRate*(1+1e-9) {
			best, bestRate = pk, r
		}
	}
	try(Star(tp.Base, reduce))
	try(Pack(tp.Base, reduce, 1, 1, rounds))
	try(Pack(tp.Base, reduce, 2, 2, rounds))
	return best
}

// hierRate returns the shard rate (GB/s per shard) the composed trees
// sustain on tp's links, and the busiest link: every node's trees carry
// the shards of all nodes, every rail ring edge those of all nodes but
// one.
func hierRate(tp *topo.Topology, pk *Packing) (float64, int) {
	n, g := tp.Nodes, tp.GPUsPerNode
	load := map[int]float64{}
	addRoute := func(a, b int, w float64) {
		if pk.Reduce {
			a, b = b, a
		}
		for _, li := range tp.Route(a, b) {
			load[li] += w
		}
	}
	for l, ts := range pk.Trees {
		for _, t := range ts {
			w := float64(t.Chunks) / float64(pk.Chunks)
			for k := 0; k < n; k++ {
				for v, p := range t.Parent {
					if p >= 0 {
						addRoute(k*g+p, k*g+v, w*float64(n))
					}
				}
			}
		}
		for k := 0; k < n; k++ {
			// Ring edge k -> k+1 of rail l (a reduction's data flows the
			// same way: addRoute's swap is undone).
			a, b := k*g+l, ((k+1)%n)*g+l
			if pk.Reduce {
				a, b = b, a
			}
			addRoute(a, b, float64(n-1))
		}
	}
	worst, at := 0.0, -1
	for li, w := range load {
		if c := w / tp.Links[li].GBps; c > worst || (c == worst && li < at) {
			worst, at = c, li
		}
	}
	if worst == 0 {
		return math.Inf(1), -1
	}
	return 1 / worst, at
}

// synthesizeHier is synthesize for several nodes: the trees of one node
// (nodeTrees) on every node, joined by a ring over every rail.
func synthesizeHier(ctx context.Context, o Options, start time.Time, name string, nodes []int) (*Result, error) {
	tp := o.Topology
	n, g, nn := tp.NumGPUs(), tp.GPUsPerNode, tp.Nodes
	hw, err := ModelProfile(tp.HW)
	if err != nil {
		return nil, err
	}
	mopts := model.Options{Network: Network(tp), NoTimeline: true}
	reduce := o.Collective != AllGather
	pk := nodeTrees(tp, reduce, o.Rounds)
	rate, busiest := hierRate(tp, pk)
	_, boundBW := BoundTime(o.Collective, tp, 1<<30)
	trees := 0
	for _, ts := range pk.Trees {
		trees += len(ts)
	}
	h := &hierProgram{coll: o.Collective, name: name, worldSize: n, ranksPerNode: g, nodes: nn, topoName: o.TopoName, pack: pk}
	// The group: the most shards a thread block's ops allow.
	group := hierGroup(o.Collective, nn, pk.Chunks)
	var first []Compiled // the program of one instance, whole chunks
	for {
		h.group = group
		h.variants = []Variant{{Suffix: "v", Min: 0, Max: ^uint64(0), Instances: 1}}
		var err error
		first, err = compileChecked(ctx, name+".star", h.star(), nil, true)
		var ce *CheckError
		if errors.As(err, &ce) && ce.opLimit() && group > 1 {
			group = (group + 1) / 2
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %d shards per thread block: %v", ErrSynth, group, err)
		}
		break
	}
	blocks := trees * ((nn + group - 1) / group)
	var jobs []key
	insts, units := o.Instances, o.Units
	if n > hierLarge {
		// Large machine: every candidate is modelled on all ranks, so
		// one instance (small sizes), and the most instances the thread
		// blocks allow, up to 16 (one thread block copies a few tens of
		// GB/s and a root's puts a shard to 7 peers: the node trees need
		// many; on 4 x 8 DGX H100, 16 instances reach 0.93-0.94 of the
		// bound at 256 MiB where 8 reach 0.87-0.90), with whole chunks
		// or in pieces of the largest unit a chunk of an instance at
		// the largest size (size/(ranks x chunks x instances) bytes)
		// holds at least 4 times (on 4 x 8, 64 KiB: 256 KiB, twice in
		// such a chunk, never won; a pipelined candidate is modelled
		// only at the sizes where it iterates: sweep). Above
		// hierPipelined ranks none: on 32 x 8 a pipelined allgather
		// (64 KiB pieces) took over 100 s to evaluate and model at
		// 256 MiB alone, for 0.22-0.53 of the bound against 0.63-0.78
		// with whole chunks.
		inst := 1
		for inst*2 <= min(16, o.MaxBlocks/blocks) {
			inst *= 2
		}
		jobs = append(jobs, key{0, 1, 0})
		if inst > 1 {
			jobs = append(jobs, key{0, inst, 0})
		}
		chunk := o.Sizes[len(o.Sizes)-1] / uint64(n*pk.Chunks*inst)
		for _, u := range slices.Backward(slices.Sorted(slices.Values(o.Units))) {
			if n <= hierPipelined && u > 0 && chunk >= 4*u {
				jobs = append(jobs, key{0, inst, u})
				break
			}
		}
	}
	for _, inst := range insts {
		if n > hierLarge {
			break
		}
		if inst > 1 && inst*blocks > o.MaxBlocks {
			continue
		}
		for _, unit := range units {
			jobs = append(jobs, key{0, inst, unit})
		}
	}
	if blocks > o.MaxBlocks || len(jobs) == 0 {
		return nil, fmt.Errorf("%s: %d thread blocks per rank, over the budget of %d", o.TopoName, blocks, o.MaxBlocks)
	}
	pts, err := modelCandidates(ctx, name, jobs, func(i int) []byte {
		hp := *h
		hp.variants = []Variant{{Suffix: "v", Min: 0, Max: ^uint64(0), Instances: jobs[i].inst, Unit: jobs[i].unit}}
		return hp.star()
	}, map[key]*plan.Plan{{0, 1, 0}: first[0].Plan}, o.Sizes, hw, mopts)
	if err != nil {
		return nil, err
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("%s: no program within the executor's limits of a thread block", o.TopoName)
	}
	variants, _ := chooseVariants(pts, o.Sizes, []*Packing{pk})
	h.variants = variants
	whole := &Packing{Reduce: pk.Reduce, Chunks: pk.Chunks, Trees: pk.Trees, Rate: rate, Busiest: busiest}
	res := &Result{Name: name, Variants: variants, Packing: whole, Packings: []*Packing{whole}, BoundAlgBW: boundBW, Verified: map[string][]uint64{}}
	for _, s := range o.Sizes {
		for _, v := range variants {
			if s < v.Min || s > v.Max {
				continue
			}
			for _, p := range pts[key{0, v.Instances, v.Unit}] {
				if p.Size == s {
					bt, _ := BoundTime(o.Collective, tp, float64(s))
					res.Points = append(res.Points, Point{Size: s, Variant: v.Suffix, TimeUS: p.Time, AlgBW: p.AlgBW, BusBW: p.BusBW, BoundUS: bt})
				}
			}
		}
	}
	h.header = hierHeader(o, res, tp, h)
	text := h.star()
	progs, err := compile(ctx, name+".star", text, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSynth, err)
	}
	if len(progs) != len(variants) {
		return nil, fmt.Errorf("%w: %d programs for %d variants", ErrSynth, len(progs), len(variants))
	}
	// The program each variant runs on the CPU backend, by its key: its
	// own, or on a large machine its program of one instance (the group
	// search's program where it runs whole chunks).
	runOf := map[key]*plan.Plan{}
	if n > hierRunOne {
		runOf[key{0, 1, 0}] = first[0].Plan
	}
	runKey := func(v Variant) key {
		k := key{v.Set, v.Instances, v.Unit}
		if n > hierRunOne {
			// The CPU backend's race detector keeps a vector clock of
			// every thread block of the machine: on a large machine each
			// variant runs with one instance (the instances are the
			// compiler's replication of these thread blocks; the written
			// program is checked and modelled with them).
			k.inst = 1
		}
		return k
	}
	var missing []Variant
	for i, v := range variants {
		if _, ok := runOf[runKey(v)]; !ok {
			if n <= hierRunOne {
				runOf[runKey(v)] = progs[i].Plan
				continue
			}
			one := v
			one.Instances = 1
			missing = append(missing, one)
		}
	}
	if len(missing) > 0 {
		one := *h
		one.variants = missing
		runs, err := compile(ctx, name+".star", one.star(), nil)
		if err != nil {
			return nil, fmt.Errorf("%w: one instance: %v", ErrSynth, err)
		}
		for i, v := range missing {
			runOf[runKey(v)] = runs[i].Plan
		}
	}
	ran := map[key][]uint64{}   // the sizes each program run has run at
	valid := map[int][]uint64{} // the sizes of the runs, by instances
	for i, p := range progs {
		v := variants[i]
		// Run at sizes up to VerifyBytes whatever the variant's range (a
		// variant of 64 MiB and up on 256 ranks would take GiBs on the
		// CPU backend): the program is the same at every size. Variants
		// whose runs are one program (of one instance on a large
		// machine, differing in their ranges only) run once.
		k := runKey(v)
		sizes, done := ran[k]
		if !done {
			open := *runOf[k]
			open.Name = p.Name
			open.MinMessageSize, open.MaxMessageSize = 0, ^uint64(0)
			// The open ranges of one instance count (the tables are
			// the same) share their valid sizes.
			if sizes = valid[k.inst]; sizes == nil {
				if sizes, err = checkSizes(&open, o.VerifyBytes, 3); err != nil {
					return nil, fmt.Errorf("%w: %v", ErrSynth, err)
				}
				valid[k.inst] = sizes
			}
			if err := runAt(ctx, &open, sizes); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrSynth, err)
			}
			ran[k] = sizes
		}
		res.Verified[p.Name] = sizes
		modelled := *p.Plan
		modelled.MinMessageSize, modelled.MaxMessageSize = 0, ^uint64(0)
		if _, _, err := model.Sweep(&modelled, sizes, executor.Float16, true, hw, mopts); err != nil {
			return nil, fmt.Errorf("%w: model %s: %v", ErrSynth, p.Name, err)
		}
	}
	res.Star, res.Programs = text, progs
	res.Elapsed = time.Since(start)
	return res, nil
}

// hierHeader is the comment at the top of a hierarchical program.
func hierHeader(o Options, res *Result, tp *topo.Topology, h *hierProgram) []string {
	n := tp.NumGPUs()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	add("%s: %s for %s (GPU profile %s), %d GPUs in %d nodes of %d", res.Name, o.Collective, o.TopoName, o.HWName, n, tp.Nodes, tp.GPUsPerNode)
	add("written by `%s` (docs/synthesis.md).", o.Command)
	add("")
	var m string
	switch o.Collective {
	case AllGather:
		m = "Method (hierarchical): the shard of the rank of local index l in node k goes around the ring of rail l (node k, k+1, ... over the ranks of local index l), and in every node down the node's broadcast tree of local root l."
	case ReduceScatter:
		m = "Method (hierarchical): the partial sums of the shard of the rank of local index l in node k go up the node's reduction tree of local root l in every node, and around the ring of rail l (from node k+1 to node k), every rank adding its node's sum to its predecessor's."
	default:
		m = "Method (hierarchical): the partial sums of the shard of the rank of local index l in node k go up the node's reduction tree of local root l in every node and around the ring of rail l to node k (a reduce-scatter); the sums then go around the ring from node k and down the node's trees (an allgather)."
	}
	for _, l := range wrap(m, 78) {
		add("%s", l)
	}
	for _, l := range wrap(fmt.Sprintf("A thread block handles the shards of one local root and one tree of %d nodes, in the order of the ring: a rank handles a shard after its predecessor on the ring has. The composed trees sustain %.3f GB/s per shard on the busiest link, %.1f%% of the cut bound's %.3f.",
		h.group, res.Packing.Rate, 100*res.Packing.Rate/boundRate(o.Collective, tp), boundRate(o.Collective, tp)), 78) {
		add("%s", l)
	}
	add("")
	add("Node trees, %d chunks per shard (local root: chunks, then the tree's edges parent>child):", h.pack.Chunks)
	for r, ts := range h.pack.Trees {
		for _, t := range ts {
			var e []string
			for v, p := range t.Parent {
				if p >= 0 {
					e = append(e, fmt.Sprintf("%d>%d", p, v))
				}
			}
			add("  %d: %d: %s", r, t.Chunks, strings.Join(e, " "))
		}
	}
	add("")
	add("Predicted on the topology (mscclgo model --topo %s --hw %s --nodes %d, float16, in place):", o.TopoName, o.HWName, tp.Nodes)
	add("  %12s %12s %10s %10s %12s %9s  %s", "size (B)", "time (us)", "algbw", "busbw", "bound (us)", "of bound", "variant")
	for _, p := range res.Points {
		add("  %12d %12.2f %10.2f %10.2f %12.2f %8.1f%%  %s", p.Size, p.TimeUS, p.AlgBW, p.BusBW, p.BoundUS, 100*p.BoundUS/p.TimeUS, p.Variant)
	}
	add("Cut lower bound: algbw %.2f GB/s (the links a set of GPUs exchanges data over, %s).", res.BoundAlgBW, boundCut(o.Collective, tp))
	add("")
	add("Each variant below was evaluated, checked, run on the CPU backend (results")
	add("compared, races and deadlocks looked for) and modelled before this file was")
	add("written.")
	return out
}

// hierProgram is what the writer of a hierarchical program needs.
type hierProgram struct {
	coll                           Collective
	name, topoName                 string
	header                         []string
	worldSize, ranksPerNode, nodes int
	group                          int
	pack                           *Packing
	variants                       []Variant
}

// star returns the hierarchical program's text.
func (h *hierProgram) star() []byte {
	var b strings.Builder
	for _, l := range h.header {
		if l == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# " + l + "\n")
	}
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\nNAME = %q\n", h.name)
	w("COLLECTIVE = %q\n", h.coll.String())
	w("WORLD_SIZE = %d\n", h.worldSize)
	w("RANKS_PER_NODE = %d\n", h.ranksPerNode)
	w("NODES = %d\n", h.nodes)
	w("TOPOLOGY = %q\n", h.topoName)
	w("\n# Every rank's shard is cut into CHUNKS chunks; a thread block handles the\n")
	w("# shards of at most GROUP nodes (of one local index and one node tree): group\n")
	w("# g of GROUPS holds the nodes k with k %% GROUPS == g.\n")
	w("CHUNKS = %d\n", h.pack.Chunks)
	w("GROUP = %d\n", h.group)
	w("GROUPS = (NODES + GROUP - 1) // GROUP\n")
	w("\n# NODE_TREES[l]: the trees, inside every node, of the shards of local index l,\n")
	w("# each (chunks it carries, the parent of every local index: -1 at l).\n")
	w("NODE_TREES = [\n")
	for l, ts := range h.pack.Trees {
		w("    [  # local root %d\n", l)
		for _, t := range ts {
			w("        (%d, %s),\n", t.Chunks, intList(t.Parent))
		}
		w("    ],\n")
	}
	w("]\n")
	w("\n# TREE_SETS: one set, (CHUNKS, NODE_TREES).\n")
	w("TREE_SETS = [(CHUNKS, NODE_TREES)]\n")
	w("\n# VARIANTS: one program per message-size range: (name suffix, smallest and\n")
	w("# largest message size in bytes, tree set, instances, pipeline unit in\n")
	w("# bytes; 0: none).\n")
	w("VARIANTS = [\n")
	for _, v := range h.variants {
		w("    (%q, %d, %s, %d, %d, %d),\n", v.Suffix, v.Min, sizeLiteral(v.Max), v.Set, v.Instances, v.Unit)
	}
	w("]\n")
	bufFn := "get_output_buffer"
	if h.coll != AllGather {
		bufFn = "get_input_buffer"
	}
	b.WriteString(helpersStar)
	w(hierTemplate, bufFn)
	b.WriteString(programText(h.coll))
	return []byte(b.String())
}

// hierTemplate is the data movement of a hierarchical program (after
// helpersStar, before programStar): %s is the buffer method.
const hierTemplate = `
def rank_of(node, local):
    return node * RANKS_PER_NODE + local

def buf(v):
    """The buffer the shards live in (in place: rank r's shard is chunks
    [r * CHUNKS, (r + 1) * CHUNKS))."""
    return Rank(v).%s()

def local_children(parent, v):
    """The local indices whose parent is v."""
    return [c for c in range(RANKS_PER_NODE) if parent[c] == v]

def in_group(k, group):
    """Whether node k's shard is one of group's: the nodes k with k %% GROUPS
    == group, spread around the ring, so that the shards a rank handles
    arrive one after another (with nodes next to each other in a group, a
    node far from the group would wait for its first shard as long as the
    group is far)."""
    return k %% GROUPS == group

def hop(node, k, upward):
    """How far node is along the ring of node k's shard: from k (0 at k) on
    the way down, from k + 1 on the way up (NODES - 1 at k)."""
    if upward:
        return (node - k - 1) %% NODES
    return (node - k) %% NODES

def in_order(node, group, upward):
    """The nodes of group whose shards node handles, in the order of their
    hop: every rank handles a shard after its predecessor on the ring."""
    if upward:
        ks = [(node - 1 - h) %% NODES for h in range(NODES)]
    else:
        ks = [(node - h) %% NODES for h in range(NODES)]
    return [k for k in ks if in_group(k, group)]

def flows(l, parent, group, upward):
    """The (sender, receiver) pairs of one thread block's data: the ring of
    rail l between the nodes, and the tree parent inside every node."""
    out = {}
    for k in range(NODES):
        if not in_group(k, group):
            continue
        for node in range(NODES):
            if hop(node, k, upward) < NODES - 1:
                out[(rank_of(node, l), rank_of((node + 1) %% NODES, l))] = True
    for node in range(NODES):
        for c in range(RANKS_PER_NODE):
            if parent[c] >= 0:
                a, b = rank_of(node, parent[c]), rank_of(node, c)
                out[(b, a) if upward else (a, b)] = True
    return sorted(out.keys())

def node_of(r):
    return r // RANKS_PER_NODE

def down(l, off, count, parent, group, unit, ch, tb):
    """The shards of group (of local index l) around the ring of rail l from
    their ranks, and down the tree parent in every node, in pieces of unit
    bytes: every rank takes piece i of each of its shards in ring order,
    then piece i + 1 (a copy overlaps the ring's transfers)."""
    orders = [in_order(node, group, False) for node in range(NODES)]
    for _ in pipeline(unit):
        for s in range(GROUP):
            for node in range(NODES):
                if s < len(orders[node]):
                    down_shard(l, off, count, parent, node, orders[node][s], ch, tb)

def down_shard(l, off, count, parent, node, k, ch, tb):
    """Node k's shard (of local index l) at node: received from the ring or
    the tree parent, sent on to the next node and the tree children."""
    first = rank_of(k, l) * CHUNKS + off
    h = hop(node, k, False)
    for v in range(RANKS_PER_NODE):
        me = rank_of(node, v)
        src = -1
        dsts = [rank_of(node, c) for c in local_children(parent, v)]
        if v == l:
            if h > 0:
                src = rank_of((node - 1) %% NODES, l)
            if h < NODES - 1:
                dsts = [rank_of((node + 1) %% NODES, l)] + dsts
        else:
            src = rank_of(node, parent[v])
        for x in range(first, first + count):
            if src >= 0:
                ch[(me, src)].wait(tb = tb, data_sync = SyncType.after)
            send([ch[(me, d)] for d in dsts], [buf(d)[x:x + 1] for d in dsts], buf(me)[x:x + 1], tb)

def up_links(node, k, v, l, parent):
    """The ranks whose partial sums of node k's shard (of local index l) rank
    (node, v) receives, and the rank it sends its own to (-1 at the shard's
    rank)."""
    srcs = [rank_of(node, c) for c in local_children(parent, v)]
    if v != l:
        return srcs, rank_of(node, parent[v])
    h = hop(node, k, True)
    if h > 0:
        srcs.append(rank_of((node - 1) %% NODES, l))
    if h < NODES - 1:
        return srcs, rank_of((node + 1) %% NODES, l)
    return srcs, -1

def up(l, off, count, parent, group, unit, ch, tb):
    """The partial sums of the shards of group (of local index l) up the tree
    parent in every node and around the ring of rail l to their ranks. Unlike
    down, every rank takes its shards one at a time, in ring order, each in a
    pipeline of its own: a rank forwards a piece only once it has added it
    up, so with piece i of every shard in turn each ring step would wait for
    the previous node's sum; here the sum of piece i + 1 overlaps the
    transfer of piece i, and a ring step waits for the first piece of the
    step before it only."""
    # Scratch: slot[(k, s)] on the receiver of s's partial sums of node k's
    # shard; part[(k, v)] holds v's partial sums where it receives some.
    orders = [in_order(node, group, True) for node in range(NODES)]
    slot, part = {}, {}
    for node in range(NODES):
        for k in orders[node]:
            for v in range(RANKS_PER_NODE):
                me = rank_of(node, v)
                srcs, to = up_links(node, k, v, l, parent)
                if to >= 0:
                    slot[(k, me)] = Buffer(to, count)
                    if srcs:
                        part[(k, me)] = Buffer(me, count)
    handshake(ch, flows(l, parent, group, True), tb)
    for s in range(GROUP):
        for _ in pipeline(unit):
            for node in range(NODES):
                if s < len(orders[node]):
                    up_shard(l, off, count, parent, node, orders[node][s], slot, part, ch, tb)

def up_shard(l, off, count, parent, node, k, slot, part, ch, tb):
    """Node k's shard (of local index l) at node: the partial sums received
    from the tree children and the ring added to the rank's own, and sent on
    to the tree parent or the next node."""
    first = rank_of(k, l) * CHUNKS + off
    for v in range(RANKS_PER_NODE):
        me = rank_of(node, v)
        srcs, to = up_links(node, k, v, l, parent)
        for j in range(count):
            for s in srcs:
                ch[(me, s)].wait(tb = tb, data_sync = SyncType.after)
            got = [slot[(k, s)][j:j + 1] for s in srcs]
            mine = buf(me)[first + j:first + j + 1]
            if to < 0:
                Rank(me).reduce(mine, got, tb = tb)
                continue
            if srcs:
                Rank(me).reduce(mine, got, tb = tb, dst_chunk = part[(k, me)][j:j + 1])
                mine = part[(k, me)][j:j + 1]
            send([ch[(me, to)]], [slot[(k, me)][j:j + 1]], mine, tb)

def block(l, off, count, parent, group, unit, tb):
    """Thread block tb of every rank: chunks [off, off + count) of the shards
    of local index l of the nodes of group."""
    pairs = flows(l, parent, group, COLLECTIVE != "allgather")
    if COLLECTIVE == "allreduce":
        pairs = pairs + flows(l, parent, group, False)
    ch = pair_channels(pairs)
    if COLLECTIVE == "allgather":
        handshake(ch, flows(l, parent, group, False), tb)
        down(l, off, count, parent, group, unit, ch, tb)
    else:
        up(l, off, count, parent, group, unit, ch, tb)
        if COLLECTIVE == "allreduce":
            down(l, off, count, parent, group, unit, ch, tb)
    flush_ports(ch, tb)

def thread_blocks(chunks, trees, unit):
    """A thread block per local root, node tree and group of nodes on every
    rank, in that order."""
    tb = 0
    for l in range(RANKS_PER_NODE):
        off = 0
        for count, parent in trees[l]:
            for group in range(GROUPS):
                block(l, off, count, parent, group, unit, tb)
                tb += 1
            off += count

`
