// This file holds the code every synthesized program shares, single-node
// (gen.go) and hierarchical (hier.go): the parameters, the channel
// helpers and program(), which writes one variant. Each form adds its
// tables, its data movement and thread_blocks(chunks, trees, unit), the
// thread blocks of one variant.

package synth

import "fmt"

// ctorName is the starlib constructor of the collective.
func ctorName(c Collective) string {
	return map[Collective]string{AllGather: "AllGather", ReduceScatter: "ReduceScatter", AllReduce: "AllReduce"}[c]
}

// helpersStar are the parameters and channel helpers of every program;
// channel() asks node_of(r), which each form defines.
const helpersStar = `
num_threads_per_block = param("num_threads_per_block", 1024, help = "threads per thread block")
variant = param("variant", "", help = "write only the program of this variant (empty: all of them)")

def channel(dst, src):
    """A channel from src to dst: memory within a node, port between nodes."""
    if node_of(dst) == node_of(src):
        return MemoryChannel(dst, src)
    return PortChannel(dst, src)

def pair_channels(pairs):
    """ch[(a, b)], a channel from a to b, for every pair (a, b) and its
    reverse. Both directions are created together, so the k-th channel from
    a to b pairs with the k-th from b to a."""
    ch = {}
    for a, b in pairs:
        if (a, b) not in ch:
            ch[(a, b)] = channel(b, a)
            ch[(b, a)] = channel(a, b)
    return ch

def handshake(ch, flows, tb):
    """For every (sender, receiver) of flows, the receiver tells the sender
    that its buffers may be written."""
    for a, b in flows:
        ch[(b, a)].signal(tb = tb, data_sync = SyncType.none)
    for a, b in flows:
        ch[(a, b)].wait(tb = tb, data_sync = SyncType.none)

def send(chans, dsts, src, tb):
    """Writes src into dsts[i] over chans[i] and signals each peer. Puts of one
    kind in a row fuse into one op, and so do the signals: groups of 8 peers,
    the most one op reaches. No source is written again in the launch, so a
    port channel's transfers are flushed once, at the end (flush_ports)."""
    for g in range(0, len(chans), 8):
        group = range(g, min(g + 8, len(chans)))
        for i in group:
            if chans[i].channel_type == ChannelType.port:
                chans[i].put_with_signal(dsts[i], src, tb = tb)
            else:
                chans[i].put(dsts[i], src, tb = tb)
        for i in group:
            if chans[i].channel_type == ChannelType.memory:
                chans[i].signal(tb = tb, data_sync = SyncType.before)

def flush_ports(ch, tb):
    """Waits, on every rank, for its port channels' transfers to complete:
    the next launch may then overwrite their sources."""
    for a, b in sorted(ch.keys()):
        if ch[(a, b)].channel_type == ChannelType.port:
            ch[(a, b)].flush(tb = tb)

def pipeline(unit):
    """The chunks move in pieces of unit bytes, each piece forwarded as soon
    as it has arrived; unit 0 moves whole chunks."""
    if unit > 0:
        return Loop.iteration(unit = unit, num_chunks = 1)
    return [None]

`

// programStar is program() and the loop over VARIANTS: %s is the
// collective's constructor.
const programStar = `def program(suffix, lo, hi, tree_set, instances, unit):
    """One program: the variant's thread blocks over the trees of its set."""
    chunks, trees = TREE_SETS[tree_set]
    spec = AlgoSpec(
        name = NAME + "_" + suffix,
        collective = %s(WORLD_SIZE, chunks, True),
        nranks_per_node = RANKS_PER_NODE,
        world_size = WORLD_SIZE,
        in_place = True,
        instances = instances,
        protocol = "Simple",
        num_threads_per_block = num_threads_per_block,
        min_message_size = lo,
        max_message_size = hi,
        tags = {
            "algorithm": NAME,
            "topology": "single-node" if RANKS_PER_NODE == WORLD_SIZE else "multi-node",
            "nodes": str(WORLD_SIZE // RANKS_PER_NODE),
            "synthesized": TOPOLOGY,
        },
    )
    CollectiveProgram.from_spec(spec)
    thread_blocks(chunks, trees, unit)

for suffix, lo, hi, tree_set, instances, unit in VARIANTS:
    if variant == "" or variant == suffix:
        program(suffix, lo, hi, tree_set, instances, unit)
`

// programText is program() of collective c.
func programText(c Collective) string { return fmt.Sprintf(programStar, ctorName(c)) }
