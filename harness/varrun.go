package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// This file runs alltoallv plans: bound to one counts matrix and timed
// (RunCounts, `mscclgo run --counts`), or for validation, resolved once
// and bound to each counts matrix of a list (ValidateVar); every launch
// is checked byte by byte.

// VarCase is a named counts matrix a variable-size plan is validated
// with.
type VarCase struct {
	Name   string
	Counts *executor.Counts
}

// VarValidationCases are the counts an alltoallv plan of n ranks is
// validated with: all zeros, one peer only, every rank to itself only,
// very skewed, sizes that are multiples of neither the alignment nor the
// element's pairs, uniform and mixture-of-experts routing.
func VarValidationCases(n int) []VarCase {
	zeros := executor.UniformMatrix(n, 0)
	onePeer := executor.UniformMatrix(n, 0)
	self := executor.UniformMatrix(n, 0)
	skewed := executor.UniformMatrix(n, 1)
	for r := range n {
		onePeer[r][(r+1)%n] = 1000 + int64(r)
		self[r][r] = 333
	}
	skewed[0][n-1] = 100000
	moe, _ := executor.MoE{Experts: 2 * n, TopK: min(2, 2*n), Tokens: 64, Hidden: 16, Seed: 1, Skew: 1}.Matrix(n)
	return []VarCase{
		{"zeros", executor.MatrixCounts(zeros)},
		{"one peer", executor.MatrixCounts(onePeer)},
		{"self only", executor.MatrixCounts(self)},
		{"skewed", executor.MatrixCounts(skewed)},
		{"odd sizes", executor.MatrixCounts(executor.RandomMatrix(n, 7, 13, 0))},
		{"uniform", executor.MatrixCounts(executor.UniformMatrix(n, 257))},
		{"moe", executor.MatrixCounts(moe)},
	}
}

// RunVar binds vp to c, runs launches launches of it on backend (one
// session) with elements of opts.DType and checks every output byte
// against the direct all-to-all-v.
func RunVar(ctx context.Context, backend executor.Backend, vp *executor.VarPlan, c *executor.Counts, opts executor.Options, launches int) error {
	elem := opts.DType.Size()
	inst, err := vp.Bind(c, elem)
	if err != nil {
		return err
	}
	sess, err := backend.Open(inst, opts)
	if err != nil {
		return err
	}
	defer sess.Close()
	bufs := VarBuffers(c, elem)
	for seq := range launches {
		FillVar(bufs, seq)
		if err := sess.Launch(ctx, bufs); err != nil {
			return fmt.Errorf("launch %d: %w", seq, err)
		}
		if _, err := CheckVar(bufs, c, elem, seq); err != nil {
			return fmt.Errorf("launch %d: %w", seq, err)
		}
	}
	return nil
}

// ValidateVar runs plan, an alltoallv plan, with every case of
// VarValidationCases, launches launches each.
func ValidateVar(ctx context.Context, backend executor.Backend, p *plan.Plan, opts executor.Options, launches int) error {
	vp, err := executor.NewVarPlan(p)
	if err != nil {
		return err
	}
	for _, vc := range VarValidationCases(len(p.GPUs)) {
		if err := RunVar(ctx, backend, vp, vc.Counts, opts, launches); err != nil {
			return fmt.Errorf("counts %q: %w", vc.Name, err)
		}
	}
	return nil
}

// CountsConfig is a run of an alltoallv plan bound to one counts matrix.
type CountsConfig struct {
	Backend executor.Backend
	// Instance is the plan bound to Counts (executor.VarPlan.Bind) for
	// elements of Options.DType.
	Instance *executor.Instance
	Counts   *executor.Counts
	Options  executor.Options
	// Iters launches are timed and checked after Warmup launches that
	// are neither.
	Iters, Warmup int
	// Opened, if set, is called once the session is open, before the
	// first launch.
	Opened func()
}

// CountsResult is what happened in a run of an alltoallv plan.
type CountsResult struct {
	// Elapsed is the time of the timed launches together (the device's
	// own time where the session measures it).
	Elapsed time.Duration
	// Wrong counts the wrong bytes over every rank and timed launch;
	// FirstWrong is the first mismatch (a *VarMismatch).
	Wrong      uint64
	FirstWrong error
	// Race is the first launch's race error (the launches go on);
	// Deadlock the launch's deadlock error (the run ends there).
	Race, Deadlock error
}

// RunCounts runs cfg's instance on cfg.Backend, each launch filled by
// FillVar and, after the warm-up, checked byte by byte against the
// direct all-to-all-v. The error is the session's, or a launch's other
// than a race or a deadlock.
func RunCounts(ctx context.Context, cfg CountsConfig) (CountsResult, error) {
	var res CountsResult
	elem := cfg.Options.DType.Size()
	sess, err := cfg.Backend.Open(cfg.Instance, cfg.Options)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	if cfg.Opened != nil {
		cfg.Opened()
	}
	bufs := VarBuffers(cfg.Counts, elem)
	for seq := range cfg.Warmup + cfg.Iters {
		FillVar(bufs, seq)
		start := time.Now()
		err := sess.Launch(ctx, bufs)
		took := time.Since(start)
		if dt, ok := sess.(deviceTimer); ok {
			took = dt.DeviceTime()
		}
		var re *executor.RaceError
		var de *executor.DeadlockError
		switch {
		case errors.As(err, &de):
			res.Deadlock = err
			return res, nil
		case errors.As(err, &re):
			if res.Race == nil {
				res.Race = err
			}
		case err != nil:
			return res, err
		}
		if seq < cfg.Warmup {
			continue
		}
		res.Elapsed += took
		k, err := CheckVar(bufs, cfg.Counts, elem, seq)
		res.Wrong += k
		if err != nil && res.FirstWrong == nil {
			res.FirstWrong = err
		}
	}
	return res, nil
}
