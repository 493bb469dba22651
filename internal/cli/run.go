package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/internal/infile"
	planfmt "github.com/mscclgo/mscclgo/plan"
)

func runCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run an execution plan, check its results and report its bandwidth",
		ArgsUsage: "PLAN.json|ALGO.star",
		Description: "Runs PLAN.json on every rank at once, the way MSCCL++'s executor_test.py does: for each\n" +
			"message size and each of --iters launches, fills the inputs with the reference generator\n" +
			"(seq = iteration), launches, and checks the outputs. Prints an nccl-tests style table:\n" +
			"time is the mean per launch, algbw = size/time (GB/s, decimal), busbw = algbw times the\n" +
			"collective's bus factor, #wrong the wrong elements over all ranks and launches.\n" +
			"Give --size SIZE, or a sweep -b MIN -e MAX -f FACTOR; sizes the plan rejects are skipped\n" +
			"in a sweep. Plans of the test collective have no defined result: they are run for\n" +
			"deadlocks and races only. A deadlock stops the run; races are reported once per size.\n" +
			"A size whose run would need more memory than --max-memory (by default half the\n" +
			"machine's memory) is refused before anything is allocated.\n\n" +
			"Exit status: 0 when every check passed, 1 for wrong results or another error, 2 for a\n" +
			"usage error, 3 for a deadlock, 4 for a race (--race).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "size", Aliases: []string{"s"}, Usage: "message `SIZE` in bytes (1K, 64M): the output of allgather, the input otherwise"},
			&cli.StringFlag{Name: "minbytes", Aliases: []string{"b"}, Usage: "sweep from `SIZE` (nccl-tests -b)"},
			&cli.StringFlag{Name: "maxbytes", Aliases: []string{"e"}, Usage: "sweep up to `SIZE` (nccl-tests -e)"},
			&cli.Uint64Flag{Name: "stepfactor", Aliases: []string{"f"}, Value: 2, Usage: "multiply the size by `F` between sweep steps (nccl-tests -f)"},
			&cli.StringFlag{Name: "stepbytes", Aliases: []string{"i"}, Usage: "add `SIZE` between sweep steps instead of multiplying (nccl-tests -i)"},
			&cli.IntFlag{Name: "warmup_iters", Aliases: []string{"w"}, Usage: "`N` launches per size before the timed and checked ones (nccl-tests -w)"},
			&cli.IntFlag{Name: "split-mask", Usage: "sendrecv: ranks form groups of `M`+1 that send to the next group, as executor_test.py --split_mask"},
			&cli.StringFlag{Name: "dtype", Aliases: []string{"d"}, Value: "float16", Usage: "element `TYPE`: float16 (half), bfloat16, float32 (float), int32"},
			&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 10, Usage: "launches per size (`N`), each filled and checked"},
			&cli.BoolFlag{Name: "in-place", Usage: "run in place; --in-place=false forces out of place", DefaultText: "the plan's inplace field"},
			&cli.StringFlag{Name: "backend", Usage: "run on `NAME`: " + strings.Join(knownBackends, " or ") + " (default: the best built into this binary)"},
			&cli.IntFlag{Name: "threads", Usage: "threads per block of the gpu and gpu-emu backends (`N`; default: the plan's for gpu, 8 for gpu-emu)"},
			&cli.BoolFlag{Name: "explain", Usage: "print the whole wrong-data or deadlock report (default: the most likely cause first, at most 25 lines)"},
			&cli.BoolFlag{Name: "keep-going", Usage: "run the remaining sizes after one with wrong data (default: stop there)"},
			&cli.BoolFlag{Name: "race", Usage: "detect races: conflicting accesses without a happens-before order (on gpu-emu, by the cpu backend's detector over the same schedule, first)"},
			&cli.BoolFlag{Name: "ll8", Usage: "use 8-byte LL packets instead of 16-byte ones"},
			&cli.BoolFlag{Name: "counters", Usage: "gpu-emu: count each op's data traffic and print it after each size's row: bytes moved against the plan's, and the coalescing of warp accesses (32-byte sectors touched against the fewest); slower"},
			&cli.DurationFlag{Name: "timeout", Value: time.Second, Usage: "report a deadlock after `D` without progress"},
			&cli.BoolFlag{Name: "integer-fill", Usage: "int32: fill with integers 0..1023 instead of the reference fill, which is all zeros (an extension)"},
			&cli.StringFlag{Name: "max-memory", Usage: "refuse a size whose run needs more than `SIZE` of memory (0: no limit); also bounds a .star evaluation", DefaultText: "half the machine's memory"},
			countsFlag(),
			&cli.BoolFlag{Name: "one-process", Usage: "run every rank in this process even when launcher variables (mpirun, torchrun) are set"},
			&cli.DurationFlag{Name: "join-timeout", Value: bootstrap.DefaultTimeout, Usage: "one process per rank: wait `D` for every rank to join"},
			&cli.DurationFlag{Name: "peer-timeout", Value: bootstrap.DefaultHeartbeatTimeout, Usage: "one process per rank: a rank silent for `D` is lost"},
			&cli.StringFlag{Name: "transport", Value: fabric.TransportSetting(os.Getenv), Usage: "one process per rank (default: $MSCCLGO_TRANSPORT, else auto): carry port channels between processes over `T`: auto (fabric where libfabric loads and offers RMA on every rank, else tcp), tcp (the bootstrap's connections) or fabric (libfabric; FI_PROVIDER picks the provider)"},
			&cli.DurationFlag{Name: "fabric-hello-timeout", Value: fabric.DefaultAutoHelloTimeout, EnvVars: []string{"MSCCLGO_FABRIC_HELLO_TIMEOUT"}, Usage: "one process per rank, --transport auto: go on over tcp when a peer does not answer the fabric's hello within `D` (an unreachable address); --transport fabric waits --join-timeout and fails"},
		}, scriptFlags()...),
		Action:       func(c *cli.Context) error { return runRun(c, d) },
		OnUsageError: onUsageError,
	}
}

// runOptions are the parsed flags of mscclgo run.
type runOptions struct {
	nvlsSaid  bool // the NVLS branch was reported (once per run)
	warmup    int
	splitMask int
	sizes     []uint64
	sweep     bool
	dtype     executor.ElemType
	iters     int
	inPlace   bool
	backend   runBackend
	opts      executor.Options
	raceOnCPU bool // --race on a backend with no detector: a cpu pass first
	fill      harness.FillMode
	budget    memoryBudget
	// digest is the plan's SHA-256, which the ranks of a launched run
	// compare.
	digest string
}

// parseRunFlags parses the flags of run for plan, read from path.
func parseRunFlags(c *cli.Context, path string, plan *planfmt.Plan) (*runOptions, error) {
	o := &runOptions{iters: c.Int("iters"), inPlace: plan.Inplace}
	if o.iters < 1 {
		return nil, usageErr("--iters %d: want at least 1", o.iters)
	}
	if c.IsSet("in-place") {
		o.inPlace = c.Bool("in-place")
	}
	var err error
	if o.dtype, err = executor.ParseDType(c.String("dtype")); err != nil {
		return nil, usageErr("--dtype: %v", err)
	}
	if c.Bool("integer-fill") {
		if o.dtype != executor.Int32 {
			return nil, usageErr("--integer-fill applies to --dtype int32 only")
		}
		o.fill = harness.IntegerFill
	}
	if o.backend, err = pickBackend(c.String("backend")); err != nil {
		return nil, err
	}
	// A backend without a detector has its schedule checked by the cpu
	// backend's detector, in a pass of its own before the backend's run.
	o.raceOnCPU = c.Bool("race") && o.backend.name != "cpu"
	if o.warmup = c.Int("warmup_iters"); o.warmup < 0 {
		return nil, usageErr("-w %d: want 0 or more warm-up launches", o.warmup)
	}
	o.iters = raceLaunches(c.Bool("race"), o.warmup, o.iters)
	if o.splitMask = c.Int("split-mask"); o.splitMask < 0 {
		return nil, usageErr("--split-mask %d: want 0 or more", o.splitMask)
	}
	if o.splitMask > 0 {
		if !strings.Contains(plan.Collective, "sendrecv") {
			return nil, usageErr("%s: --split-mask applies to sendrecv plans; this one is %s", path, plan.Collective)
		}
		if n := len(plan.GPUs); n%(o.splitMask+1) != 0 {
			return nil, usageErr("%s: --split-mask %d: groups of %d do not divide %d ranks", path, o.splitMask, o.splitMask+1, n)
		}
	}
	if c.Int("threads") < 0 || c.Int("threads") > planfmt.MaxThreadsPerBlock {
		return nil, usageErr("--threads %d: want 1 to %d", c.Int("threads"), planfmt.MaxThreadsPerBlock)
	}
	if c.Duration("timeout") <= 0 {
		return nil, usageErr("--timeout %v: want a positive duration", c.Duration("timeout"))
	}
	o.opts = executor.Options{DType: o.dtype, LL8: c.Bool("ll8"), Race: c.Bool("race") && !o.raceOnCPU, DeadlockTimeout: c.Duration("timeout")}
	if o.budget, err = runBudget(c.String("max-memory"), c.IsSet("max-memory")); err != nil {
		return nil, err
	}
	o.sizes, o.sweep, err = runSizes(c)
	return o, err
}

// pickBackend returns the named backend, or the best built in.
func pickBackend(name string) (runBackend, error) {
	bs := runBackends()
	if name == "" {
		return bs[0], nil
	}
	for _, b := range bs {
		if b.name == name {
			return b, nil
		}
	}
	for _, k := range knownBackends {
		if k == name {
			return runBackend{}, fmt.Errorf("--backend %s: not available in this build (cgo and g++ build gpu-emu)", name)
		}
	}
	return runBackend{}, usageErr("--backend %s: unknown backend (want %s)", name, strings.Join(knownBackends, " or "))
}

// runSizes returns the message sizes to run and whether they are a sweep.
func runSizes(c *cli.Context) ([]uint64, bool, error) {
	sweep := c.IsSet("minbytes") || c.IsSet("maxbytes")
	if c.IsSet("size") {
		if sweep {
			return nil, false, usageErr("give --size or a sweep (-b/-e), not both")
		}
		s, err := bytesize.Parse(c.String("size"))
		if err != nil {
			return nil, false, usageErr("--size: %v", err)
		}
		return []uint64{s}, false, nil
	}
	if !sweep {
		return nil, false, usageErr("run: give a message size: --size SIZE, or a sweep -b MIN -e MAX [-f FACTOR]")
	}
	lo, hi := c.String("minbytes"), c.String("maxbytes")
	if lo == "" {
		lo = hi
	}
	if hi == "" {
		hi = lo
	}
	first, err := bytesize.Parse(lo)
	if err != nil {
		return nil, false, usageErr("-b: %v", err)
	}
	last, err := bytesize.Parse(hi)
	if err != nil {
		return nil, false, usageErr("-e: %v", err)
	}
	if first > last {
		return nil, false, usageErr("-b %d is above -e %d", first, last)
	}
	if c.IsSet("stepbytes") {
		if c.IsSet("stepfactor") {
			return nil, false, usageErr("give -f or -i, not both")
		}
		step, err := bytesize.Parse(c.String("stepbytes"))
		if err != nil || step == 0 {
			return nil, false, usageErr("-i %s: want a positive size", c.String("stepbytes"))
		}
		return harness.StepSweep(first, last, step), true, nil
	}
	f := c.Uint64("stepfactor")
	if f < 2 {
		return nil, false, usageErr("-f %d: want a factor of at least 2", f)
	}
	return harness.Sweep(first, last, f), true, nil
}

func runRun(c *cli.Context, d *deps) error {
	if c.NArg() != 1 {
		return usageErr("run: want exactly one PLAN.json argument, got %d", c.NArg())
	}
	if c.String("backend") == "gpu" && !builtIn("gpu") {
		return handOver(d)
	}
	// The Go runtime's soft memory limit as the user left it (GOMEMLIMIT,
	// or none): the evaluation of a .star input sets its own, which must
	// not outlive it.
	userLimit := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(userLimit)
	in, err := readPlanInput(c, d, c.Args().First())
	if err != nil {
		return namePlan(c.Args().First(), err)
	}
	path := in.name
	plan, err := in.load()
	if err != nil {
		return namePlan(path, err)
	}
	if in.note != "" {
		fmt.Fprintf(d.stderr, "mscclgo: note: %s\n", in.note)
	}
	if plan.AllToAllV != nil || c.IsSet("counts") {
		return runAllToAllV(c, d, path, plan, planfmt.Hash(in.data)) // alltoallv.go
	}
	o, err := parseRunFlags(c, path, plan)
	if err != nil {
		return err
	}
	if world, launched, err := launchedWorld(c); err != nil {
		return err
	} else if launched {
		ctx := c.Context
		if ctx == nil {
			ctx = context.Background()
		}
		o.digest = planfmt.Hash(in.data)
		return runLaunched(ctx, c, d, path, plan, o, world) // runmp.go
	}
	// Let the collector work harder near the budget rather than let
	// garbage grow the process past it (unless GOMEMLIMIT says
	// otherwise).
	limit := userLimit
	if o.budget.bytes > 0 && userLimit == math.MaxInt64 {
		limit = int64(min(o.budget.bytes, math.MaxInt64))
	}
	debug.SetMemoryLimit(limit)
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	backend := o.backend.new(oneProcess(c))
	var traffic func() ([][]gpu.TrafficCount, error)
	if c.Bool("counters") {
		if o.backend.name != "gpu-emu" {
			return usageErr("--counters: the %s backend does not count traffic; gpu-emu does", o.backend.name)
		}
		backend, traffic = trafficBackend(oneProcess(c))
	}
	w := d.stdout
	fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective %s, %d ranks, protocol %s\n", path, plan.Name, plan.Collective, len(plan.GPUs), plan.Protocol)
	raceText := fmt.Sprint(o.opts.Race)
	if o.raceOnCPU {
		raceText = "by the cpu backend's detector over the same plan, sizes and launches, before this backend runs"
	}
	fmt.Fprintf(w, "# backend %s, dtype %s, iters %d, in-place %v, race detection %s\n#\n", backend.Name(), o.dtype.Name(), o.iters, o.inPlace, raceText)
	table := harness.NewTable(w, o.dtype)
	cfg := o.config(plan)
	cfg.Backend = backend
	cfg.KeepGoing = c.Bool("keep-going")
	var (
		ran      int
		races    bool
		deadlock bool
	)
	cfg.Done = func(res harness.SizeResult) {
		if res.Skipped != nil {
			fmt.Fprintf(w, "# skipped size %d: %v\n", res.Size, in.locate(res.Skipped))
			return
		}
		if res.NVLS != "" && !o.nvlsSaid {
			fmt.Fprintf(d.stderr, "mscclgo: %s: NVLS: %s\n", path, res.NVLS)
			o.nvlsSaid = true
		}
		// The race and the wrong data in the order of their launches (a
		// launch's race is found before its outputs are checked).
		race, wrong := res.Race, res.FirstWrong
		if race != nil && (wrong == nil || race.Launch <= wrong.Launch) {
			reportRace(d.stderr, fmt.Sprintf("mscclgo: %s: size %d, launch %d: ", path, res.Size, race.Launch), res.Instance, race.Err, c.Bool("explain"))
			race = nil
		}
		if wrong != nil {
			explain := func(w io.Writer) bool {
				return explainWrong(ctx, w, res.Instance, res.Layout, cfg.Checker, o.opts)
			}
			reportWrong(d.stderr, path, res.Instance, res.Layout, wrong, explain, c.Bool("explain"))
		}
		if race != nil {
			reportRace(d.stderr, fmt.Sprintf("mscclgo: %s: size %d, launch %d: ", path, res.Size, race.Launch), res.Instance, race.Err, c.Bool("explain"))
		}
		if dl := res.Deadlock; dl != nil {
			launch := fmt.Sprintf("launch %d", dl.Launch)
			if dl.Warmup {
				launch = "warm-up " + launch
			}
			reportDeadlock(d.stderr, fmt.Sprintf("mscclgo: %s: size %d, %s: ", path, res.Size, launch), res.Instance, dl.Err, c.Bool("explain"))
			fmt.Fprintf(w, "# size %d: deadlock (reported on standard error)\n", res.Size)
			deadlock = true
			return
		}
		ran++
		races = races || res.Race != nil
		table.Row(res.Layout.BufferLayout, res.Row(o.iters))
		if traffic != nil {
			counts, err := traffic()
			if err == nil {
				err = gpu.WriteTraffic(w, res.Size, res.Instance, counts)
			}
			if err != nil {
				fmt.Fprintf(w, "# counters, size %d: %v\n", res.Size, err)
			}
		}
		if res.Stopped {
			fmt.Fprintf(w, "# stopped after size %d, which has wrong data (--keep-going runs the remaining sizes)\n", res.Size)
		}
	}
	if o.raceOnCPU {
		rc := o.config(plan)
		rc.Backend = cpu.New()
		rc.Memory = harness.MemoryOptions{}
		rc.Options.Race = true
		rc.KeepGoing = true
		rc.Done = func(res harness.SizeResult) {
			if res.Race != nil {
				reportRace(d.stderr, fmt.Sprintf("mscclgo: %s: size %d, launch %d (cpu detector): ", path, res.Size, res.Race.Launch), res.Instance, res.Race.Err, c.Bool("explain"))
				races = true
			}
		}
		if _, err := harness.Run(ctx, rc); err != nil {
			return o.runError(path, err, in.locate)
		}
	}
	if _, err := harness.Run(ctx, cfg); err != nil {
		return o.runError(path, err, in.locate)
	}
	if deadlock {
		return &reportedError{code: ExitDeadlock}
	}
	table.End()
	switch {
	case races:
		return &reportedError{code: ExitRace}
	case table.Wrong > 0:
		fmt.Fprintf(d.stderr, "mscclgo: %s: %d wrong element(s)\n", path, table.Wrong)
		return &reportedError{code: ExitError}
	case ran == 0:
		return fmt.Errorf("%s: no size of the sweep suits the plan", path)
	}
	return nil
}

// config is the harness run of o for plan, without its backend.
func (o *runOptions) config(plan *planfmt.Plan) harness.Config {
	return harness.Config{
		Plan:      plan,
		Sizes:     o.sizes,
		Sweep:     o.sweep,
		DType:     o.dtype,
		InPlace:   o.inPlace,
		Iters:     o.iters,
		Warmup:    o.warmup,
		Fill:      o.fill,
		SplitMask: o.splitMask,
		Options:   o.opts,
		Memory:    o.backend.memory,
		Budget:    o.budget.bytes,
		Checker:   harness.NewChecker(),
	}
}

// runError names the plan and the size of err, an error of harness.Run;
// locate, if set, points a size the plan rejects
// at the source of a .star input.
func (o *runOptions) runError(path string, err error, locate func(error) error) error {
	var be *harness.BudgetError
	if errors.As(err, &be) {
		return checkBudget(path, be.Size, be.Use, o.budget) // it names the plan and the size
	}
	var se *harness.SizeError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if se.Prepare && locate != nil {
		return atSize(path, se.Size, locate(se.Err))
	}
	return atSize(path, se.Size, se.Err)
}

// atSize names the plan and the message size of err, the size once: not
// again when the error says that its message names it already
// (plan.PlanError.NamesSize: "message size 1024 (the input size): below
// min_message_size 2048").
func atSize(path string, size uint64, err error) error {
	var named interface{ NamesSize(uint64) bool }
	if errors.As(err, &named) && named.NamesSize(size) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: size %d: %w", path, size, err)
}

// namePlan makes err, a problem of the plan at path, start with path, as
// check's lines do; errors already printed, command-line mistakes (usage
// errors) and errors that name path already (namesFile) are left alone.
func namePlan(path string, err error) error {
	var reported *reportedError
	var ee *exitError
	if errors.As(err, &reported) || errors.As(err, &ee) || namesFile(err, path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// fileError is an error whose message starts with the name of the file
// it is about, as given on the command line.
type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// aboutFile marks err (nil stays nil) as one whose message names path
// first.
func aboutFile(path string, err error) error {
	if err == nil {
		return nil
	}
	return &fileError{path: path, err: err}
}

// namesFile reports whether err says that its message names path first:
// a fileError or an infile.Error of path.
func namesFile(err error, path string) bool {
	var fe *fileError
	var ie *infile.Error
	return errors.As(err, &fe) && fe.path == path || errors.As(err, &ie) && ie.Path == path
}

// reportWrong reports the wrong data of a launch: explained by explain
// (explainWrong) when it can, or else by its first wrong elements
// (harness.WrongReport.WriteElements).
func reportWrong(out io.Writer, path string, inst *executor.Instance, l *harness.Layout, rep *harness.WrongReport, explain func(io.Writer) bool, all bool) {
	var w strings.Builder
	limit := maxReportLines
	if all {
		limit = 0
	}
	defer func() { limitLines(out, w.String(), limit) }()
	fmt.Fprintf(&w, "mscclgo: %s: size %d, launch %d: wrong data:\n", path, l.Size, rep.Launch)
	if explain != nil && explain(&w) {
		return
	}
	rep.WriteElements(&w, inst.ChunkBytes)
}
