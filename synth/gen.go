// This file writes the .star program of a packing: data tables (the
// trees, the size variants) and a few named helpers that turn them into
// channels and ops.

package synth

import (
	"fmt"
	"strings"
)

// Collective is what synth writes a program for.
type Collective int

// The collectives synth writes.
const (
	AllGather Collective = iota
	ReduceScatter
	AllReduce
)

// collNames are the collectives' names, in Collective order.
func collNames() []string { return []string{"allgather", "reducescatter", "allreduce"} }

func (c Collective) String() string { return collNames()[c] }

// ParseCollective reads allgather, reducescatter or allreduce.
func ParseCollective(s string) (Collective, error) {
	for i, n := range collNames() {
		if s == n {
			return Collective(i), nil
		}
	}
	return 0, fmt.Errorf("collective %q: want allgather, reducescatter or allreduce", s)
}

// Variant is one program of the file: a message-size range and how the
// trees run in it.
type Variant struct {
	Suffix    string
	Min, Max  uint64
	Instances int
	// Unit is the pipeline unit in bytes (0: no pipeline).
	Unit uint64
	// Set is the tree set the variant runs (an index into the packings).
	Set int
	// orig is its candidate set during the choice.
	orig int
}

// program is what gen needs to write a file.
type program struct {
	coll         Collective
	name         string // plan name prefix
	header       []string
	worldSize    int
	ranksPerNode int
	nodes        []int
	packs        []*Packing
	variants     []Variant
	topoName     string
}

// star returns the program's text.
func (g *program) star() []byte {
	var b strings.Builder
	for _, l := range g.header {
		if l == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# " + l + "\n")
	}
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\nNAME = %q\n", g.name)
	w("WORLD_SIZE = %d\n", g.worldSize)
	w("RANKS_PER_NODE = %d\n", g.ranksPerNode)
	w("TOPOLOGY = %q\n", g.topoName)
	w("\n# NODE[r]: the machine of rank r (memory channels within one, port channels between).\n")
	w("NODE = %s\n", intList(g.nodes))
	reduce := g.packs[0].Reduce
	kind := "broadcast trees"
	if reduce {
		kind = "reduction trees"
	}
	text := "TREE_SETS: each (chunks, trees): every rank's shard is cut into chunks chunks; trees[r] are the " + kind +
		" of rank r's shard, in chunk order, each (chunks it carries, the parent of every rank: -1 at the root r, how it moves them), a thread block of its own on every rank."
	switch {
	case !reduce:
		text += " A chunk flows from every rank to its children."
	case g.coll == AllReduce:
		text += " Partial sums flow from every rank to its parent; the sums then flow back down the same edges, from every rank to its children."
	default:
		text += " Partial sums flow from every rank to its parent."
	}
	w("\n")
	for _, l := range wrap(text, 76) {
		w("# %s\n", l)
	}
	for _, l := range wrap("How: "+howLegend(g.coll)+".", 76) {
		w("# %s\n", l)
	}
	w("TREE_SETS = [\n")
	for si, pk := range g.packs {
		w("    (%d, [  # set %d\n", pk.Chunks, si)
		for r, ts := range pk.Trees {
			w("        [  # rank %d\n", r)
			for _, t := range ts {
				w("            (%d, %s, %q),\n", t.Chunks, intList(t.Parent), pk.How)
			}
			w("        ],\n")
		}
		w("    ]),\n")
	}
	w("]\n")
	w("\n# VARIANTS: one program per message-size range: (name suffix, smallest and\n")
	w("# largest message size in bytes, tree set, instances, pipeline unit in\n")
	w("# bytes; 0: none).\n")
	w("VARIANTS = [\n")
	for _, v := range g.variants {
		w("    (%q, %d, %s, %d, %d, %d),\n", v.Suffix, v.Min, sizeLiteral(v.Max), v.Set, v.Instances, v.Unit)
	}
	w("]\n")
	b.WriteString(helpersStar)
	w(`def node_of(r):
    return NODE[r]

def children(parent, v):
    """The ranks whose parent is v."""
    return [c for c in range(WORLD_SIZE) if parent[c] == v]

def edges(parent, upward):
    """The pairs (parent, child), or (child, parent) when upward, of every
    edge of the tree, sorted."""
    out = []
    for c in range(WORLD_SIZE):
        if parent[c] >= 0:
            out.append((c, parent[c]) if upward else (parent[c], c))
    return sorted(out)

def over_chunks(count, unit, step):
    """Runs step(lo, hi) over a tree's count chunks (lo and hi count from
    its first): with a unit, once, in one pipeline over all of them, each
    piece of unit bytes forwarded as soon as it has arrived; without, once
    per chunk, whole chunks one after the other."""
    if unit > 0:
        for _ in Loop.iteration(unit = unit, num_chunks = count):
            step(0, count)
    else:
        for j in range(count):
            step(j, j + 1)

`)
	if g.coll == AllGather {
		w("%s", agStar)
	} else {
		w("%s", rsStar)
	}
	w("%s", downStar)
	w(`def thread_blocks(chunks, trees, unit):
    """A thread block per tree on every rank: the k-th of a rank runs the k-th
    tree of the table, in root order."""
    tb = 0
    for root in range(WORLD_SIZE):
        first = root * chunks
        for count, parent, how in trees[root]:
`)
	switch g.coll {
	case AllGather:
		w("            broadcast(first, count, parent, unit, how, tb)\n")
	case ReduceScatter:
		w("            reduce(first, count, parent, unit, False, how, tb)\n")
	case AllReduce:
		w("            reduce(first, count, parent, unit, True, how, tb)\n")
	}
	w("            first += count\n")
	w("            tb += 1\n\n")
	b.WriteString(programText(g.coll))
	return []byte(b.String())
}

func intList(a []int) string {
	s := make([]string, len(a))
	for i, v := range a {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// sizeLiteral writes the largest size as (1 << 64) - 1.
func sizeLiteral(v uint64) string {
	if v == ^uint64(0) {
		return "(1 << 64) - 1"
	}
	return fmt.Sprint(v)
}

// howLegend explains the third field of a tree.
func howLegend(c Collective) string {
	switch c {
	case AllGather:
		return `"put": every rank writes each piece to its children; "get": every rank reads it from its parent`
	case ReduceScatter:
		return `"paced": a rank may send a piece to its parent once the parent holds its last one (a credit per piece); "free": as fast as it can`
	}
	return `"paced" or "free" up the tree (a rank may send a piece to its parent once the parent holds its last one, or as fast as it can), "put" or "get" down it (every rank writes the sums to its children, or reads them from its parent)`
}

// agStar is the data movement of allgather: broadcast trees.
const agStar = `def buf(v):
    """The buffer the shards live in: in place, rank r's input is its shard of
    its output (chunks [r * chunks, (r + 1) * chunks))."""
    return Rank(v).get_output_buffer()

def broadcast(base, count, parent, unit, how, tb):
    """Thread block tb of every rank: chunks [base, base + count) (of the
    tree's root's shard) down the tree parent."""
    flows = edges(parent, False)
    ch = pair_channels(flows)
    # Every rank tells its parent that it may write (or, with "get", that
    # it has read) the output of the last call.
    handshake(ch, flows, tb)
    over_chunks(count, unit, lambda lo, hi: down(ch, parent, base + lo, base + hi, how, tb))
    flush_ports(ch, tb)

`

// rsStar is the data movement of reduce-scatter and allreduce:
// reduction trees, for allreduce the sums then broadcast down them.
const rsStar = `def buf(v):
    """The buffer the shards live in: in place, rank r's result is its shard
    of its input (chunks [r * chunks, (r + 1) * chunks))."""
    return Rank(v).get_input_buffer()

def reduce(base, count, parent, unit, then_broadcast, how, tb):
    """Thread block tb of every rank: the partial sums of chunks [base,
    base + count) (of the tree's root's shard) up the tree parent, then,
    when then_broadcast, the sums back down."""
    ch = pair_channels(edges(parent, False))
    # Scratch: slot[c] on c's parent receives c's partial sums; part[v]
    # holds the partial sums of a rank with children.
    slot, part = {}, {}
    for c in range(WORLD_SIZE):
        if parent[c] >= 0:
            slot[c] = Buffer(parent[c], count)
            if children(parent, c):
                part[c] = Buffer(c, count)
    paced = "paced" in how
    if paced:
        # Every rank gives its children the credit for the first piece (its
        # scratch is free to be written); each child takes the last one
        # after the loop.
        for p, c in edges(parent, False):
            ch[(p, c)].signal(tb = tb, data_sync = SyncType.none)
    else:
        # Every rank tells its children that its scratch is free to be
        # written.
        handshake(ch, edges(parent, True), tb)
    over_chunks(count, unit, lambda lo, hi: up(ch, parent, slot, part, base, lo, hi, paced, tb))
    if paced:
        for c, p in edges(parent, True):
            ch[(c, p)].wait(tb = tb, data_sync = SyncType.none)
    if then_broadcast:
        over_chunks(count, unit, lambda lo, hi: down(ch, parent, base + lo, base + hi, how, tb))
    flush_ports(ch, tb)

def up(ch, parent, slot, part, base, lo, hi, paced, tb):
    """Chunks [lo, hi) of the tree's (from base in the buffers, from 0 in
    the scratch): every rank waits for its children's partial sums, adds
    its own and sends the sum to its parent; the root keeps it. Paced, a
    rank waits for its parent's credit before it sends, and gives its
    children one once their piece has arrived."""
    for v in range(WORLD_SIZE):
        kids = children(parent, v)
        for c in kids:
            ch[(v, c)].wait(tb = tb, data_sync = SyncType.after)
        if paced:
            for c in kids:
                ch[(v, c)].signal(tb = tb, data_sync = SyncType.none)
        got = [slot[c][lo:hi] for c in kids]
        mine = buf(v)[base + lo:base + hi]
        if parent[v] < 0:
            Rank(v).reduce(mine, got, tb = tb)
            continue
        if paced:
            ch[(v, parent[v])].wait(tb = tb, data_sync = SyncType.none)
        if kids:
            Rank(v).reduce(mine, got, tb = tb, dst_chunk = part[v][lo:hi])
            mine = part[v][lo:hi]
        send([ch[(v, parent[v])]], [slot[v][lo:hi]], mine, tb)

`

// downStar is down(): chunks down a tree, written by every parent
// ("put") or read by every child ("get").
const downStar = `def down(ch, parent, lo, hi, how, tb):
    """Chunks [lo, hi) down the tree: every rank waits for its parent's
    signal, then either writes them to its children ("put") or reads them
    from its parent and tells its children ("get")."""
    for v in range(WORLD_SIZE):
        kids = children(parent, v)
        if parent[v] >= 0:
            ch[(v, parent[v])].wait(tb = tb, data_sync = SyncType.after)
        if "get" not in how:
            send([ch[(v, c)] for c in kids], [buf(c)[lo:hi] for c in kids], buf(v)[lo:hi], tb)
            continue
        if parent[v] >= 0:
            ch[(v, parent[v])].get(buf(v)[lo:hi], buf(parent[v])[lo:hi], tb = tb)
        for c in kids:
            ch[(v, c)].signal(tb = tb, data_sync = SyncType.before)

`
