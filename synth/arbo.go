// This file holds the minimum-cost spanning arborescence (Chu, Liu and
// Edmonds): the oracle of the tree packing.

package synth

import "math"

// wedge is a directed edge of the logical graph with a cost.
type wedge struct {
	from, to int
	cost     float64
}

// minArborescence returns, for the graph of n vertices and edges, the
// indices of the edges of a spanning arborescence rooted at root (every
// vertex reachable from it) of least total cost; nil if there is none.
func minArborescence(n, root int, edges []wedge) []int {
	// in[v]: the cheapest edge into v.
	in := make([]int, n)
	for v := range in {
		in[v] = -1
	}
	for i, e := range edges {
		if e.to == root || e.from == e.to {
			continue
		}
		if in[e.to] < 0 || e.cost < edges[in[e.to]].cost {
			in[e.to] = i
		}
	}
	for v := 0; v < n; v++ {
		if v != root && in[v] < 0 {
			return nil
		}
	}
	// Find cycles of the chosen edges.
	comp := make([]int, n)
	for v := range comp {
		comp[v] = -1
	}
	mark := make([]int, n)
	for v := range mark {
		mark[v] = -1
	}
	ncomp := 0
	cyclic := false
	inCycle := make([]bool, n)
	for v := 0; v < n; v++ {
		u := v
		for u != root && mark[u] < 0 && comp[u] < 0 {
			mark[u] = v
			u = edges[in[u]].from
		}
		if u != root && mark[u] == v && comp[u] < 0 {
			// A new cycle through u.
			cyclic = true
			for w := u; ; {
				comp[w] = ncomp
				inCycle[w] = true
				w = edges[in[w]].from
				if w == u {
					break
				}
			}
			ncomp++
		}
	}
	if !cyclic {
		out := make([]int, 0, n-1)
		for v := 0; v < n; v++ {
			if v != root {
				out = append(out, in[v])
			}
		}
		return out
	}
	for v := 0; v < n; v++ {
		if comp[v] < 0 {
			comp[v] = ncomp
			ncomp++
		}
	}
	// Contract: edges into a cycle cost less the cycle edge they replace.
	var sub []wedge
	var orig []int
	for i, e := range edges {
		a, b := comp[e.from], comp[e.to]
		if a == b {
			continue
		}
		c := e.cost
		if inCycle[e.to] {
			c -= edges[in[e.to]].cost
		}
		sub = append(sub, wedge{from: a, to: b, cost: c})
		orig = append(orig, i)
	}
	picked := minArborescence(ncomp, comp[root], sub)
	if picked == nil {
		return nil
	}
	// Expand: every picked edge, and every cycle edge but the one into the
	// vertex a picked edge enters.
	entered := make([]bool, n)
	out := make([]int, 0, n-1)
	for _, k := range picked {
		i := orig[k]
		out = append(out, i)
		entered[edges[i].to] = true
	}
	for v := 0; v < n; v++ {
		if inCycle[v] && !entered[v] {
			out = append(out, in[v])
		}
	}
	return out
}

// treeCost sums the costs of edge set picked.
func treeCost(edges []wedge, picked []int) float64 {
	s := 0.0
	for _, i := range picked {
		s += edges[i].cost
	}
	if picked == nil {
		return math.Inf(1)
	}
	return s
}
