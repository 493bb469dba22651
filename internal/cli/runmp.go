package cli

// runmp.go is `mscclgo run` started as one process per rank (mpirun,
// torchrun, or by hand with MSCCLGO_* variables): the process finds its
// rank in the environment, connects to the others (package dist), runs
// only its own rank (a rank session of the cpu backend, or of gpu-emu /
// gpu: gpu.OpenRank), checks its own output, and exchanges each launch's outcome with every rank, so that
// every rank stops at the same launch and exits with the worst status;
// rank 0 prints the table and the reports.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/dist"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
)

// launchedWorld returns the job this process belongs to, if a launcher
// (or MSCCLGO_RANK/MSCCLGO_WORLD_SIZE) says it is one rank of several.
func launchedWorld(c *cli.Context) (dist.World, bool, error) {
	if c.Bool("one-process") {
		return dist.World{}, false, nil
	}
	w, ok, err := dist.FromEnv(os.Getenv)
	if err != nil {
		return w, false, usageErr("%v", err)
	}
	return w, ok, nil
}

// runParams are what every rank of a launched run must agree on: each
// field's name as the user gives it and its value as text.
type runParams [][2]string

// paramsOf returns the run parameters of o.
func paramsOf(o *runOptions, ll8 bool) runParams {
	sizes := make([]string, len(o.sizes))
	for i, s := range o.sizes {
		sizes[i] = fmt.Sprint(s)
	}
	fill := "reference"
	if o.fill == executor.IntegerFill {
		fill = "integer"
	}
	return runParams{
		{"the plan (SHA-256)", o.digest},
		{"the sizes (--size, -b/-e/-f/-i)", strings.Join(sizes, " ")},
		{"--iters", fmt.Sprint(o.iters)},
		{"--warmup_iters", fmt.Sprint(o.warmup)},
		{"--dtype", o.dtype.Name()},
		{"--in-place", fmt.Sprint(o.inPlace)},
		{"--backend", o.backend.name},
		{"--ll8", fmt.Sprint(ll8)},
		{"--split-mask", fmt.Sprint(o.splitMask)},
		{"--integer-fill", fill},
		{"--timeout", o.opts.DeadlockTimeout.String()},
	}
}

// agreeOnParams all-gathers every rank's run parameters and refuses, on
// every rank alike, a job whose ranks were started with different ones
// (which would otherwise run different launches and hang or end with
// different statuses).
func agreeOnParams(ctx context.Context, b *dist.Bootstrap, mine runParams) error {
	data, err := json.Marshal(mine)
	if err != nil {
		return err
	}
	parts, err := b.AllGather(ctx, data)
	if err != nil {
		return fmt.Errorf("exchanging the run parameters: %w", err)
	}
	var ref runParams
	for r, p := range parts {
		var theirs runParams
		if err := json.Unmarshal(p, &theirs); err != nil || len(theirs) != len(mine) {
			return fmt.Errorf("rank %d sent run parameters of another format (another mscclgo version?)", r)
		}
		if r == 0 {
			ref = theirs
			continue
		}
		for i, f := range theirs {
			if f != ref[i] {
				return usageErr("the ranks were started with different run parameters: %s is %s on rank %d but %s on rank 0: start every rank with the same plan and flags",
					ref[i][0], clipText(f[1]), r, clipText(ref[i][1]))
			}
		}
	}
	return nil
}

// clipText shortens a value for an error message.
func clipText(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("... (%d bytes more)", len(s)-max)
}

// launchOutcome is what each rank tells the others after a launch.
type launchOutcome struct {
	Err      string   `json:"err,omitempty"`
	Deadlock bool     `json:"deadlock,omitempty"`
	Wrong    uint64   `json:"wrong,omitempty"`
	Report   []string `json:"report,omitempty"` // where the wrong data is
	Nanos    int64    `json:"ns"`
}

// rankSession is one rank of a multi-process run: cpu.RankSession or
// gpu.RankSession.
type rankSession interface {
	Buffers() executor.RankBuffers
	Launch(ctx context.Context) error
	Close() error
}

// openRank opens this process's rank session on the run's backend; device
// is the rank's local rank (the GPU it takes on a host with several);
// setup bounds each step of a GPU rank session's set-up (--join-timeout).
func openRank(ctx context.Context, o *runOptions, threads, device int, setup time.Duration, inst *executor.Instance, layout *executor.BufferLayout, w rankwire.World) (rankSession, error) {
	if o.backend.gpuConfig == nil {
		return cpu.OpenRank(ctx, inst, layout, o.opts, w)
	}
	cfg := o.backend.gpuConfig(threads, device)
	cfg.SetupTimeout = setup
	rs, err := gpu.OpenRank(ctx, cfg, inst, layout, o.opts, w)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// runLaunched runs plan as rank world.Rank of a multi-process job.
func runLaunched(ctx context.Context, c *cli.Context, d *deps, path string, plan *executor.Plan, o *runOptions, world dist.World) error {
	if o.backend.name != "cpu" && o.backend.gpuConfig == nil {
		return usageErr("--backend %s: this backend has no rank sessions: a run of one process per rank uses cpu, gpu-emu or gpu", o.backend.name)
	}
	if o.opts.Race {
		return usageErr("--race: race detection runs every rank in one process; run without a launcher (or with --one-process)")
	}
	timeout := c.Duration("join-timeout")
	b, err := dist.Connect(ctx, world, dist.Options{Timeout: timeout, HeartbeatTimeout: c.Duration("peer-timeout"), HeartbeatInterval: c.Duration("peer-timeout") / 4})
	if err != nil {
		return fmt.Errorf("%s: rank %d of %d (%s): %w", path, world.Rank, world.Size, launcherName(world), err)
	}
	defer b.Close()
	rank := b.Rank()
	if err := agreeOnParams(ctx, b, paramsOf(o, c.Bool("ll8"))); err != nil {
		return fmt.Errorf("%s: rank %d of %d: %w", path, rank, b.Size(), err)
	}
	if n := len(plan.GPUs); n != b.Size() {
		return fmt.Errorf("%s: the plan has %d ranks, the job %d processes (world size %d from %s): start %d", path, n, b.Size(), b.Size(), launcherName(world), n)
	}
	hostOf := make([]int, b.Size())
	local := 0 // this rank's local rank: its device on a GPU host
	hosts := b.Hosts()
	for h, host := range hosts {
		for i, r := range host.Ranks {
			hostOf[r] = h
			if r == rank {
				local = i
			}
		}
	}
	w := io.Discard
	if rank == 0 {
		w = d.stdout
	}
	stderr := d.stderr
	fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective %s, %d ranks, protocol %s\n", path, plan.Name, plan.Collective, len(plan.GPUs), plan.Protocol)
	fmt.Fprintf(w, "# %d processes (%s) on %d host(s), one rank each; backend %s, dtype %s, iters %d, in-place %v\n", b.Size(), launcherName(world), len(hosts), o.backend.name, o.dtype.Name(), o.iters, o.inPlace)
	fmt.Fprintf(w, "# time: the slowest rank's mean per launch\n#\n")
	table := newRunTable(w, o.dtype)
	ran := 0
	for si, size := range o.sizes {
		layout, inst, err := prepareSize(path, plan, size, o)
		if err != nil {
			// The same on every rank: the plan and flags are.
			var me *memoryError
			if errors.As(err, &me) || !o.sweep {
				return atSize(path, size, err)
			}
			fmt.Fprintf(w, "# skipped size %d: %v\n", size, err)
			continue
		}
		cw := rankwire.World{Net: b, Host: hostOf, Tag: 1000 + uint32(si)*rankwire.TagsPerSession}
		rs, err := openRank(ctx, o, c.Int("threads"), local, timeout, inst, layout, cw)
		if err != nil {
			return atSize(path, size, err)
		}
		res, code, err := runLaunchedSize(ctx, b, rs, inst, layout, o, path, w, stderr)
		rs.Close()
		if err != nil {
			return atSize(path, size, err)
		}
		if code != ExitOK {
			return &reportedError{code: code}
		}
		ran++
		table.row(layout, res)
	}
	table.end()
	switch {
	case table.wrong > 0:
		if rank == 0 {
			fmt.Fprintf(stderr, "mscclgo: %s: %d wrong element(s)\n", path, table.wrong)
		}
		return &reportedError{code: ExitError}
	case ran == 0:
		return fmt.Errorf("%s: no size of the sweep suits the plan", path)
	}
	return nil
}

// runLaunchedSize runs the warm-up and checked launches of one size on
// this rank; after each, every rank learns every rank's outcome. It
// returns the exit status every rank agrees on when a launch failed
// somewhere (reported by rank 0), or an error of this rank's own.
func runLaunchedSize(ctx context.Context, b *dist.Bootstrap, rs rankSession, inst *executor.Instance, layout *executor.BufferLayout, o *runOptions, path string, w, stderr io.Writer) (runResult, int, error) {
	res := runResult{checked: layout.Checked()}
	rank := b.Rank()
	bufs := rs.Buffers()
	var worst time.Duration
	var total time.Duration
	for it := -o.warmup; it < o.iters; it++ {
		seq := max(it, 0)
		layout.FillRank(bufs.Input, rank, seq)
		start := time.Now()
		lerr := rs.Launch(ctx)
		mine := launchOutcome{Nanos: int64(time.Since(start))}
		if dt, ok := rs.(deviceTimer); ok && lerr == nil {
			// The kernel alone, as in one process.
			mine.Nanos = int64(dt.DeviceTime())
		}
		var dl *executor.DeadlockError
		switch {
		case errors.As(lerr, &dl):
			mine.Deadlock, mine.Err = true, lerr.Error()
		case lerr != nil:
			mine.Err = lerr.Error()
		case it >= 0 && res.checked:
			n, err := layout.CheckRank(bufs.Output, rank, seq)
			if err != nil {
				return res, 0, err
			}
			mine.Wrong = n
			if n > 0 {
				mine.Report = wrongReport(inst, layout, bufs, rank, seq, n)
			}
		}
		all, err := exchangeOutcomes(ctx, b, mine)
		if err != nil {
			if lerr != nil {
				// This rank's own failure says more (a lost peer, a
				// deadlock seen before the exchange failed).
				return res, 0, fmt.Errorf("rank %d, launch %d: %w", rank, it, lerr)
			}
			return res, 0, fmt.Errorf("rank %d, launch %d: exchanging outcomes: %w", rank, it, err)
		}
		what := fmt.Sprintf("launch %d", it)
		if it < 0 {
			what = fmt.Sprintf("warm-up launch %d", it+o.warmup)
		}
		if code := reportOutcomes(all, rank, path, layout.Size, what, stderr); code != ExitOK {
			return res, code, nil
		}
		if it < 0 {
			continue
		}
		worst = 0
		for _, a := range all {
			worst = max(worst, time.Duration(a.Nanos))
			if len(a.Report) > 0 && rank == 0 && res.wrong == 0 {
				fmt.Fprintf(stderr, "mscclgo: %s: size %d, launch %d: wrong data:\n%s", path, layout.Size, it, strings.Join(a.Report, ""))
			}
			res.wrong += a.Wrong
		}
		total += worst
	}
	res.timeUS = max(float64(total.Nanoseconds())/1e3/float64(o.iters), 1e-3)
	return res, ExitOK, nil
}

// exchangeOutcomes all-gathers each rank's launch outcome.
func exchangeOutcomes(ctx context.Context, b *dist.Bootstrap, mine launchOutcome) ([]launchOutcome, error) {
	data, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	parts, err := b.AllGather(ctx, data)
	if err != nil {
		return nil, err
	}
	all := make([]launchOutcome, len(parts))
	for r, p := range parts {
		if err := json.Unmarshal(p, &all[r]); err != nil {
			return nil, fmt.Errorf("rank %d sent an outcome that is not one: %v", r, err)
		}
	}
	return all, nil
}

// reportOutcomes prints (on rank 0) the failures of a launch and returns
// the exit status every rank takes: a deadlock's, or an error's.
func reportOutcomes(all []launchOutcome, rank int, path string, size uint64, what string, stderr io.Writer) int {
	code := ExitOK
	for r, a := range all {
		if a.Err == "" {
			continue
		}
		if a.Deadlock {
			if code != ExitDeadlock && rank == 0 {
				// Every deadlocked rank holds the same job-wide report.
				fmt.Fprintf(stderr, "mscclgo: %s: size %d, %s: %s\n", path, size, what, a.Err)
			}
			code = ExitDeadlock
			continue
		}
		if rank == 0 {
			fmt.Fprintf(stderr, "mscclgo: %s: size %d, %s: rank %d: %s\n", path, size, what, r, a.Err)
		}
		if code == ExitOK {
			code = ExitError
		}
	}
	return code
}

// wrongReport is reportWrong for this rank alone, as text.
func wrongReport(inst *executor.Instance, l *executor.BufferLayout, mine executor.RankBuffers, rank, seq int, n uint64) []string {
	bufs := make([]executor.RankBuffers, l.NRanks)
	bufs[rank] = mine
	wrong := make([]uint64, l.NRanks)
	wrong[rank] = n
	var sb bytes.Buffer
	reportWrong(&sb, "", inst, l, bufs, seq, wrong, nil)
	// Drop reportWrong's heading line: the caller prints its own.
	text := sb.String()
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	return []string{text}
}

// launcherName says where the job's shape came from.
func launcherName(w dist.World) string {
	if w.Launcher == "" {
		return "MSCCLGO_* variables"
	}
	return w.Launcher
}
