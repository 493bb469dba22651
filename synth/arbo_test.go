package synth

import (
	"math"
	"math/rand"
	"testing"
)

// bruteArborescence tries every parent choice.
func bruteArborescence(n, root int, cost [][]float64) float64 {
	best := math.Inf(1)
	parent := make([]int, n)
	var rec func(v int)
	rec = func(v int) {
		if v == n {
			// Every vertex must reach the root by parents, without a cycle.
			for u := 0; u < n; u++ {
				w, steps := u, 0
				for w != root && steps <= n {
					w = parent[w]
					steps++
				}
				if w != root {
					return
				}
			}
			s := 0.0
			for u := 0; u < n; u++ {
				if u != root {
					s += cost[parent[u]][u]
				}
			}
			best = min(best, s)
			return
		}
		if v == root {
			rec(v + 1)
			return
		}
		for p := 0; p < n; p++ {
			if p != v && !math.IsInf(cost[p][v], 1) {
				parent[v] = p
				rec(v + 1)
			}
		}
	}
	rec(0)
	return best
}

func TestMinArborescence(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.Intn(5)
		cost := make([][]float64, n)
		var edges []wedge
		for a := range cost {
			cost[a] = make([]float64, n)
			for b := range cost[a] {
				cost[a][b] = math.Inf(1)
				if a != b && rng.Float64() < 0.7 {
					cost[a][b] = float64(rng.Intn(10))
					edges = append(edges, wedge{a, b, cost[a][b]})
				}
			}
		}
		root := rng.Intn(n)
		want := bruteArborescence(n, root, cost)
		got := minArborescence(n, root, edges)
		if math.IsInf(want, 1) {
			if got != nil {
				t.Fatalf("trial %d: found a tree where none exists", trial)
			}
			continue
		}
		if got == nil || len(got) != n-1 {
			t.Fatalf("trial %d: got %v, want a tree of cost %g", trial, got, want)
		}
		if c := treeCost(edges, got); math.Abs(c-want) > 1e-9 {
			t.Fatalf("trial %d: cost %g, want %g", trial, c, want)
		}
		// A tree: every vertex has one parent and reaches the root.
		parent := make([]int, n)
		for i := range parent {
			parent[i] = -2
		}
		for _, i := range got {
			if parent[edges[i].to] != -2 {
				t.Fatalf("trial %d: two parents", trial)
			}
			parent[edges[i].to] = edges[i].from
		}
		for u := 0; u < n; u++ {
			w, steps := u, 0
			for w != root && steps <= n {
				w = parent[w]
				steps++
			}
			if w != root {
				t.Fatalf("trial %d: vertex %d does not reach the root", trial, u)
			}
		}
	}
}
