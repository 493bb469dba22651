// This file holds a max-flow routine (Dinic's algorithm on float
// capacities) and the cut lower bounds built on it.

package topo

import (
	"math"
	"sync"
)

// flowNet is a residual network.
type flowNet struct {
	head       []int
	to, next   []int
	cap        []float64
	level, cur []int
}

func newFlowNet(n int) *flowNet {
	f := &flowNet{head: make([]int, n), level: make([]int, n), cur: make([]int, n)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

// addEdge adds an edge u→v of capacity c (and its residual).
func (f *flowNet) addEdge(u, v int, c float64) {
	f.to = append(f.to, v, u)
	f.cap = append(f.cap, c, 0)
	f.next = append(f.next, f.head[u], f.head[v])
	f.head[u] = len(f.to) - 2
	f.head[v] = len(f.to) - 1
}

const flowEps = 1e-9

func (f *flowNet) bfs(s, t int) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	f.level[s] = 0
	q := []int{s}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for e := f.head[u]; e >= 0; e = f.next[e] {
			if f.cap[e] > flowEps && f.level[f.to[e]] < 0 {
				f.level[f.to[e]] = f.level[u] + 1
				q = append(q, f.to[e])
			}
		}
	}
	return f.level[t] >= 0
}

func (f *flowNet) dfs(u, t int, push float64) float64 {
	if u == t {
		return push
	}
	for ; f.cur[u] >= 0; f.cur[u] = f.next[f.cur[u]] {
		e := f.cur[u]
		v := f.to[e]
		if f.cap[e] > flowEps && f.level[v] == f.level[u]+1 {
			if d := f.dfs(v, t, min(push, f.cap[e])); d > flowEps {
				f.cap[e] -= d
				f.cap[e^1] += d
				return d
			}
		}
	}
	return 0
}

// maxFlow returns the maximum flow from s to t, stopping early once it
// reaches limit.
func (f *flowNet) maxFlow(s, t int, limit float64) float64 {
	total := 0.0
	for total < limit && f.bfs(s, t) {
		copy(f.cur, f.head)
		for {
			d := f.dfs(s, t, math.Inf(1))
			if d <= flowEps {
				break
			}
			total += d
			if total >= limit {
				break
			}
		}
	}
	return total
}

// sourceSide returns the vertices reachable from s in the residual
// network (the source side of a minimum cut after maxFlow).
func (f *flowNet) sourceSide(s int) []bool {
	seen := make([]bool, len(f.head))
	seen[s] = true
	q := []int{s}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for e := f.head[u]; e >= 0; e = f.next[e] {
			if f.cap[e] > flowEps && !seen[f.to[e]] {
				seen[f.to[e]] = true
				q = append(q, f.to[e])
			}
		}
	}
	return seen
}

// Bound is the cut lower bound of a collective on a topology.
type Bound struct {
	// Rate is τ, the smallest over vertex sets S holding some GPUs but
	// not all of the bandwidth leaving S (entering S for reduce-scatter)
	// per GPU in S, GB/s: no algorithm moves a GPU's shard out faster.
	Rate float64
	// Cut is the names of the GPUs of one set S that attains it.
	Cut []string
}

// AlgBW is the bound on algbw (size over time) in GB/s: N shards of
// size/N each cross the cut at Rate per GPU in it.
func (b Bound) AlgBW(n int) float64 { return float64(n) * b.Rate }

// TimeUS is the bound on the time of a call of size bytes (nccl-tests'
// size: the output of allgather, the input of reduce-scatter), in µs.
func (b Bound) TimeUS(size float64, n int) float64 {
	if b.Rate <= 0 {
		return math.Inf(1)
	}
	return size / float64(n) / (b.Rate * 1e3)
}

// AllGatherBound returns the cut bound of allgather on t: for every set
// S of vertices holding some but not all GPUs, the shards of S's GPUs
// must all leave S, so the time is at least |S ∩ GPUs| × shard / B+(S).
// It is found as ForestColl finds its optimum: add a source s with an
// edge of capacity τ to every GPU; τ is feasible when every GPU v
// receives a flow of N τ from s (a cut S ∌ v then has τ |GPUs \ S| +
// B+(S) ≥ N τ). A violated cut lowers τ to B+(S)/|S ∩ GPUs|
// (Dinkelbach's iteration), until none is.
func (t *Topology) AllGatherBound() Bound { return t.cachedBound(false) }

// ReduceScatterBound is the same bound with every link reversed: partial
// sums of S's GPUs' shards must all enter S.
func (t *Topology) ReduceScatterBound() Bound { return t.cachedBound(true) }

// boundCache holds a topology's two bounds, each computed once (a bound
// of 256 GPUs is hundreds of max-flows; synth asks for it at every size).
type boundCache struct {
	once  [2]sync.Once
	bound [2]Bound
}

func (t *Topology) cachedBound(reverse bool) Bound {
	if t.bounds == nil {
		return t.bound(reverse)
	}
	i := 0
	if reverse {
		i = 1
	}
	t.bounds.once[i].Do(func() { t.bounds.bound[i] = t.bound(reverse) })
	b := t.bounds.bound[i]
	b.Cut = append([]string(nil), b.Cut...)
	return b
}

func (t *Topology) bound(reverse bool) Bound {
	n := len(t.GPUs)
	if n < 2 {
		return Bound{Rate: math.Inf(1)}
	}
	isGPU := make([]bool, len(t.Vertices))
	for _, g := range t.GPUs {
		isGPU[g] = true
	}
	// Start from the tightest single-GPU cut.
	tau := math.Inf(1)
	var cut []bool
	for _, g := range t.GPUs {
		b := 0.0
		for i, l := range t.Links {
			if t.used[i] && ((!reverse && l.From == g) || (reverse && l.To == g)) {
				b += l.GBps
			}
		}
		if b < tau {
			tau = b
			cut = make([]bool, len(t.Vertices))
			cut[g] = true
		}
	}
	for iter := 0; iter < 200; iter++ {
		var worse []bool
		for _, v := range t.GPUs {
			f := t.flowNet(reverse, tau)
			s := len(t.Vertices)
			want := float64(n) * tau
			got := f.maxFlow(s, v, want)
			if got < want*(1-1e-9) {
				side := f.sourceSide(s)
				worse = side[:len(t.Vertices)]
				break
			}
		}
		if worse == nil {
			break
		}
		// B+(S)/|S ∩ GPUs| of the violated cut.
		b, k := 0.0, 0
		for i, l := range t.Links {
			if !t.used[i] {
				continue
			}
			from, to := l.From, l.To
			if reverse {
				from, to = to, from
			}
			if worse[from] && !worse[to] {
				b += l.GBps
			}
		}
		for _, g := range t.GPUs {
			if worse[g] {
				k++
			}
		}
		if k == 0 || b/float64(k) >= tau*(1-1e-12) {
			break
		}
		tau, cut = b/float64(k), worse
	}
	bd := Bound{Rate: tau}
	for r, g := range t.GPUs {
		if cut[g] {
			bd.Cut = append(bd.Cut, t.GPUName(r))
		}
	}
	return bd
}

// flowNet builds the network of the bound's test: the links (reversed
// for reduce-scatter) and a source, vertex len(Vertices), with an edge of
// capacity tau to every GPU.
func (t *Topology) flowNet(reverse bool, tau float64) *flowNet {
	s := len(t.Vertices)
	f := newFlowNet(s + 1)
	for i, l := range t.Links {
		if !t.used[i] {
			continue
		}
		if reverse {
			f.addEdge(l.To, l.From, l.GBps)
		} else {
			f.addEdge(l.From, l.To, l.GBps)
		}
	}
	for _, g := range t.GPUs {
		f.addEdge(s, g, tau)
	}
	return f
}
