package harness

// alltoallv.go is the run of an alltoallv plan for one counts matrix
// (`mscclgo run --counts`): the plan is resolved once
// (executor.NewVarPlan) and bound to the counts, its memory estimated
// against a bound, and RunCounts runs and checks it.

import (
	"context"
	"fmt"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// AllToAllVConfig configures RunAllToAllV.
type AllToAllVConfig struct {
	Plan    *plan.Plan
	Counts  *executor.Counts
	Backend executor.Backend
	// Options.DType is the element type of the counts.
	Options executor.Options
	// Iters launches are timed and checked after Warmup launches that
	// are neither.
	Iters, Warmup int
	// MaxBytes bounds the memory the run is estimated to take (the
	// buffers, twice, and each rank's scratch); 0: no bound.
	MaxBytes uint64
	// Opened, if set, is called once the session is open, before the
	// first launch.
	Opened func(AllToAllVRun)
}

// AllToAllVRun is what a run of an alltoallv plan is about to do.
type AllToAllVRun struct {
	// Instance is the plan bound to the counts.
	Instance *executor.Instance
	// Total is the bytes sent in all, Largest the largest block in bytes,
	// Need the memory the run is estimated to take.
	Total, Need uint64
	Largest     int64
}

// AllToAllVResult is what happened in a run of an alltoallv plan.
type AllToAllVResult struct {
	AllToAllVRun
	CountsResult
	// TimeUS is the time of one timed launch in µs, AlgBW the algorithm
	// bandwidth in GB/s (Total over TimeUS; 0 when TimeUS is 0).
	TimeUS, AlgBW float64
}

// AllToAllVStage says which step of RunAllToAllV failed.
type AllToAllVStage int

// The steps of RunAllToAllV.
const (
	// StagePlan: the plan is not a variable-size plan that resolves
	// (executor.NewVarPlan).
	StagePlan AllToAllVStage = iota
	// StageCounts: the plan cannot be bound to the counts.
	StageCounts
	// StageBudget: the run would take more than MaxBytes.
	StageBudget
	// StageRun: the session or a launch failed (other than a race or a
	// deadlock, which are results).
	StageRun
)

// AllToAllVError is an error of RunAllToAllV: the step that failed, and
// for StageBudget the estimate and the bound.
type AllToAllVError struct {
	Stage     AllToAllVStage
	Need, Max uint64
	Err       error
}

func (e *AllToAllVError) Error() string { return e.Err.Error() }

// Unwrap returns the step's error.
func (e *AllToAllVError) Unwrap() error { return e.Err }

// RunAllToAllV resolves cfg.Plan, binds it to cfg.Counts, checks the
// memory estimate against cfg.MaxBytes and runs it with RunCounts. Its
// errors are *AllToAllVError.
func RunAllToAllV(ctx context.Context, cfg AllToAllVConfig) (*AllToAllVResult, error) {
	vp, err := executor.NewVarPlan(cfg.Plan)
	if err != nil {
		return nil, &AllToAllVError{Stage: StagePlan, Err: err}
	}
	elem := cfg.Options.DType.Size()
	inst, err := vp.Bind(cfg.Counts, elem)
	if err != nil {
		return nil, &AllToAllVError{Stage: StageCounts, Err: err}
	}
	run := AllToAllVRun{Instance: inst, Total: uint64(cfg.Counts.Total()) * uint64(elem)}
	for r := range len(cfg.Plan.GPUs) {
		in, out := cfg.Counts.Extents(r)
		run.Need += 2*uint64(in+out)*uint64(elem) + inst.ScratchBytes
	}
	if cfg.MaxBytes > 0 && run.Need > cfg.MaxBytes {
		return nil, &AllToAllVError{Stage: StageBudget, Need: run.Need, Max: cfg.MaxBytes, Err: fmt.Errorf("the run needs about %d bytes, over the bound of %d", run.Need, cfg.MaxBytes)}
	}
	run.Largest = LargestBlock(cfg.Counts) * int64(elem)
	res, err := RunCounts(ctx, CountsConfig{
		Backend: cfg.Backend, Instance: inst, Counts: cfg.Counts, Options: cfg.Options, Iters: cfg.Iters, Warmup: cfg.Warmup,
		Opened: func() {
			if cfg.Opened != nil {
				cfg.Opened(run)
			}
		},
	})
	if err != nil {
		return nil, &AllToAllVError{Stage: StageRun, Err: err}
	}
	out := &AllToAllVResult{AllToAllVRun: run, CountsResult: res}
	out.TimeUS = float64(res.Elapsed.Microseconds()) / float64(cfg.Iters)
	if out.TimeUS > 0 {
		out.AlgBW = float64(run.Total) / 1e3 / out.TimeUS
	}
	return out, nil
}

// LargestBlock returns the largest count of c, in elements.
func LargestBlock(c *executor.Counts) int64 {
	var m int64
	for _, row := range c.Send {
		for _, x := range row {
			m = max(m, x)
		}
	}
	return m
}
