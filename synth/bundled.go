// This file compares a synthesized program with the bundled plans that
// serve the same call (the default set of package algorithms), modelled
// on the same topology.

package synth

import (
	"context"
	"math"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
	"github.com/mscclgo/mscclgo/topo"
)

// Bundled is the best bundled plan at one size.
type Bundled struct {
	Size   uint64
	Name   string // "" where none serves the call
	TimeUS float64
}

// BestBundled returns, at each size, the bundled plan of the default set
// that serves the collective on tp's ranks (same world size and ranks per
// node, in place) with the least time the model predicts on tp's links.
// Plans the topology cannot run (NVLS without a switch, a peer reached
// only through another GPU) are left out.
func BestBundled(ctx context.Context, c Collective, tp *topo.Topology, sizes []uint64) ([]Bundled, error) {
	hw, err := ModelProfile(tp.HW)
	if err != nil {
		return nil, err
	}
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		return nil, err
	}
	out := make([]Bundled, len(sizes))
	for i, s := range sizes {
		out[i] = Bundled{Size: s, TimeUS: math.Inf(1)}
	}
	opts := model.Options{Network: Network(tp), NoTimeline: true}
	src := starlib.FSSource(algorithms.FS, "algorithms")
	for _, job := range jobs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := starlib.Eval(src, job.Algorithm+".star", starlib.Options{Defines: job.Params, Context: ctx})
		if err != nil {
			return nil, err
		}
		for _, prog := range res.Programs {
			spec := prog.Spec()
			if spec == nil || spec.WorldSize != tp.NumGPUs() || spec.RanksPerNode != tp.GPUsPerNode || !spec.InPlace {
				continue
			}
			data, err := prog.Plan()
			if err != nil {
				return nil, err
			}
			p, err := plan.Load(data)
			if err != nil {
				return nil, err
			}
			if p.Collective != c.String() {
				continue
			}
			pts, _, err := model.Sweep(p, sizes, executor.Float16, true, hw, opts)
			if err != nil {
				continue // the topology cannot run it
			}
			for _, pt := range pts {
				for i := range out {
					if out[i].Size == pt.Size && pt.Time < out[i].TimeUS {
						out[i].Name, out[i].TimeUS = p.Name, pt.Time
					}
				}
			}
		}
	}
	return out, nil
}
