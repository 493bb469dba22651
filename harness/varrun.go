package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// This file is Run bound to a counts matrix (Config.Counts) in one
// process: an alltoallv plan bound to the counts and timed (`mscclgo run
// --counts`), or for validation bound to each counts matrix of a list
// (ValidateVar); every launch is checked byte by byte.

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

// ValidateVar runs plan, an alltoallv plan, with every case of
// VarValidationCases, launches launches each (a Strict run on backend
// with opts): the error names the case.
func ValidateVar(ctx context.Context, backend executor.Backend, p *plan.Plan, opts executor.Options, launches int) error {
	dt, ok := opts.DType.(executor.ElemType)
	if !ok {
		return fmt.Errorf("harness: element type %v of an alltoallv validation", opts.DType)
	}
	for _, vc := range VarValidationCases(len(p.GPUs)) {
		_, err := Run(ctx, Config{Backend: backend, Plan: p, Counts: vc.Counts, DType: dt, Options: opts, Iters: launches, Strict: true})
		var se *SizeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("counts %q: %w", vc.Name, se.Err)
		case err != nil: // the plan
			return err
		}
	}
	return nil
}

// bindCounts resolves cfg.Plan, an alltoallv plan, binds it to cfg.Counts
// and refuses a run whose estimated memory (the buffers, twice, and each
// rank's scratch) is above the budget: the plan's error, a *SizeError
// (Prepare) for counts the plan cannot be bound to, or a *BudgetError.
// The size of the run is the bytes sent in all.
func (cfg *Config) bindCounts() (*executor.Instance, uint64, error) {
	vp, err := executor.NewVarPlan(cfg.Plan)
	if err != nil {
		return nil, 0, err
	}
	elem := cfg.DType.Size()
	total := uint64(cfg.Counts.Total()) * uint64(elem)
	inst, err := vp.Bind(cfg.Counts, elem)
	if err != nil {
		return nil, total, &SizeError{Size: total, Prepare: true, Err: err}
	}
	use := MemoryUse{Ranks: len(cfg.Plan.GPUs)}
	for r := range use.Ranks {
		in, out := cfg.Counts.Extents(r)
		use.Buffers += 2 * uint64(in+out) * uint64(elem)
		use.Scratch += inst.ScratchBytes
	}
	if cfg.Budget > 0 && use.Total() > cfg.Budget {
		return nil, total, &BudgetError{Size: total, Use: use, Budget: cfg.Budget}
	}
	return inst, total, nil
}

// runCounts is Run bound to cfg.Counts: one result.
func (cfg *Config) runCounts(ctx context.Context) ([]SizeResult, error) {
	inst, total, err := cfg.bindCounts()
	if err != nil {
		return nil, err
	}
	res := SizeResult{Size: total, Instance: inst, Checked: true}
	if cfg.Rank != nil {
		res, err = cfg.runCountsRank(ctx, res)
	} else {
		res, err = cfg.runCountsOnce(ctx, res)
	}
	if err != nil {
		return nil, &SizeError{Size: total, Err: err}
	}
	out := cfg.done(nil, res)
	return out, cfg.strict(res)
}

// runCountsOnce runs the launches of a run bound to counts in one
// process, each filled by FillVar and, after the warm-up, checked byte by
// byte against the direct all-to-all-v.
func (cfg *Config) runCountsOnce(ctx context.Context, res SizeResult) (SizeResult, error) {
	elem := cfg.DType.Size()
	sess, err := cfg.Backend.Open(res.Instance, cfg.Options)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	cfg.opened(res)
	bufs := VarBuffers(cfg.Counts, elem)
	for seq := range cfg.Warmup + cfg.Iters {
		FillVar(bufs, seq)
		start := time.Now()
		lerr := sess.Launch(ctx, bufs)
		dur := took(sess, start)
		launch := LaunchError{Launch: seq - cfg.Warmup, Err: lerr}
		if seq < cfg.Warmup {
			launch.Launch, launch.Warmup = seq, true
		}
		switch deadlock, race := classify(lerr); {
		case deadlock:
			res.Deadlock = &launch
			return res, nil
		case race:
			if res.Race == nil {
				res.Race = &launch
			}
		case lerr != nil && cfg.Strict: // as the check of a plan names it
			return res, fmt.Errorf("launch %d: %w", seq, lerr)
		case lerr != nil:
			return res, lerr
		}
		if seq < cfg.Warmup {
			continue
		}
		res.Elapsed += dur
		k, err := CheckVar(bufs, cfg.Counts, elem, seq)
		res.Wrong += k
		var vm *VarMismatch
		if errors.As(err, &vm) && res.FirstWrong == nil {
			res.FirstWrong = &WrongReport{Launch: launch.Launch, Ranks: []RankWrong{{Rank: vm.Rank, Wrong: vm.Wrong, Mismatch: vm}}}
		}
		if cfg.Strict && (res.Race != nil || res.FirstWrong != nil) {
			break
		}
	}
	return res, nil
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
