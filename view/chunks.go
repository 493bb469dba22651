package view

// chunks.go holds the chunk flow: for each step of a timeline, which
// chunks of which rank's buffers each data op moves where. The page
// draws it as small multiples, one rank-by-chunk grid per step.

import (
	"fmt"
	"math"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/timeline"
)

// maxChunkColumns is the most chunk columns the flow draws of one
// buffer; chunks past it are counted in ChunkFlow.Clipped.
const maxChunkColumns = 64

// Place is Count chunks from Chunk of rank Rank's Buffer ("input",
// "output" or "scratch"), in units of the plan's chunk.
type Place struct {
	Rank   int    `json:"rank"`
	Buffer string `json:"buffer"`
	Chunk  int    `json:"chunk"`
	Count  int    `json:"count"`
}

// Move is what one data op (one pipeline iteration of it) writes: the
// chunks at Dst, from Src (several for a reduction, whose sources are
// summed into Dst).
type Move struct {
	// Step is the op's step (ChunkFlow.Steps), Slice its index in the
	// timeline's slices, Op its type ("put", "rre", ...).
	Step   int    `json:"step"`
	Slice  int    `json:"slice"`
	Op     string `json:"op"`
	Reduce bool   `json:"reduce"`
	// From is the rank whose colour the cell takes: the first source on
	// another rank than Dst's, else the first source, else Dst's rank.
	From int `json:"from"`
	// Origin are the ranks whose data the written chunks hold after the
	// write (a sum holds several); Color is the rank whose colour the
	// cell takes: the one origin, else From.
	Origin []int   `json:"origin"`
	Color  int     `json:"color"`
	Dst    Place   `json:"dst"`
	Src    []Place `json:"src"`
	// Source is the op's first .star position, when known.
	Source string `json:"source,omitempty"`
}

// BufferColumns is how many chunk columns of a buffer the flow draws:
// up to the last chunk any op touches.
type BufferColumns struct {
	Name   string `json:"name"`
	Chunks int    `json:"chunks"`
}

// ChunkFlow is where the chunks go, step by step.
type ChunkFlow struct {
	// Steps counts the steps: an op's step is the largest number of
	// cross-thread-block releases (signals, packets, semaphores,
	// barriers: the timeline's flows) on a chain of ops that leads to
	// it, renumbered from 0 over the steps where data moves.
	Steps   int             `json:"steps"`
	Ranks   int             `json:"ranks"`
	Buffers []BufferColumns `json:"buffers"`
	Moves   []Move          `json:"moves"`
	// Clipped counts the moves past maxChunkColumns, not drawn.
	Clipped int `json:"clipped"`
}

// opKey names an op of a thread block as the timeline's slices do.
type opKey struct {
	rank, tb int
	path     string
}

func opPath(op *executor.OpInstance) string {
	if op.Path != "" {
		return op.Path
	}
	return fmt.Sprintf("op %d", op.Index)
}

// Steps returns the step of every slice of tl: the most flows on a chain
// of slices (each thread block's slices in order, and the flows) that
// ends at it.
func Steps(tl *timeline.Timeline) []int {
	n := len(tl.Slices)
	succ := make([][]int, n)
	indeg := make([]int, n)
	weight := map[[2]int]int{}
	edge := func(a, b, w int) {
		k := [2]int{a, b}
		if old, ok := weight[k]; ok {
			weight[k] = max(old, w)
			return
		}
		weight[k] = w
		succ[a] = append(succ[a], b)
		indeg[b]++
	}
	byTB := map[[2]int][]int{}
	for i, s := range tl.Slices {
		k := [2]int{s.Rank, s.TB}
		byTB[k] = append(byTB[k], i)
	}
	for _, idx := range byTB {
		sort.SliceStable(idx, func(a, b int) bool { return tl.Slices[idx[a]].Start < tl.Slices[idx[b]].Start })
		for j := 1; j < len(idx); j++ {
			edge(idx[j-1], idx[j], 0)
		}
	}
	for _, f := range tl.Flows {
		if f.From >= 0 && f.From < n && f.To >= 0 && f.To < n && f.From != f.To {
			edge(f.From, f.To, 1)
		}
	}
	step := make([]int, n)
	queue := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, b := range succ[a] {
			step[b] = max(step[b], step[a]+weight[[2]int{a, b}])
			if indeg[b]--; indeg[b] == 0 {
				queue = append(queue, b)
			}
		}
	}
	// Slices on a cycle (none in a run that happened) keep the steps
	// their acyclic predecessors gave them.
	return step
}

// ChunkFlowOf returns the chunk flow of tl, a timeline of inst.
func ChunkFlowOf(tl *timeline.Timeline, inst *executor.Instance) ChunkFlow {
	cf := ChunkFlow{Ranks: tl.Ranks}
	ops := map[opKey]*executor.OpInstance{}
	var walk func(r, tb int, list []executor.OpInstance)
	walk = func(r, tb int, list []executor.OpInstance) {
		for i := range list {
			ops[opKey{r, tb, opPath(&list[i])}] = &list[i]
			walk(r, tb, list[i].Body)
		}
	}
	for _, ri := range inst.Ranks {
		for _, tb := range ri.TBs {
			walk(ri.Rank, tb.ID, tb.Ops)
		}
	}
	chunk := inst.ChunkBytes
	if chunk == 0 {
		return cf
	}
	// places expands a region (at pipeline offset o, unit u) to the
	// places it names: one per switch group member for a switch operand.
	places := func(rank int, g executor.Region, o, u uint64) []Place {
		n := g.Size
		if u > 0 {
			if n <= o {
				return nil
			}
			n = min(n-o, u)
		}
		if n == 0 {
			return nil
		}
		off := g.Offset + o
		first := int((off + chunk/2) / chunk)
		count := max(int((off+n+chunk/2)/chunk)-first, 1)
		ranks := []int{g.Rank}
		if g.Rank < 0 {
			ranks = nil
			if rank < len(inst.Ranks) && g.Switch >= 0 && g.Switch < len(inst.Ranks[rank].Switches) {
				ranks = inst.Ranks[rank].Switches[g.Switch].Ranks
			}
		}
		var out []Place
		for _, r := range ranks {
			out = append(out, Place{Rank: r, Buffer: g.Buffer.Name(), Chunk: first, Count: count})
		}
		return out
	}
	steps := Steps(tl)
	used := map[int]bool{}
	cols := map[string]int{}
	for i, s := range tl.Slices {
		op := ops[opKey{s.Rank, s.TB, s.Op}]
		if op == nil || len(op.Dst) == 0 {
			continue
		}
		var o, u uint64
		if s.Iteration >= 0 && op.UnitSize > 0 {
			o, u = uint64(s.Iteration)*op.UnitSize, op.UnitSize
		}
		red := op.Type.Reduces()
		var srcs [][]Place
		var all []Place
		for _, g := range op.Src {
			p := places(s.Rank, g, o, u)
			srcs = append(srcs, p)
			all = append(all, p...)
		}
		source := ""
		if len(s.Source) > 0 {
			source = s.Source[0]
		}
		for j, g := range op.Dst {
			from := all
			if op.Type.Pairwise() && len(op.Src) == len(op.Dst) {
				from = srcs[j]
			}
			for _, d := range places(s.Rank, g, o, u) {
				m := Move{Step: steps[i], Slice: i, Op: s.Name, Reduce: red, Dst: d, Source: source}
				for _, p := range from {
					// A reduction's own destination among its sources
					// is the accumulator, not a source drawn.
					if red && p == d {
						continue
					}
					m.Src = append(m.Src, p)
				}
				m.From = d.Rank
				if len(m.Src) > 0 {
					m.From = m.Src[0].Rank
				}
				for _, p := range m.Src {
					if p.Rank != d.Rank {
						m.From = p.Rank
						break
					}
				}
				if d.Chunk+d.Count > maxChunkColumns {
					cf.Clipped++
					continue
				}
				cols[d.Buffer] = max(cols[d.Buffer], d.Chunk+d.Count)
				used[m.Step] = true
				cf.Moves = append(cf.Moves, m)
			}
		}
	}
	// Renumber the steps where data moves from 0.
	var order []int
	for s := range used {
		order = append(order, s)
	}
	sort.Ints(order)
	renum := map[int]int{}
	for i, s := range order {
		renum[s] = i
	}
	for i := range cf.Moves {
		cf.Moves[i].Step = renum[cf.Moves[i].Step]
	}
	cf.Steps = len(order)
	for _, b := range []plan.BufferType{plan.Input, plan.Output, plan.Scratch} {
		if n := cols[b.Name()]; n > 0 {
			cf.Buffers = append(cf.Buffers, BufferColumns{Name: b.Name(), Chunks: n})
		}
	}
	sort.SliceStable(cf.Moves, func(a, b int) bool {
		ma, mb := &cf.Moves[a], &cf.Moves[b]
		if ma.Step != mb.Step {
			return ma.Step < mb.Step
		}
		return tl.Slices[ma.Slice].Start < tl.Slices[mb.Slice].Start
	})
	origins(cf.Moves)
	return cf
}

// origins fills the Origin and Color of moves, in order: a chunk never
// written holds its own rank's data; a write makes its destination hold
// the data of its sources' origins (and, for a reduction, of what the
// destination held).
func origins(moves []Move) {
	type cell struct {
		rank   int
		buffer string
		chunk  int
	}
	held := map[cell]map[int]bool{}
	of := func(p Place, into map[int]bool) {
		for c := p.Chunk; c < p.Chunk+p.Count; c++ {
			h, ok := held[cell{p.Rank, p.Buffer, c}]
			if !ok {
				into[p.Rank] = true
			}
			for r := range h {
				into[r] = true
			}
		}
	}
	for i := range moves {
		m := &moves[i]
		o := map[int]bool{}
		for _, p := range m.Src {
			of(p, o)
		}
		if m.Reduce || len(m.Src) == 0 {
			of(m.Dst, o)
		}
		for c := m.Dst.Chunk; c < m.Dst.Chunk+m.Dst.Count; c++ {
			held[cell{m.Dst.Rank, m.Dst.Buffer, c}] = o
		}
		m.Origin = m.Origin[:0]
		for r := range o {
			m.Origin = append(m.Origin, r)
		}
		sort.Ints(m.Origin)
		m.Color = m.From
		if len(m.Origin) == 1 {
			m.Color = m.Origin[0]
		}
	}
}

// RGB is a colour.
type RGB struct{ R, G, B uint8 }

// Hex is the colour as CSS writes it, #rrggbb.
func (c RGB) Hex() string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// RankColor is the colour the chunk flow gives rank r's data: hues a
// golden angle apart, so that neighbouring ranks differ, at two
// lightnesses.
func RankColor(r int) RGB {
	h := math.Mod(float64(r)*137.508, 360) / 60
	s, l := 0.65, 0.58
	if r%2 == 1 {
		l = 0.46
	}
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var r1, g1, b1 float64
	switch int(h) {
	case 0:
		r1, g1 = c, x
	case 1:
		r1, g1 = x, c
	case 2:
		g1, b1 = c, x
	case 3:
		g1, b1 = x, c
	case 4:
		r1, b1 = x, c
	default:
		r1, b1 = c, x
	}
	m := l - c/2
	to := func(v float64) uint8 { return uint8(math.Round(255 * (v + m))) }
	return RGB{to(r1), to(g1), to(b1)}
}
