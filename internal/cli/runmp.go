package cli

// runmp.go is `mscclgo run` started as one process per rank (mpirun,
// torchrun, or by hand with MSCCLGO_* variables): the process finds its
// rank in the environment, connects to the others (package bootstrap), and
// runs only its own rank (a rank session of the cpu backend, or of
// gpu-emu / gpu: gpu.OpenRank) with harness.Run (Config.Rank), which checks the
// rank's own output and exchanges each launch's outcome with every rank,
// so that every rank stops at the same launch and exits with the worst
// status; rank 0 prints the table and the reports.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/runconfig"
)

// launchedWorld returns the job this process belongs to, if a launcher
// (or MSCCLGO_RANK/MSCCLGO_WORLD_SIZE) says it is one rank of several.
func launchedWorld(c *cli.Context) (bootstrap.World, bool, error) {
	if c.Bool("one-process") {
		return bootstrap.World{}, false, nil
	}
	w, ok, err := bootstrap.FromEnv(os.Getenv)
	if err != nil {
		return w, false, usageErr("%v", err)
	}
	return w, ok, nil
}

// paramsOf returns the run parameters of o.
func paramsOf(o *runOptions, ll8 bool) harness.Params {
	sizes := make([]string, len(o.sizes))
	for i, s := range o.sizes {
		sizes[i] = fmt.Sprint(s)
	}
	fill := "reference"
	if o.fill == harness.IntegerFill {
		fill = "integer"
	}
	return harness.Params{
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

// openRank opens this process's rank session on the run's backend under
// the settings s of the command's flags (launched); device is the rank's
// local rank (the GPU it takes on a host with several).
func openRank(ctx context.Context, o *runOptions, s runconfig.Settings, device int, inst *executor.Instance, layout *executor.BufferLayout, w rankwire.World) (harness.RankSession, error) {
	if o.backend.device == nil {
		return cpu.OpenRank(ctx, inst, layout, o.opts, w)
	}
	rs, err := gpu.OpenRank(ctx, s.GPUConfig(o.backend.device(device)), inst, layout, o.opts, w)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// connectLaunched joins the job of a launched rank (world) over the
// bootstrap, with the run's join and peer timeouts; --race, which needs
// every rank in one process, is refused first.
func connectLaunched(ctx context.Context, c *cli.Context, path string, o *runOptions, world bootstrap.World) (*bootstrap.Bootstrap, error) {
	if o.opts.Race || o.raceOnCPU {
		return nil, usageErr("--race: race detection runs every rank in one process; run without a launcher (or with --one-process)")
	}
	peer := c.Duration("peer-timeout")
	b, err := bootstrap.Connect(ctx, world, bootstrap.Options{Timeout: c.Duration("join-timeout"), HeartbeatTimeout: peer, HeartbeatInterval: peer / 4})
	if err != nil {
		return nil, fmt.Errorf("%s: rank %d of %d (%s): %w", path, world.Rank, world.Size, world.LauncherName(), err)
	}
	return b, nil
}

// job is this process's place in a launched run: its bootstrap, what
// carries the port channels between processes (and the header's words
// for it), the hosts, each rank's host and this rank's local rank, and
// where the table goes (rank 0's standard output, io.Discard elsewhere).
type job struct {
	b              *bootstrap.Bootstrap
	port           rankwire.Net
	transport      string
	hosts          []bootstrap.Host
	hostOf         []int
	local          int
	w              io.Writer
	closeTransport func() error
}

// close closes the transport and leaves the job.
func (j *job) close() {
	if j.closeTransport != nil {
		j.closeTransport()
	}
	j.b.Close()
}

// joinJob joins the job of a launched run of a plan of n ranks: it
// connects, agrees params with every rank, checks the world size, runs
// prepare (nil: nothing) and opens the transport.
func joinJob(ctx context.Context, c *cli.Context, d *deps, path string, n int, o *runOptions, world bootstrap.World, params harness.Params, prepare func() error) (*job, error) {
	b, err := connectLaunched(ctx, c, path, o, world)
	if err != nil {
		return nil, err
	}
	j := &job{b: b, w: io.Discard}
	fail := func(err error) (*job, error) {
		j.close()
		return nil, err
	}
	if err := harness.Agree(ctx, b, params); err != nil {
		var pe *harness.ParamsError
		if errors.As(err, &pe) {
			err = usageErr("%v", pe)
		}
		return fail(fmt.Errorf("%s: rank %d of %d: %w", path, b.Rank(), b.Size(), err))
	}
	if n != b.Size() {
		return fail(fmt.Errorf("%s: the plan has %d ranks, the job %d processes (world size %d from %s): start %d", path, n, b.Size(), b.Size(), world.LauncherName(), n))
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return fail(err)
		}
	}
	if j.port, j.transport, err = openTransport(ctx, c, b, d.stderr); err != nil {
		return fail(fmt.Errorf("%s: rank %d of %d: %w", path, b.Rank(), b.Size(), err))
	}
	if wire, ok := j.port.(*fabric.Wire); ok {
		j.closeTransport = wire.Close
	}
	j.hosts = b.Hosts()
	j.hostOf, j.local = bootstrap.PlaceRanks(j.hosts, b.Size(), b.Rank())
	if b.Rank() == 0 {
		j.w = d.stdout
	}
	return j, nil
}

// runLaunched runs plan as rank world.Rank of a multi-process job.
func runLaunched(ctx context.Context, c *cli.Context, d *deps, path string, p *plan.Plan, o *runOptions, world bootstrap.World) error {
	if o.backend.name != "cpu" && o.backend.device == nil {
		return usageErr("--backend %s: this backend has no rank sessions: a run of one process per rank uses cpu, gpu-emu or gpu", o.backend.name)
	}
	j, err := joinJob(ctx, c, d, path, len(p.GPUs), o, world, paramsOf(o, c.Bool("ll8")), nil)
	if err != nil {
		return err
	}
	defer j.close()
	b, rank, port, transport, hosts, hostOf, local, w := j.b, j.b.Rank(), j.port, j.transport, j.hosts, j.hostOf, j.local, j.w
	stderr := d.stderr
	fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective %s, %d ranks, protocol %s\n", path, p.Name, p.Collective, len(p.GPUs), p.Protocol)
	fmt.Fprintf(w, "# %d processes (%s) on %d host(s), one rank each; backend %s, dtype %s, iters %d, in-place %v\n", b.Size(), world.LauncherName(), len(hosts), o.backend.name, o.dtype.Name(), o.iters, o.inPlace)
	fmt.Fprintf(w, "# port channels between processes: %s\n", transport)
	fmt.Fprintf(w, "# time: the slowest rank's mean per launch\n#\n")
	table := harness.NewTable(w, o.dtype)
	ran, code := 0, ExitOK
	cfg := o.config(p)
	cfg.Rank = &harness.RankRun{Rank: rank, Group: b}
	cfg.Rank.Open = func(ctx context.Context, si int, inst *executor.Instance, l *executor.BufferLayout) (harness.RankSession, error) {
		cw := rankwire.World{Net: port, Host: hostOf, Tag: 1000 + uint32(si)*rankwire.TagsPerSession}
		return openRank(ctx, o, launched(c), local, inst, l, cw)
	}
	cfg.Done = func(res harness.SizeResult) {
		if res.Skipped != nil {
			// The same on every rank: the plan and flags are.
			fmt.Fprintf(w, "# skipped size %d: %v\n", res.Size, res.Skipped)
			return
		}
		if rep := res.FirstWrong; rep != nil && rank == 0 {
			// Rank 0 explains the wrong data as a run of one process
			// does: a re-run of the size on the cpu backend, cause first.
			explain := func(w io.Writer) bool {
				return explainWrong(ctx, w, res.Instance, res.Layout, harness.NewChecker(), o.opts)
			}
			reportWrong(stderr, path, res.Instance, res.Layout, rep, explain, c.Bool("explain"))
		}
		if len(res.Failures) > 0 {
			code = reportFailures(res.Failures, rank, path, res.Size, stderr, res.Instance, c.Bool("explain"))
			return
		}
		ran++
		table.Row(res.Layout.BufferLayout, res.Row(o.iters))
	}
	if _, err := harness.Run(ctx, cfg); err != nil {
		return o.runError(path, err, nil)
	}
	if code != ExitOK {
		return &reportedError{code: code}
	}
	table.End()
	switch {
	case table.Wrong > 0:
		if rank == 0 {
			fmt.Fprintf(stderr, "mscclgo: %s: %d wrong element(s)\n", path, table.Wrong)
		}
		return &reportedError{code: ExitError}
	case ran == 0:
		return fmt.Errorf("%s: no size of the sweep suits the plan", path)
	}
	return nil
}

// reportFailures prints (on rank 0) the failed launches of a size and
// returns the exit status every rank takes: a deadlock's (diagnosed as
// in a run of one process, reportDeadlock), or an error's.
func reportFailures(fs []harness.RankFailure, rank int, path string, size uint64, stderr io.Writer, inst *executor.Instance, all bool) int {
	code := ExitOK
	for _, f := range fs {
		what := fmt.Sprintf("launch %d", f.Launch)
		if f.Warmup {
			what = "warm-up " + what
		}
		if f.Deadlock {
			if code != ExitDeadlock && rank == 0 {
				// Every deadlocked rank holds the same job-wide report.
				prefix := fmt.Sprintf("mscclgo: %s: size %d, %s: ", path, size, what)
				if len(f.Blocked) > 0 {
					reportDeadlock(stderr, prefix, inst, &executor.DeadlockError{Blocked: f.Blocked}, all)
				} else {
					fmt.Fprintf(stderr, "%s%s\n", prefix, f.Err)
				}
			}
			code = ExitDeadlock
			continue
		}
		if rank == 0 {
			fmt.Fprintf(stderr, "mscclgo: %s: size %d, %s: rank %d: %s\n", path, size, what, f.Rank, f.Err)
		}
		if code == ExitOK {
			code = ExitError
		}
	}
	return code
}

// openTransport opens what carries the job's port channels between
// processes (--transport, MSCCLGO_TRANSPORT) under the settings of the
// command's flags (launched: runconfig.Settings.OpenTransport): the
// bootstrap's own connections (tcp), a libfabric wire (fabric), or auto:
// fabric when it opens on every rank and every peer answers its hello
// within --fabric-hello-timeout, else tcp. It returns the Net the rank
// sessions use and the words of the run header. Every rank learns the
// fabric's failure from the same all-gather, so every rank takes the
// same way; where the fabric loaded but a peer did not answer (an
// unreachable address), every rank says so on stderr, since that is not
// the quiet fallback of a machine without libfabric.
func openTransport(ctx context.Context, c *cli.Context, b *bootstrap.Bootstrap, stderr io.Writer) (rankwire.Net, string, error) {
	carrier, err := launched(c).OpenTransport(ctx, b)
	var se *runconfig.SettingError
	switch {
	case errors.As(err, &se) && se.Setting == runconfig.SettingTransport:
		return nil, "", usageErr("--transport %v", se.Err)
	case errors.As(err, &se):
		return nil, "", usageErr("--fabric-hello-timeout %v", se.Err)
	case err != nil:
		return nil, "", fmt.Errorf("--transport fabric: %w", err)
	case carrier.Refused != nil:
		transport := fmt.Sprintf("tcp (the bootstrap's connections; fabric refused: %v)", carrier.Refused)
		if errors.Is(carrier.Refused, fabric.ErrUnreachable) {
			fmt.Fprintf(stderr, "mscclgo: rank %d of %d: warning: port channels between processes: %s\n", b.Rank(), b.Size(), transport)
		}
		return b, transport, nil
	case carrier.Wire == nil:
		return b, "tcp (the bootstrap's connections)", nil
	}
	return carrier.Wire, "fabric, libfabric provider " + carrier.Wire.Provider(), nil
}
