package cli

// alltoallvmp.go is `mscclgo run --counts` started as one process per
// rank: like runLaunched (runmp.go), the process connects to the others,
// opens the transport of --transport, binds the plan to the counts and
// runs only its own rank (a cpu rank session) with harness.Run (Config.Counts and Config.Rank),
// which fills and checks the rank's own buffers as the run of one
// process does and exchanges each launch's outcome with every rank;
// rank 0 prints the header, the table and the reports.

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// runAllToAllVLaunched runs p, an alltoallv plan bound to counts, as rank
// world.Rank of a multi-process job.
func runAllToAllVLaunched(ctx context.Context, c *cli.Context, d *deps, path string, p *plan.Plan, o *runOptions, spec string, counts *executor.Counts, world bootstrap.World) error {
	if o.backend.name != "cpu" && o.backend.device == nil {
		return usageErr("--backend %s: this backend has no rank sessions: an alltoallv run of one process per rank uses cpu, gpu-emu or gpu", o.backend.name)
	}
	params := harness.Params{
		{"the plan (SHA-256)", o.digest},
		{"--counts", spec},
		// A counts file of the same name may differ between hosts.
		{"the counts matrix (SHA-256)", fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "%v %v", counts.Send, counts.SendDispls)))},
		{"--iters", fmt.Sprint(o.iters)},
		{"--warmup_iters", fmt.Sprint(o.warmup)},
		{"--dtype", o.dtype.Name()},
		{"--backend", o.backend.name},
		{"--timeout", o.opts.DeadlockTimeout.String()},
	}
	n := len(p.GPUs)
	elem := o.dtype.Size()
	var inst *executor.Instance
	bind := func() error {
		vp, err := executor.NewVarPlan(p)
		if err != nil {
			return namePlan(path, err)
		}
		if inst, err = vp.Bind(counts, elem); err != nil {
			return fmt.Errorf("%s: --counts %s: %w", path, spec, err)
		}
		if _, err = harness.VarRankLayout(inst, n, o.dtype); err != nil {
			return fmt.Errorf("%s: --counts %s: %w", path, spec, err)
		}
		return nil
	}
	j, err := joinJob(ctx, c, d, path, n, o, world, params, bind)
	if err != nil {
		return err
	}
	defer j.close()
	b, rank, port, transport, hosts, hostOf, local, w := j.b, j.b.Rank(), j.port, j.transport, j.hosts, j.hostOf, j.local, j.w
	total := uint64(counts.Total()) * uint64(elem)
	fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective alltoallv, %d ranks, protocol %s\n", path, p.Name, n, p.Protocol)
	fmt.Fprintf(w, "# %d processes (%s) on %d host(s), one rank each; backend %s, dtype %s, iters %d, counts %s\n", b.Size(), world.LauncherName(), len(hosts), o.backend.name, o.dtype.Name(), o.iters, spec)
	fmt.Fprintf(w, "# port channels between processes: %s\n", transport)
	fmt.Fprintf(w, "# %d bytes sent in all, largest block %d bytes, scratch %d bytes per rank\n", total, harness.LargestBlock(counts)*int64(elem), inst.ScratchBytes)
	fmt.Fprintf(w, "# time: the slowest rank's mean per launch\n#\n")
	open := func(ctx context.Context, _ int, inst *executor.Instance, l *executor.BufferLayout) (harness.RankSession, error) {
		rs, err := openRank(ctx, o, launched(c), local, inst, l, rankwire.World{Net: port, Host: hostOf, Tag: 1000})
		if err != nil {
			return nil, fmt.Errorf("rank %d of %d: %w", rank, b.Size(), err)
		}
		return rs, nil
	}
	results, err := harness.Run(ctx, harness.Config{
		Plan: p, Counts: counts, DType: o.dtype, Options: o.opts, Iters: o.iters, Warmup: o.warmup,
		Rank: &harness.RankRun{Rank: rank, Group: b, Open: open},
	})
	if err != nil {
		return countsError(path, spec, err)
	}
	res := results[0]
	if len(res.Failures) > 0 {
		return &reportedError{code: reportFailures(res.Failures, rank, path, total, d.stderr, inst, c.Bool("explain"))}
	}
	us := float64(res.Elapsed.Nanoseconds()) / 1e3 / float64(o.iters)
	algbw := 0.0
	if us > 0 {
		algbw = float64(total) / 1e3 / us
	}
	fmt.Fprintf(w, "#%11s  %8s  %9s  %9s  %8s\n", "total (B)", "type", "time (us)", "algbw GB/s", "#wrong")
	fmt.Fprintf(w, "%12d  %8s  %9s  %9.2f  %8d\n", total, o.dtype.Name(), harness.FormatTime(us), algbw, res.Wrong)
	if rep := res.FirstWrong; rep != nil {
		if rank == 0 {
			fmt.Fprintf(d.stderr, "mscclgo: %s: %d wrong byte(s); first: launch %d: %v\n", path, res.Wrong, rep.Launch, rep.Ranks[0].Mismatch)
		}
		return &reportedError{code: ExitError}
	}
	return nil
}
