package cli

// alltoallv.go holds `mscclgo run` for alltoallv plans (--counts): the
// counts come from a file or a generator; harness.Run (Config.Counts)
// binds the plan to them and runs it on the CPU backend or a GPU backend (whose
// kernel resolves the operands from a per-call table, docs/gpu.md §10),
// comparing every byte of every output with a direct all-to-all-v
// computed in Go; this file checks the flags and prints.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// countsFlag is run's --counts flag.
func countsFlag() cli.Flag {
	return &cli.StringFlag{Name: "counts", Usage: "alltoallv plans: the counts matrix counts[src][dst] in elements, from `FILE` (JSON or a whitespace matrix) or a generator: uniform[:count=C], random[:seed=S,max=M,skew=K], moe[:experts=E,topk=K,tokens=T,hidden=H,seed=S,skew=Z]"}
}

// runAllToAllV runs plan, an alltoallv plan read from path, for the
// counts of --counts.
func runAllToAllV(c *cli.Context, d *deps, path string, p *plan.Plan, digest string) error {
	if p.AllToAllV == nil {
		return usageErr("%s: --counts applies to alltoallv plans; this one is %s", path, p.Collective)
	}
	spec := c.String("counts")
	if spec == "" {
		return usageErr("%s: an alltoallv plan has per-call block sizes: give --counts FILE or a generator (uniform, random, moe), not --size", path)
	}
	for _, f := range []string{"size", "minbytes", "maxbytes", "split-mask", "in-place", "integer-fill", "ll8"} {
		if c.IsSet(f) {
			return usageErr("--%s does not apply to an alltoallv run (the sizes come from --counts)", f)
		}
	}
	rb, err := pickBackend(c.String("backend"))
	if err != nil {
		return err
	}
	if rb.name == "cpu" && c.IsSet("threads") {
		return usageErr("--threads applies to the gpu and gpu-emu backends")
	}
	if rb.name != "cpu" && c.Bool("race") {
		return usageErr("--race: the %s backend does not detect races; the cpu backend does", rb.name)
	}
	if t := c.Int("threads"); t < 0 || t > plan.MaxThreadsPerBlock {
		return usageErr("--threads %d: want 1 to %d", t, plan.MaxThreadsPerBlock)
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return usageErr("--dtype: %v", err)
	}
	iters, warmup := c.Int("iters"), c.Int("warmup_iters")
	if iters < 1 || warmup < 0 {
		return usageErr("--iters %d, -w %d: want at least 1 launch and 0 or more warm-up launches", iters, warmup)
	}
	if c.Duration("timeout") <= 0 {
		return usageErr("--timeout %v: want a positive duration", c.Duration("timeout"))
	}
	n := len(p.GPUs)
	counts, err := executor.CountsFor(spec, n)
	if err != nil {
		return err
	}
	if counts.Ranks() != n {
		return fmt.Errorf("--counts %s: a %d×%d matrix for a plan of %d ranks", spec, counts.Ranks(), counts.Ranks(), n)
	}
	budget, err := runBudget(c.String("max-memory"), c.IsSet("max-memory"))
	if err != nil {
		return err
	}
	opts := executor.Options{DType: dt, Race: c.Bool("race"), DeadlockTimeout: c.Duration("timeout")}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if world, launched, err := launchedWorld(c); err != nil {
		return err
	} else if launched {
		o := &runOptions{backend: rb, opts: opts, dtype: dt, iters: iters, warmup: warmup, digest: digest}
		return runAllToAllVLaunched(ctx, c, d, path, p, o, spec, counts, world) // alltoallvmp.go
	}
	backend := rb.new(oneProcess(c))
	w := d.stdout
	results, err := harness.Run(ctx, harness.Config{
		Backend: backend, Plan: p, Counts: counts, DType: dt, Options: opts, Iters: iters, Warmup: warmup, Budget: budget.bytes,
		Opened: func(run harness.SizeResult) {
			fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective alltoallv, %d ranks, protocol %s\n", path, p.Name, n, p.Protocol)
			fmt.Fprintf(w, "# backend %s, dtype %s, iters %d, counts %s, race detection %v\n", backend.Name(), dt.Name(), iters, spec, opts.Race)
			fmt.Fprintf(w, "# %d bytes sent in all, largest block %d bytes, scratch %d bytes per rank\n#\n", run.Size, harness.LargestBlock(counts)*int64(dt.Size()), run.Instance.ScratchBytes)
		},
	})
	if err != nil {
		return countsError(path, spec, err)
	}
	res := results[0]
	if res.Race != nil {
		fmt.Fprintf(d.stderr, "mscclgo: %s: %v\n", path, res.Race.Err)
	}
	if res.Deadlock != nil {
		fmt.Fprintf(d.stderr, "mscclgo: %s: %v\n", path, res.Deadlock.Err)
		return &reportedError{code: ExitDeadlock}
	}
	us := float64(res.Elapsed.Microseconds()) / float64(iters)
	algbw := 0.0
	if us > 0 {
		algbw = float64(res.Size) / 1e3 / us
	}
	fmt.Fprintf(w, "#%11s  %8s  %9s  %9s  %8s\n", "total (B)", "type", "time (us)", "algbw GB/s", "#wrong")
	fmt.Fprintf(w, "%12d  %8s  %9s  %9.2f  %8d\n", res.Size, dt.Name(), harness.FormatTime(us), algbw, res.Wrong)
	switch {
	case res.Race != nil:
		return &reportedError{code: ExitRace}
	case res.FirstWrong != nil:
		fmt.Fprintf(d.stderr, "mscclgo: %s: %d wrong byte(s); first: %v\n", path, res.Wrong, res.FirstWrong.Ranks[0].Mismatch)
		return &reportedError{code: ExitError}
	}
	return nil
}

// countsError names the plan at path in err, an error of a run bound to
// --counts spec, and the step that failed: the plan, its binding to the
// counts, the memory bound, or the run.
func countsError(path, spec string, err error) error {
	var be *harness.BudgetError
	var se *harness.SizeError
	switch {
	case errors.As(err, &be):
		return fmt.Errorf("%s: --counts %s: the run needs about %d bytes, over --max-memory %d", path, spec, be.Use.Total(), be.Budget)
	case errors.As(err, &se) && se.Prepare:
		return fmt.Errorf("%s: --counts %s: %w", path, spec, se.Err)
	case errors.As(err, &se):
		return fmt.Errorf("%s: %w", path, se.Err)
	}
	return namePlan(path, err)
}

// checkVarPlan is check for an alltoallv plan: it says why MSCCL++ will
// not run it, and binds it to the counts of harness.VarValidationCases
// (message sizes do not apply).
func checkVarPlan(w io.Writer, path string, p *plan.Plan, dt executor.ElemType) bool {
	fmt.Fprintf(w, "%s: note: an alltoallv plan (an mscclgo extension, docs/executor.md): MSCCL++ refuses it: its collective \"alltoallv\" matches no MSCCL++ collective and its min_message_size %d > max_message_size %d admits no message size, so MSCCL++'s executor rejects every call instead of reading its chunks as equal slices; mscclgo runs it with run --counts\n",
		path, p.MinMessageSize, p.MaxMessageSize)
	vp, err := executor.NewVarPlan(p)
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return false
	}
	for _, vc := range harness.VarValidationCases(len(p.GPUs)) {
		if _, err := vp.Bind(vc.Counts, dt.Size()); err != nil {
			fmt.Fprintf(w, "%s: counts %q: %v\n", path, vc.Name, err)
			return false
		}
	}
	fmt.Fprintf(w, "%s: ok\n", path)
	return true
}
