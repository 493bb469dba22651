// This file holds Synthesize: pack trees, choose chunks, instances and
// pipeline units by the model, write the program, verify it.

package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/topo"
)

// Options configure a synthesis.
type Options struct {
	Collective Collective
	// Topology is the machine; TopoName and HWName how the user named it
	// and its GPU profile (for the header and the plan's tags).
	Topology         *topo.Topology
	TopoName, HWName string
	// Command is the command line that wrote the file (for the header).
	Command string
	// Chunks are the chunk counts per shard tried (nil: 16, 8, 4, 2, 1
	// and, on one node, the most that give every chunk a thread block of
	// its own: MaxBlocks over the ranks).
	Chunks []int
	// Instances and Units are the instances and pipeline units tried
	// (nil: 1, 2, 4, 8 and on one node 16, within MaxBlocks, and 0,
	// 256 KiB, 64 KiB, 1 MiB; the second and third units judge the chunk
	// counts).
	Instances []int
	Units     []uint64
	// Sizes are the message sizes the variants are chosen at and the
	// report covers, ascending (nil: 1 KiB to 256 MiB by 4).
	Sizes []uint64
	// VerifyBytes bounds the sizes of the CPU-backend runs (0: 1 MiB).
	VerifyBytes uint64
	// Rounds of multiplicative weights for the pool of trees (0: 40).
	Rounds int
	// TreesPerShard bounds the distinct trees of a shard (0: MaxBlocks
	// over the ranks).
	TreesPerShard int
	// MaxBlocks bounds the thread blocks per rank, trees times instances
	// (0: the GPU profile's SMs).
	MaxBlocks int

	// fillChunks: Chunks were defaulted, and the count that fills
	// MaxBlocks is tried too; moreInstances: Instances were defaulted,
	// and on one node 16 are tried too.
	fillChunks, moreInstances bool
}

// hows are the ways of moving data along the trees (Packing.How) that
// the chunk counts are judged with (all of them) and that the sets of
// the small sizes are tried with (small: the unpaced ones: a credit per
// piece costs latency that only long pipelines hide).
func hows(c Collective, small bool) []string {
	switch {
	case c == AllGather:
		return []string{"get", "put"}
	case c == ReduceScatter && small:
		return []string{"free"}
	case c == ReduceScatter:
		return []string{"paced", "free"}
	case small:
		return []string{"free put", "free get"}
	}
	return []string{"paced get", "paced put", "free get", "free put"}
}

// Result is a verified program.
type Result struct {
	// Star is the .star file; Name its plans' name prefix.
	Star []byte
	Name string
	// Programs are its plans, one per variant, verified.
	Programs []Compiled
	Variants []Variant
	// Packing is the tree set of the largest sizes; Packings every set
	// the variants use.
	Packing  *Packing
	Packings []*Packing
	// Bound is the cut lower bound of the call's time (µs) at a size;
	// BoundAlgBW the algbw it allows at large sizes (GB/s).
	BoundAlgBW float64
	// Points are the predictions at Options.Sizes: the best variant's.
	Points []Point
	// Largest is the prediction at the largest size of the fastest
	// program synthesis found there, whether or not a variant serves
	// that size (a bundled plan may be predicted faster there,
	// docs/synthesis.md §4.3);
	// its Variant names the candidate (chunks, instances, unit).
	Largest Point
	// Verified are the sizes each program ran at on the CPU backend.
	Verified map[string][]uint64
	// Elapsed is how long synthesis took.
	Elapsed time.Duration
}

// Point is one size of the prediction.
type Point struct {
	Size    uint64
	Variant string
	TimeUS  float64
	AlgBW   float64
	BusBW   float64
	// BoundUS is the cut lower bound's time at this size.
	BoundUS float64
}

// BoundTime returns the cut lower bound of the collective's time (µs) at
// size bytes on tp, and the algbw it allows; allreduce's is the sum of
// reduce-scatter's and allgather's.
func BoundTime(c Collective, tp *topo.Topology, size float64) (float64, float64) {
	n := tp.NumGPUs()
	ag, rs := tp.AllGatherBound(), tp.ReduceScatterBound()
	switch c {
	case AllGather:
		return ag.TimeUS(size, n), ag.AlgBW(n)
	case ReduceScatter:
		return rs.TimeUS(size, n), rs.AlgBW(n)
	}
	t := ag.TimeUS(size, n) + rs.TimeUS(size, n)
	return t, size / 1e3 / t
}

func (o *Options) defaults() {
	if o.Chunks == nil {
		o.Chunks = []int{16, 8, 4, 2, 1}
		o.fillChunks = true
	}
	if o.Instances == nil {
		o.Instances = []int{1, 2, 4, 8}
		o.moreInstances = true
	}
	if o.Units == nil {
		o.Units = []uint64{0, 256 << 10, 64 << 10, 1 << 20}
	}
	if o.Sizes == nil {
		for s := uint64(1 << 10); s <= 256<<20; s <<= 2 {
			o.Sizes = append(o.Sizes, s)
		}
	}
	if o.VerifyBytes == 0 {
		o.VerifyBytes = 1 << 20
	}
	if o.Rounds == 0 {
		o.Rounds = 40
	}
	if o.MaxBlocks == 0 {
		o.MaxBlocks = 64
		if o.Topology != nil && o.Topology.HW != nil {
			o.MaxBlocks = int(o.Topology.HW.SMs.Value)
		}
	}
}

// ErrSynth is wrapped by every failure of a program synth wrote: a bug of
// synth, not of its input.
var ErrSynth = errors.New("synth: a synthesized program failed its verification (a bug in synth)")

// Synthesize writes, verifies and models the program of o.
func Synthesize(ctx context.Context, o Options) (*Result, error) {
	res, err := synthesize(ctx, o)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("synth %s on %s: stopped: %w", o.Collective, o.TopoName, context.Cause(ctx))
	}
	return res, err
}

func synthesize(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	o.defaults()
	tp := o.Topology
	n := tp.NumGPUs()
	if n < 2 {
		return nil, fmt.Errorf("%s: %d GPU: a collective needs at least 2", o.TopoName, n)
	}
	hierarchical := tp.Nodes > 1 && tp.Base != nil
	if n > o.MaxBlocks && !hierarchical {
		return nil, fmt.Errorf("%s: %d GPUs: one tree per shard is %d thread blocks per rank, over the budget of %d", o.TopoName, n, n, o.MaxBlocks)
	}
	hw, err := ModelProfile(tp.HW)
	if err != nil {
		return nil, err
	}
	net := Network(tp)
	mopts := model.Options{Network: net, NoTimeline: true}
	name := "synth_" + o.Collective.String() + "_" + ident(o.TopoName)
	if tp.Nodes > 1 {
		name += fmt.Sprintf("_x%d", tp.Nodes)
	}
	nodes := make([]int, n)
	for r := range nodes {
		nodes[r] = tp.NodeOf(r)
	}
	reduce := o.Collective != AllGather
	// Every size a multiple of what any chunk count and instances tried
	// divides (16-byte elements of 16 ranks' worth).
	q := uint64(n) * 16 * 16
	for _, c := range o.Chunks {
		q = lcm(q, uint64(n*c)*16)
	}
	for _, i := range o.Instances {
		q = lcm(q, uint64(n*i)*16*16)
	}
	sizes := make([]uint64, 0, len(o.Sizes))
	for _, s := range o.Sizes {
		s = (s + q - 1) / q * q
		if len(sizes) == 0 || sizes[len(sizes)-1] != s {
			sizes = append(sizes, s)
		}
	}
	o.Sizes = sizes
	if hierarchical {
		return synthesizeHier(ctx, o, start, name, nodes)
	}
	_, boundBW := BoundTime(o.Collective, tp, 1<<30)

	// Tree sets: the chunk count whose program (one instance, the second
	// pipeline unit) is fastest at the largest size, among those within
	// the executor's op limit; one tree per shard in one chunk (the fewest
	// ops); one star per shard where every rank reaches every other (the
	// fewest hops): the last two for small sizes.
	largest := o.Sizes[len(o.Sizes)-1]
	maxTrees := max(1, o.MaxBlocks/n)
	if o.TreesPerShard > 0 {
		maxTrees = o.TreesPerShard
	}
	build := func(pk *Packing, inst int, unit uint64) ([]Compiled, error) {
		g := &program{coll: o.Collective, name: name, worldSize: n, ranksPerNode: tp.GPUsPerNode, nodes: nodes, packs: []*Packing{pk}, topoName: o.TopoName,
			variants: []Variant{{Suffix: "v", Min: 0, Max: ^uint64(0), Instances: inst, Unit: unit}}}
		return compile(ctx, name+".star", g.star(), nil)
	}
	// The chunk counts are judged at the second and third units (256 and
	// 64 KiB by default): the pipelines of a large packing's chunks.
	probeUnits := o.Units[min(1, len(o.Units)-1):min(3, len(o.Units))]
	chunkCounts := o.Chunks
	if fill := o.MaxBlocks / n; o.fillChunks && fill > 1 && !slices.Contains(chunkCounts, fill) && largest%(uint64(n*fill)*16) == 0 {
		chunkCounts = append([]int{fill}, chunkCounts...)
	}
	var large *Packing
	bestTime := math.Inf(1)
	for _, c := range chunkCounts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A thread block per chunk where they fit, else per tree.
		lay := Pack(tp, reduce, c, maxTrees, o.Rounds)
		if n*c <= o.MaxBlocks {
			lay = perChunk(lay)
		}
		// Every shard crosses the busiest link at its rate at best: a
		// packing whose bound is no faster than the best program so
		// far cannot win, and is neither compiled nor modelled.
		if lb := float64(largest) / float64(n) / 1e3 / lay.Rate; lb >= bestTime {
			continue
		}
		for _, how := range hows(o.Collective, false) {
			for _, unit := range probeUnits {
				q := withHow(lay, how)
				progs, err := build(q, 1, unit)
				var ce *CheckError
				if errors.As(err, &ce) && ce.opLimit() {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("%w: %d chunks, %q: %v", ErrSynth, c, how, err)
				}
				pts, _, err := model.Sweep(progs[0].Plan, []uint64{largest}, executor.Float16, true, hw, mopts)
				if err != nil {
					return nil, fmt.Errorf("%w: model: %v", ErrSynth, err)
				}
				if len(pts) == 1 && pts[0].Time < bestTime {
					large, bestTime = q, pts[0].Time
				}
			}
		}
	}
	if large == nil {
		return nil, fmt.Errorf("%s: no chunk count of %v gives programs within the executor's limits (64 ops per thread block) at %d bytes", o.TopoName, o.Chunks, largest)
	}
	packs := []*Packing{large}
	// The large packing unpaced, too: at middle sizes a credit per piece
	// costs more than it saves.
	for _, how := range hows(o.Collective, true) {
		if how != large.How {
			packs = append(packs, withHow(large, how))
		}
	}
	oneTree := map[int]bool{} // the sets that run whole chunks only
	if large.Chunks > 1 {
		one := Pack(tp, reduce, 1, 1, o.Rounds)
		for _, how := range hows(o.Collective, true) {
			oneTree[len(packs)] = true
			packs = append(packs, withHow(one, how))
		}
	}
	if st := Star(tp, reduce); st != nil {
		for _, how := range hows(o.Collective, true) {
			packs = append(packs, withHow(st, how))
		}
	}
	// Then instances and pipeline units, at every size, modelled
	// concurrently.
	type job struct {
		k  key
		pk *Packing
	}
	var jobs []job
	for si, pk := range packs {
		trees := 0 // thread blocks per rank
		for _, ts := range pk.Trees {
			trees += len(ts)
		}
		insts := o.Instances
		if o.moreInstances {
			insts = append(slices.Clone(insts), 16)
		}
		for _, inst := range insts {
			if inst > 1 && inst*trees > o.MaxBlocks {
				continue
			}
			for _, unit := range o.Units {
				if oneTree[si] && unit > 0 {
					continue // the one-tree set runs whole chunks
				}
				jobs = append(jobs, job{key{si, inst, unit}, pk})
			}
		}
	}
	ks := make([]key, len(jobs))
	for i, j := range jobs {
		ks[i] = j.k
	}
	pts, err := modelCandidates(ctx, name, ks, func(i int) []byte {
		g := &program{coll: o.Collective, name: name, worldSize: n, ranksPerNode: tp.GPUsPerNode, nodes: nodes, packs: []*Packing{jobs[i].pk}, topoName: o.TopoName,
			variants: []Variant{{Suffix: "v", Min: 0, Max: ^uint64(0), Instances: jobs[i].k.inst, Unit: jobs[i].k.unit}}}
		return g.star()
	}, nil, o.Sizes, hw, mopts)
	if err != nil {
		return nil, err
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("%s: no program within the executor's limits of a thread block", o.TopoName)
	}
	largestPoint := bestAt(pts, largest, packs)
	variants, packs := chooseVariants(pts, o.Sizes, packs)
	// Where a bundled plan serving the same call is predicted faster,
	// the variants' ranges leave those sizes out: select never takes
	// the program where it loses.
	best, err := BestBundled(ctx, o.Collective, tp, o.Sizes)
	if err != nil {
		return nil, fmt.Errorf("%s: the bundled plans: %w", o.TopoName, err)
	}
	variants = trimRanges(variants, pts, o.Sizes, best)
	g := &program{coll: o.Collective, name: name, worldSize: n, ranksPerNode: tp.GPUsPerNode, nodes: nodes, packs: packs,
		topoName: o.TopoName, variants: variants}
	res := &Result{Name: name, Variants: variants, Packing: packs[variants[len(variants)-1].Set], Packings: packs, BoundAlgBW: boundBW, Verified: map[string][]uint64{}, Largest: largestPoint}
	res.Largest.BoundUS, _ = BoundTime(o.Collective, tp, float64(largest))
	// The predictions of the variants, each at its own sizes.
	for _, s := range o.Sizes {
		for _, v := range variants {
			if s < v.Min || s > v.Max {
				continue
			}
			for _, p := range pts[key{v.orig, v.Instances, v.Unit}] {
				if p.Size == s {
					bt, _ := BoundTime(o.Collective, tp, float64(s))
					res.Points = append(res.Points, Point{Size: s, Variant: v.Suffix, TimeUS: p.Time, AlgBW: p.AlgBW, BusBW: p.BusBW, BoundUS: bt})
				}
			}
		}
	}
	g.header = header(o, res, tp)
	text := g.star()
	progs, err := compile(ctx, name+".star", text, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSynth, err)
	}
	if len(progs) != len(variants) {
		return nil, fmt.Errorf("%w: %d programs for %d variants", ErrSynth, len(progs), len(variants))
	}
	for i, p := range progs {
		sizes, err := runChecked(ctx, p.Plan, max(o.VerifyBytes, variants[i].Min), 3)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSynth, err)
		}
		res.Verified[p.Name] = sizes
		// Modelled in its own range (the choice above modelled it too).
		if _, _, err := model.Sweep(p.Plan, sizes, executor.Float16, true, hw, mopts); err != nil {
			return nil, fmt.Errorf("%w: model %s: %v", ErrSynth, p.Name, err)
		}
	}
	res.Star, res.Programs = text, progs
	res.Elapsed = time.Since(start)
	return res, nil
}

// bestAt is the fastest candidate's point at size (Variant: its
// chunks, instances and unit).
func bestAt(pts map[key][]model.Point, size uint64, packs []*Packing) Point {
	keys := sortedKeys(pts, false)
	var out Point
	for _, k := range keys {
		for _, p := range pts[k] {
			if p.Size == size && (out.TimeUS == 0 || p.Time < out.TimeUS) {
				out = Point{Size: size, Variant: candidateName(packs[k.set].Chunks, k.inst, k.unit) + " " + packs[k.set].How, TimeUS: p.Time, AlgBW: p.AlgBW, BusBW: p.BusBW}
			}
		}
	}
	return out
}

// sortedKeys returns the candidates of pts by tree set (descending with
// setsDown), then instances, then unit.
func sortedKeys(pts map[key][]model.Point, setsDown bool) []key {
	keys := make([]key, 0, len(pts))
	for k := range pts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.set != b.set {
			return (a.set < b.set) != setsDown
		}
		if a.inst != b.inst {
			return a.inst < b.inst
		}
		return a.unit < b.unit
	})
	return keys
}

// candidateName is a variant's name suffix: chunks, instances, unit.
func candidateName(chunks, inst int, unit uint64) string {
	u := "whole"
	if unit > 0 {
		u = fmt.Sprintf("u%dk", unit>>10)
	}
	return fmt.Sprintf("c%d_i%d_%s", chunks, inst, u)
}

// key names one candidate program: tree set, instances, unit.
type key struct {
	set, inst int
	unit      uint64
}

// chooseVariants picks, at each size, the candidate of least predicted
// time (the simpler one unless another is 3% faster) and merges
// neighbouring sizes of one choice into a variant whose range reaches
// halfway (in log) to the next size; it returns the variants and the
// tree sets they use, renumbered.
func chooseVariants(pts map[key][]model.Point, sizes []uint64, packs []*Packing) ([]Variant, []*Packing) {
	keys := sortedKeys(pts, true) // the small sizes' sets first: the simplest
	var picks []key
	var at []uint64
	for _, s := range sizes {
		bk, bt := key{set: -1}, math.Inf(1)
		for _, k := range keys {
			for _, p := range pts[k] {
				if p.Size == s && p.Time < bt*0.97 {
					bk, bt = k, p.Time
				}
			}
		}
		if bk.set >= 0 {
			picks = append(picks, bk)
			at = append(at, s)
		}
	}
	var out []Variant
	for i, k := range picks {
		if len(out) > 0 && out[len(out)-1].orig == k.set && out[len(out)-1].Instances == k.inst && out[len(out)-1].Unit == k.unit {
			continue
		}
		if len(out) > 0 {
			cut := uint64(math.Sqrt(float64(at[i-1]) * float64(at[i])))
			out[len(out)-1].Max = cut - 1
			out = append(out, Variant{Min: cut})
		} else {
			out = append(out, Variant{Min: 0})
		}
		v := &out[len(out)-1]
		v.Instances, v.Unit, v.orig = k.inst, k.unit, k.set
	}
	out[len(out)-1].Max = ^uint64(0)
	// Keep the sets used, in order of first use.
	renum := map[int]int{}
	var used []*Packing
	for i := range out {
		if _, ok := renum[out[i].orig]; !ok {
			renum[out[i].orig] = len(used)
			used = append(used, packs[out[i].orig])
		}
		out[i].Set = renum[out[i].orig]
		out[i].Suffix = candidateName(packs[out[i].orig].Chunks, out[i].Instances, out[i].Unit)
		if len(out) > 1 {
			out[i].Suffix = fmt.Sprintf("r%d_%s", i, out[i].Suffix)
		}
	}
	return out, used
}

// trimRanges narrows the variants to the longest run of sizes at which
// no bundled plan (best, at each of sizes) is predicted faster than the
// variant serving the size: the run holding the largest size where there
// is one. Where every size loses, the largest alone is kept. Variants
// outside the run are dropped; the sizes are cut halfway (in log)
// between a kept size and a dropped one.
func trimRanges(variants []Variant, pts map[key][]model.Point, sizes []uint64, best []Bundled) []Variant {
	lose := make([]bool, len(sizes))
	for i, s := range sizes {
		if best[i].Name == "" {
			continue
		}
		for _, v := range variants {
			if s < v.Min || s > v.Max {
				continue
			}
			for _, p := range pts[key{v.orig, v.Instances, v.Unit}] {
				if p.Size == s && best[i].TimeUS < p.Time*(1-1e-6) {
					lose[i] = true
				}
			}
		}
	}
	lo, hi := len(sizes)-1, len(sizes)-1 // the run kept
	bestLen := 0
	for i := 0; i < len(sizes); {
		if lose[i] {
			i++
			continue
		}
		j := i
		for j+1 < len(sizes) && !lose[j+1] {
			j++
		}
		if j == len(sizes)-1 || (lose[len(sizes)-1] && j-i+1 >= bestLen) {
			lo, hi, bestLen = i, j, j-i+1
		}
		i = j + 1
	}
	cut := func(a, b uint64) uint64 { return uint64(math.Sqrt(float64(a) * float64(b))) }
	minSize, maxSize := uint64(0), ^uint64(0)
	if lo > 0 {
		minSize = cut(sizes[lo-1], sizes[lo])
	}
	if hi < len(sizes)-1 {
		maxSize = cut(sizes[hi], sizes[hi+1]) - 1
	}
	var out []Variant
	for _, v := range variants {
		if v.Max < minSize || v.Min > maxSize {
			continue
		}
		v.Min, v.Max = max(v.Min, minSize), min(v.Max, maxSize)
		out = append(out, v)
	}
	return out
}

// header is the comment at the top of the file.
func header(o Options, res *Result, tp *topo.Topology) []string {
	n := tp.NumGPUs()
	pk := res.Packing
	var h []string
	add := func(format string, args ...any) { h = append(h, fmt.Sprintf(format, args...)) }
	add("%s: %s for %s (GPU profile %s), %d GPUs", res.Name, o.Collective, o.TopoName, o.HWName, n)
	if tp.Nodes > 1 {
		h[0] += fmt.Sprintf(" in %d nodes of %d", tp.Nodes, tp.GPUsPerNode)
	}
	add("written by `%s` (docs/synthesis.md).", o.Command)
	add("")
	kind := "broadcast trees: each chunk goes from its rank down a spanning tree, every rank forwarding it to its children"
	if pk.Reduce {
		kind = "reduction trees: each chunk's partial sums go up a spanning tree to the rank that owns it, every rank adding its children's sums to its own"
		if o.Collective == AllReduce {
			kind += ", then the sums come back down the same tree"
		}
	}
	for _, l := range wrap(fmt.Sprintf("Method: every rank's shard is cut into chunks carried by %s.", kind), 78) {
		add("%s", l)
	}
	add("The trees were packed by multiplicative weights over the links (a minimum-cost")
	add("arborescence per shard per round) and rounded to whole chunks; the largest")
	add("sizes' set sustains %.2f GB/s per shard on the busiest link, %.1f%% of the cut", pk.Rate, 100*pk.Rate/boundRate(o.Collective, tp))
	add("bound's %.2f.", boundRate(o.Collective, tp))
	add("")
	for si, ps := range res.Packings {
		add("Tree set %d, %d chunks per shard, moved %q (rank: chunks, then the", si, ps.Chunks, ps.How)
		add("tree's edges parent>child; \"(k blocks)\": a thread block per chunk):")
		for r, ts := range ps.Trees {
			for i := 0; i < len(ts); {
				// Trees repeated in a row (a thread block per chunk) are
				// listed once.
				j, chunks := i, 0
				for ; j < len(ts) && ts[j].key() == ts[i].key(); j++ {
					chunks += ts[j].Chunks
				}
				var e []string
				for v, p := range ts[i].Parent {
					if p >= 0 {
						e = append(e, fmt.Sprintf("%d>%d", p, v))
					}
				}
				blocks := ""
				if j-i > 1 {
					blocks = fmt.Sprintf(" (%d blocks)", j-i)
				}
				add("  %d: %d%s: %s", r, chunks, blocks, strings.Join(e, " "))
				i = j
			}
		}
	}
	add("")
	add("Predicted on the topology (mscclgo model --topo %s --hw %s, float16, in place):", o.TopoName, o.HWName)
	add("  %12s %12s %10s %10s %12s %9s  %s", "size (B)", "time (us)", "algbw", "busbw", "bound (us)", "of bound", "variant")
	for _, p := range res.Points {
		add("  %12d %12.2f %10.2f %10.2f %12.2f %8.1f%%  %s", p.Size, p.TimeUS, p.AlgBW, p.BusBW, p.BoundUS, 100*p.BoundUS/p.TimeUS, p.Variant)
	}
	add("Cut lower bound: algbw %.2f GB/s (the links a set of GPUs exchanges data over, %s).", res.BoundAlgBW, boundCut(o.Collective, tp))
	add("")
	add("Each variant below was evaluated, checked, run on the CPU backend (results")
	add("compared, races and deadlocks looked for) and modelled before this file was")
	add("written.")
	return h
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) []string {
	var out []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			out = append(out, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(out, line)
}

func boundRate(c Collective, tp *topo.Topology) float64 {
	if c == AllGather {
		return tp.AllGatherBound().Rate
	}
	return tp.ReduceScatterBound().Rate
}

func boundCut(c Collective, tp *topo.Topology) string {
	b := tp.AllGatherBound()
	if c != AllGather {
		b = tp.ReduceScatterBound()
	}
	if len(b.Cut) > 6 {
		return fmt.Sprintf("binding on a set of %d GPUs", len(b.Cut))
	}
	return "binding on " + strings.Join(b.Cut, " ")
}

func lcm(a, b uint64) uint64 {
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}

// ident turns a name into a plan-name fragment.
func ident(s string) string {
	s = strings.TrimSuffix(strings.TrimSuffix(s, ".txt"), ".json")
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// modelCandidates compiles, checks and models every candidate (the .star
// source star(i) of ks[i], or its plan in known, compiled already) on
// GOMAXPROCS workers, and returns the swept points of each one within
// the executor's limits of a thread block (a candidate over them is left
// out); any other failure is a bug of synth.
func modelCandidates(ctx context.Context, name string, ks []key, star func(i int) []byte, known map[key]*plan.Plan, sizes []uint64, hw *model.Profile, mopts model.Options) (map[key][]model.Point, error) {
	results := make([][]model.Point, len(ks))
	errs := make([]error, len(ks))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(ks)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := ks[i]
				p := known[k]
				if p == nil {
					progs, err := compileChecked(ctx, name+".star", star(i), nil, false)
					var ce *CheckError
					if errors.As(err, &ce) && ce.opLimit() {
						continue // over a thread block's limits: not a candidate
					}
					if err != nil {
						errs[i] = fmt.Errorf("%w: %d instances, unit %d: %v", ErrSynth, k.inst, k.unit, err)
						continue
					}
					p = progs[0].Plan
				}
				var err error
				if results[i], err = sweep(p, sizes, k.unit > 0, hw, mopts); err != nil {
					errs[i] = fmt.Errorf("%w: model: %v", ErrSynth, err)
				}
			}
		}()
	}
	for i := range ks {
		next <- i
	}
	close(next)
	wg.Wait()
	pts := map[key][]model.Point{}
	for i, k := range ks {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if results[i] != nil {
			pts[k] = results[i]
		}
	}
	return pts, nil
}

// sweep is model.Sweep of p at sizes (float16, in place), sizes p cannot
// run at left out; a pipelined candidate is left out, too, at the sizes
// where its pipelines run one iteration (singlePass): there it is the
// program of whole chunks, which is a candidate of its own.
func sweep(p *plan.Plan, sizes []uint64, pipelined bool, hw *model.Profile, mopts model.Options) ([]model.Point, error) {
	if !pipelined {
		pts, _, err := model.Sweep(p, sizes, executor.Float16, true, hw, mopts)
		return pts, err
	}
	// From the largest size down: a pipeline's iterations grow with the
	// size, so below the first size that runs once every size does.
	sorted := slices.Sorted(slices.Values(sizes))
	var pts []model.Point
	for i := len(sorted) - 1; i >= 0; i-- {
		s := sorted[i]
		l, err := executor.PlanLayout(p, s, executor.Float16, true)
		if err != nil {
			continue
		}
		inst, err := executor.Instantiate(p, l.Sizes)
		if err != nil {
			continue
		}
		if singlePass(inst) {
			break
		}
		res, err := model.Predict(inst, hw, mopts)
		if err != nil {
			return pts, fmt.Errorf("%s at %d bytes: %w", p.Name, s, err)
		}
		pt := model.Point{Size: s, Time: res.Time, Result: res}
		if res.Time > 0 {
			pt.AlgBW = float64(s) / 1e3 / res.Time
			pt.BusBW = pt.AlgBW * l.BusFactor()
		}
		pts = append(pts, pt)
	}
	slices.Reverse(pts)
	return pts, nil
}
