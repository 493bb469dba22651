// This file holds the tree packing: spanning trees for every rank's
// shard, found by multiplicative weights over the links with the
// minimum-cost arborescence as oracle, then rounded to whole chunks.

package synth

import (
	"fmt"
	"math"
	"strings"

	"github.com/mscclgo/mscclgo/topo"
)

// Tree is one spanning tree of a rank's shard. For a broadcast (all
// gather) the data flows from Parent[v] to v; for a reduction (reduce
// scatter) from v to Parent[v]. Chunks is how many of the shard's
// chunks it carries.
type Tree struct {
	Root   int
	Parent []int
	Chunks int
}

// Packing is the trees of every root, and what they achieve.
type Packing struct {
	// Reduce says the trees are reduction trees (data towards the root).
	Reduce bool
	// Trees[r] are the trees of rank r's shard; Chunks is the number of
	// chunks each shard is cut into (the Chunks of Trees[r] sum to it).
	Trees  [][]Tree
	Chunks int
	// Rate is the shard rate the trees sustain on the links (GB/s per
	// shard, comparable with topo.Bound.Rate); Busiest the link that
	// limits it.
	Rate    float64
	Busiest int
	// How is how the program moves data along the trees (the third field
	// of a tree in its table): "put" or "get" down broadcast trees,
	// "paced" or "free" up reduction trees, one of each for allreduce's
	// (howLegend). Pack and Star leave it empty; synth sets it.
	How string
}

// withHow returns pk moving data as how.
func withHow(pk *Packing, how string) *Packing {
	q := *pk
	q.How = how
	return &q
}

// perChunk returns pk with every tree of k chunks split into k trees of
// one chunk: a thread block per chunk. Under the model's fair sharing
// of a link every transfer in flight gets the same rate, so a tree of k
// chunks in one thread block would move at the rate of a tree of one
// and finish last; a block per chunk gives every tree the share of the
// links the packing counts it at.
func perChunk(pk *Packing) *Packing {
	q := *pk
	q.Trees = make([][]Tree, len(pk.Trees))
	for r, ts := range pk.Trees {
		for _, t := range ts {
			for j := 0; j < t.Chunks; j++ {
				one := t
				one.Chunks = 1
				q.Trees[r] = append(q.Trees[r], one)
			}
		}
	}
	return &q
}

// key is a tree's parent list, for deduplication.
func (t Tree) key() string {
	var b strings.Builder
	for _, p := range t.Parent {
		fmt.Fprintf(&b, "%d,", p)
	}
	return b.String()
}

// Depth is the number of edges on the tree's longest root-to-leaf path.
func (t Tree) Depth() int {
	d := 0
	for v := range t.Parent {
		k := 0
		for u := v; t.Parent[u] >= 0; u = t.Parent[u] {
			k++
		}
		d = max(d, k)
	}
	return d
}

// Children returns the children of v.
func (t Tree) Children(v int) []int {
	var out []int
	for c, p := range t.Parent {
		if p == v {
			out = append(out, c)
		}
	}
	return out
}

// packer holds the links and the logical graph.
type packer struct {
	tp     *topo.Topology
	reduce bool
	n      int
	links  []int     // the used links
	cap    []float64 // their rates
	pos    map[int]int
	// uses[a][b]: the positions of the links a transfer a -> b crosses
	uses [][][]int
}

func newPacker(tp *topo.Topology, reduce bool) *packer {
	p := &packer{tp: tp, reduce: reduce, n: tp.NumGPUs(), pos: map[int]int{}}
	for i, l := range tp.Links {
		if tp.Used(i) {
			p.pos[i] = len(p.links)
			p.links = append(p.links, i)
			p.cap = append(p.cap, l.GBps)
		}
	}
	p.uses = make([][][]int, p.n)
	for a := range p.uses {
		p.uses[a] = make([][]int, p.n)
		for b := range p.uses[a] {
			for _, li := range tp.Route(a, b) {
				p.uses[a][b] = append(p.uses[a][b], p.pos[li])
			}
		}
	}
	return p
}

// transfer returns the links the tree edge parent -> child moves data
// over: parent to child for a broadcast, child to parent for a
// reduction.
func (p *packer) transfer(parent, child int) []int {
	if p.reduce {
		return p.uses[child][parent]
	}
	return p.uses[parent][child]
}

func (p *packer) reach(parent, child int) bool {
	if p.reduce {
		return p.tp.Reach(child, parent)
	}
	return p.tp.Reach(parent, child)
}

// oracle returns the cheapest spanning tree of root under link lengths y.
func (p *packer) oracle(root int, y []float64) Tree {
	var edges []wedge
	for a := 0; a < p.n; a++ {
		for b := 0; b < p.n; b++ {
			if a == b || !p.reach(a, b) {
				continue
			}
			c := 0.0
			for _, l := range p.transfer(a, b) {
				c += y[l]
			}
			if a == root {
				// Ties go to the root's own edges: shallower trees.
				c *= 1 - 1e-3
			}
			edges = append(edges, wedge{from: a, to: b, cost: c})
		}
	}
	picked := minArborescence(p.n, root, edges)
	t := Tree{Root: root, Parent: make([]int, p.n)}
	for i := range t.Parent {
		t.Parent[i] = -1
	}
	for _, i := range picked {
		t.Parent[edges[i].to] = edges[i].from
	}
	return t
}

// addLoad adds w units of tree t to load.
func (p *packer) addLoad(load []float64, t Tree, w float64) {
	for v, par := range t.Parent {
		if par >= 0 {
			for _, l := range p.transfer(par, v) {
				load[l] += w
			}
		}
	}
}

// candidates runs the multiplicative weights: each round every root adds
// the tree cheapest under lengths exponential in the links' congestion.
// It returns every root's distinct trees with how often each was picked.
func (p *packer) candidates(rounds int) [][]Tree {
	m := len(p.links)
	load := make([]float64, m)
	y := make([]float64, m)
	for l := range y {
		y[l] = 1 / p.cap[l]
	}
	out := make([][]Tree, p.n)
	index := make([]map[string]int, p.n)
	for r := range index {
		index[r] = map[string]int{}
	}
	for round := 0; round < rounds; round++ {
		for r := 0; r < p.n; r++ {
			t := p.oracle(r, y)
			k := t.key()
			if i, ok := index[r][k]; ok {
				out[r][i].Chunks++
			} else {
				index[r][k] = len(out[r])
				t.Chunks = 1
				out[r] = append(out[r], t)
			}
			p.addLoad(load, t, 1)
			// Lengths: exponential in congestion relative to the worst.
			worst := 0.0
			for l := range load {
				worst = max(worst, load[l]/p.cap[l])
			}
			alpha := 4 + 0.5*float64(round)
			alpha = min(alpha, 40)
			for l := range y {
				y[l] = math.Exp(alpha*(load[l]/p.cap[l]/worst-1)) / p.cap[l]
			}
		}
	}
	return out
}

// rate returns the shard rate of whole-chunk trees (GB/s per shard) and
// the busiest link's position.
func (p *packer) rate(trees [][]Tree, chunks int) (float64, int) {
	load := make([]float64, len(p.links))
	for _, ts := range trees {
		for _, t := range ts {
			if t.Chunks > 0 {
				p.addLoad(load, t, float64(t.Chunks)/float64(chunks))
			}
		}
	}
	worst, at := 0.0, -1
	for l := range load {
		if c := load[l] / p.cap[l]; c > worst {
			worst, at = c, l
		}
	}
	if worst == 0 {
		return math.Inf(1), -1
	}
	return 1 / worst, at
}

// round gives every root whole chunks: it starts from picks (the
// integer solution of chunks rounds of multiplicative weights) and moves
// one chunk at a time, from one of a root's trees to another tree of its
// pool, while that lowers the busiest link's load (ties: the sum of the
// squared loads), at most maxTrees trees per root.
func (p *packer) round(picks, pool [][]Tree, chunks, maxTrees int) [][]Tree {
	m := len(p.links)
	type cand struct {
		t    Tree
		uses []int // link positions, with repeats
	}
	cands := make([][]cand, p.n)
	count := make([][]int, p.n)
	for r := 0; r < p.n; r++ {
		seen := map[string]int{}
		for _, ts := range [][]Tree{picks[r], pool[r]} {
			for _, t := range ts {
				k := t.key()
				if _, ok := seen[k]; ok {
					continue
				}
				seen[k] = len(cands[r])
				c := cand{t: Tree{Root: t.Root, Parent: t.Parent}}
				for v, par := range t.Parent {
					if par >= 0 {
						c.uses = append(c.uses, p.transfer(par, v)...)
					}
				}
				cands[r] = append(cands[r], c)
			}
		}
		count[r] = make([]int, len(cands[r]))
		for _, t := range picks[r] {
			count[r][seen[t.key()]] += t.Chunks
		}
	}
	load := make([]float64, m) // in chunks
	for r := range cands {
		for i, c := range cands[r] {
			for _, l := range c.uses {
				load[l] += float64(count[r][i])
			}
		}
	}
	score := func() (float64, float64) {
		worst, sq := 0.0, 0.0
		for l := range load {
			c := load[l] / p.cap[l]
			worst = max(worst, c)
			sq += c * c
		}
		return worst, sq
	}
	move := func(r, from, to int, k float64) {
		for _, l := range cands[r][from].uses {
			load[l] -= k
		}
		for _, l := range cands[r][to].uses {
			load[l] += k
		}
		count[r][from] -= int(k)
		count[r][to] += int(k)
	}
	// At most maxTrees trees per shard: empty the least used trees into
	// the kept ones, each chunk where it loads the links least.
	for r := range cands {
		for {
			used, least := 0, -1
			for i, k := range count[r] {
				if k > 0 {
					used++
					if least < 0 || k < count[r][least] {
						least = i
					}
				}
			}
			if used <= maxTrees {
				break
			}
			for count[r][least] > 0 {
				bj, bw, bs := -1, math.Inf(1), math.Inf(1)
				for j := range cands[r] {
					if j == least || count[r][j] == 0 {
						continue
					}
					move(r, least, j, 1)
					w, sq := score()
					move(r, j, least, 1)
					if w < bw || (w == bw && sq < bs) {
						bj, bw, bs = j, w, sq
					}
				}
				move(r, least, bj, 1)
			}
		}
	}
	curW, curS := score()
	for step := 0; step < 4000; step++ {
		bw, bs, br, bi, bj := curW, curS, -1, -1, -1
		for r := range cands {
			used := 0
			for _, k := range count[r] {
				if k > 0 {
					used++
				}
			}
			for i := range cands[r] {
				if count[r][i] == 0 {
					continue
				}
				for j := range cands[r] {
					if i == j || (count[r][j] == 0 && count[r][i] > 1 && used >= maxTrees) {
						continue
					}
					move(r, i, j, 1)
					w, sq := score()
					move(r, j, i, 1)
					if w < bw*(1-1e-9) || (w <= bw*(1+1e-9) && sq < bs*(1-1e-9)) {
						bw, bs, br, bi, bj = w, sq, r, i, j
					}
				}
			}
		}
		if br < 0 {
			break
		}
		move(br, bi, bj, 1)
		curW, curS = bw, bs
	}
	trees := make([][]Tree, p.n)
	for r := range cands {
		for i, c := range cands[r] {
			if count[r][i] > 0 {
				t := c.t
				t.Chunks = count[r][i]
				trees[r] = append(trees[r], t)
			}
		}
	}
	return trees
}

// flatten moves ranks closer to their trees' roots (to the shallowest
// rank outside their subtree that reaches them) while that does not lower
// the rate: shallower trees pipeline better and, moved whole, take fewer
// steps.
func (p *packer) flatten(trees [][]Tree, chunks int) {
	floor, _ := p.rate(trees, chunks)
	depth := func(t *Tree, v int) int {
		d := 0
		for u := v; t.Parent[u] >= 0; u = t.Parent[u] {
			d++
		}
		return d
	}
	inSubtree := func(t *Tree, u, v int) bool { // u in v's subtree
		for w := u; w >= 0; w = t.Parent[w] {
			if w == v {
				return true
			}
		}
		return false
	}
	for changed, pass := true, 0; changed && pass < 20; pass++ {
		changed = false
		for r := range trees {
			for ti := range trees[r] {
				t := &trees[r][ti]
				for v := range t.Parent {
					par := t.Parent[v]
					if par < 0 {
						continue
					}
					dp := depth(t, par)
					// Candidates by depth, shallowest first.
					best, bestD := -1, dp
					for u := range t.Parent {
						if u == par || inSubtree(t, u, v) || !p.reach(u, v) {
							continue
						}
						if du := depth(t, u); du < bestD {
							t.Parent = append([]int(nil), t.Parent...)
							t.Parent[v] = u
							if rt, _ := p.rate(trees, chunks); rt >= floor*(1-1e-9) {
								best, bestD = u, du
							}
							t.Parent[v] = par
						}
					}
					if best >= 0 {
						t.Parent = append([]int(nil), t.Parent...)
						t.Parent[v] = best
						changed = true
					}
				}
			}
		}
	}
}

// Pack returns the trees of every shard on tp: broadcast trees for
// allgather, reduction trees (reduce true) for reduce-scatter, each
// shard cut into chunks and carried by at most maxTrees trees.
func Pack(tp *topo.Topology, reduce bool, chunks, maxTrees, rounds int) *Packing {
	p := newPacker(tp, reduce)
	picks := p.candidates(chunks)
	pool := p.candidates(rounds)
	trees := p.round(picks, pool, chunks, maxTrees)
	p.flatten(trees, chunks)
	rate, at := p.rate(trees, chunks)
	busiest := -1
	if at >= 0 {
		busiest = p.links[at]
	}
	return &Packing{Reduce: reduce, Trees: trees, Chunks: chunks, Rate: rate, Busiest: busiest}
}

// maxChannels is the executor's limit of channels of one kind per thread
// block.
const maxChannels = 16

// Star returns the packing of one star per shard, every rank a child of
// the root (the all-pairs exchange as trees: one step, the fewest hops,
// for small sizes); nil where some rank does not reach the root directly.
func Star(tp *topo.Topology, reduce bool) *Packing {
	p := newPacker(tp, reduce)
	trees := make([][]Tree, p.n)
	for r := 0; r < p.n; r++ {
		// A thread block holds at most 16 channels of a kind, each way.
		mem, port := 0, 0
		for v := 0; v < p.n; v++ {
			switch {
			case v == r:
			case tp.NodeOf(v) == tp.NodeOf(r):
				mem++
			default:
				port++
			}
		}
		if 2*mem > maxChannels || 2*port > maxChannels {
			return nil
		}
		t := Tree{Root: r, Parent: make([]int, p.n), Chunks: 1}
		for v := range t.Parent {
			t.Parent[v] = r
			if v == r {
				t.Parent[v] = -1
			} else if !p.reach(r, v) {
				return nil
			}
		}
		trees[r] = []Tree{t}
	}
	rate, at := p.rate(trees, 1)
	busiest := -1
	if at >= 0 {
		busiest = p.links[at]
	}
	return &Packing{Reduce: reduce, Trees: trees, Chunks: 1, Rate: rate, Busiest: busiest}
}
