// This file predicts variable-size (alltoallv) plans: the plan is bound
// to one call's counts (executor.NewVarPlan, Bind) and the bound instance
// is simulated as any other.

package model

import (
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// CountsPoint is the prediction of an alltoallv plan for one call's
// counts: Bytes sent in all (every rank's blocks, its own included),
// Time per call in µs, and AlgBW = Bytes/Time in GB/s, as mscclgo run
// --counts reports them.
type CountsPoint struct {
	Bytes  uint64
	Time   float64
	AlgBW  float64
	Result *Result
}

// PredictCounts binds plan, an alltoallv plan, to the counts c for
// elements of dt and predicts the call on hw.
func PredictCounts(p *plan.Plan, c *executor.Counts, dt executor.DType, hw *Profile, opts Options) (*CountsPoint, error) {
	vp, err := executor.NewVarPlan(p)
	if err != nil {
		return nil, err
	}
	inst, err := vp.Bind(c, dt.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	res, err := Predict(inst, hw, opts)
	if err != nil {
		return nil, err
	}
	pt := &CountsPoint{Bytes: uint64(c.Total()) * uint64(dt.Size()), Time: res.Time, Result: res}
	if res.Timeline != nil {
		res.Timeline.Size = pt.Bytes
	}
	if res.Time > 0 {
		pt.AlgBW = float64(pt.Bytes) / 1e3 / res.Time
	}
	return pt, nil
}
