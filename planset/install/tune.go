package install

// tune.go sets an installed plan set's size ranges from the cost model
// (install --hw): every plan is predicted at the powers of two of its
// range, the curve is recorded in its index entry, and each plan keeps
// the sizes where it is predicted fastest among the plans that serve the
// same calls (collective, world size, ranks per node, in-place mode), as
// NCCL's tuner picks an algorithm per size. Plans without NVLS compete
// among themselves, so that machines without NVLS keep a plan for every
// size; NVLS plans against all.

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/planset"
)

// TuneOptions configure the size ranges set from predictions.
type TuneOptions struct {
	Hardware *model.Profile
	Model    model.Options
	DType    executor.ElemType
	// MinSize and MaxSize bound the sizes predicted (default 1 KiB and
	// 1 GiB); the fastest plan at the smallest (largest) size keeps its
	// range below (above) them.
	MinSize, MaxSize uint64
}

// tuneGroup is the key of the plans that serve the same calls.
type tuneGroup struct {
	collective              string
	worldSize, ranksPerNode int
	inPlace                 bool
}

// Tune predicts the plans of idx (their files in dir) on o.Hardware,
// records each curve in its entry, and narrows each entry's size range to
// the sizes where it is predicted fastest in its group. It returns the
// index without the plans predicted fastest nowhere, and their files.
// Plans the hardware cannot run (NVLS plans on hardware without NVLS) and
// alltoallv plans (sized per call) keep their ranges, with no curve.
func Tune(idx *planset.Index, dir string, o TuneOptions) (*planset.Index, []string, error) {
	if o.DType == 0 {
		o.DType = executor.Float16
	}
	if o.MinSize == 0 {
		o.MinSize = 1 << 10
	}
	if o.MaxSize == 0 {
		o.MaxSize = 1 << 30
	}
	o.Model.NoTimeline = true
	launch := "graph"
	if o.Model.PlainLaunch {
		launch = "kernel"
	}
	out := &planset.Index{Version: idx.Version, Plans: append([]planset.Entry(nil), idx.Plans...)}
	groups := map[tuneGroup][]int{}
	for i := range out.Plans {
		e := &out.Plans[i]
		if e.Collective == plan.AllToAllVCollective || (e.NVLS && !o.Hardware.NVLS) {
			continue
		}
		if nw := o.Model.Network; nw != nil && (nw.Ranks != e.WorldSize || e.RanksPerNode != nw.Ranks/max(1, nodesOf(nw))) {
			continue // a topology's model predicts only plans of its shape
		}
		data, err := executor.ReadPlanFile(filepath.Join(dir, e.File))
		if err != nil {
			return nil, nil, err
		}
		pl, err := plan.Load(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.File, err)
		}
		p := &planset.Prediction{Hardware: o.Hardware.Name, Launch: launch, DType: o.DType.Name()}
		var sizes []uint64
		for s := o.MinSize; s <= o.MaxSize && s != 0; s *= 2 {
			if s >= e.MinMessageSize && s <= e.MaxMessageSize {
				sizes = append(sizes, s)
			}
		}
		mo := o.Model
		mo.RanksPerNode = e.RanksPerNode
		// Sizes the plan's chunking rejects are skipped; a plan that
		// deadlocks in the simulation is an error.
		pts, _, err := model.Sweep(pl, sizes, o.DType, e.InPlace, o.Hardware, mo)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.File, err)
		}
		for _, pt := range pts {
			p.Sizes = append(p.Sizes, pt.Size)
			p.TimesUS = append(p.TimesUS, pt.Time)
		}
		if len(p.Sizes) == 0 {
			continue
		}
		e.Predicted = p
		g := tuneGroup{e.Collective, e.WorldSize, e.RanksPerNode, e.InPlace}
		groups[g] = append(groups[g], i)
	}
	drop := map[int]bool{}
	for _, members := range groups {
		// Plans without NVLS compete among themselves (they serve the
		// machines without it); NVLS plans against every plan.
		var plain, nvls []int
		for _, i := range members {
			if out.Plans[i].NVLS {
				nvls = append(nvls, i)
			} else {
				plain = append(plain, i)
			}
		}
		tuneRanges(out.Plans, plain, plain, drop)
		tuneRanges(out.Plans, members, nvls, drop)
	}
	var dropped []string
	kept := out.Plans[:0]
	for i, e := range out.Plans {
		if drop[i] {
			dropped = append(dropped, e.File)
			continue
		}
		kept = append(kept, e)
	}
	out.Plans = kept
	return out, dropped, nil
}

// tuneRanges sets the ranges of the entries targets (indices into es)
// where they are predicted fastest among members; targets fastest
// nowhere are added to drop.
func tuneRanges(es []planset.Entry, members, targets []int, drop map[int]bool) {
	times := map[uint64]map[int]float64{}
	for _, i := range members {
		p := es[i].Predicted
		for k, s := range p.Sizes {
			if times[s] == nil {
				times[s] = map[int]float64{}
			}
			times[s][i] = p.TimesUS[k]
		}
	}
	sizes := make([]uint64, 0, len(times))
	for s := range times {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(a, b int) bool { return sizes[a] < sizes[b] })
	winner := make([]int, len(sizes))
	for k, s := range sizes {
		best := -1
		for _, i := range members { // members are in index order: ties go to the first
			if t, ok := times[s][i]; ok && (best < 0 || t < times[s][best]) {
				best = i
			}
		}
		winner[k] = best
	}
	type span struct{ first, last int } // indices into sizes
	spans := map[int]*span{}
	for k, w := range winner {
		if sp, ok := spans[w]; ok {
			sp.last = k
		} else {
			spans[w] = &span{k, k}
		}
	}
	n := len(members)
	for _, i := range targets {
		e := &es[i]
		sp, ok := spans[i]
		if !ok {
			drop[i] = true
			continue
		}
		lo, hi := e.MinMessageSize, e.MaxMessageSize
		if sp.first > 0 {
			lo = max(lo, sizes[sp.first-1]+1)
		}
		if sp.last < len(sizes)-1 {
			hi = min(hi, sizes[sp.last+1]-1)
		}
		e.MinMessageSize, e.MaxMessageSize = lo, hi
		e.Predicted.Range = fmt.Sprintf("predicted fastest of %d plan(s) from %d to %d bytes", n, sizes[sp.first], sizes[sp.last])
		for k := sp.first; k <= sp.last; k++ {
			if winner[k] != i {
				e.Predicted.Range += fmt.Sprintf(" (not at %d: an overlap)", sizes[k])
				break
			}
		}
	}
}

// nodesOf is the number of nodes of a network.
func nodesOf(nw *model.Network) int {
	nodes := map[int]bool{}
	for r := 0; r < nw.Ranks; r++ {
		nodes[nw.Node(r)] = true
	}
	return len(nodes)
}
