package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/dist"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
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
			&cli.BoolFlag{Name: "keep-going", Usage: "run the remaining sizes after one with wrong data (default: stop there)"},
			&cli.BoolFlag{Name: "race", Usage: "detect races: conflicting accesses without a happens-before order"},
			&cli.BoolFlag{Name: "ll8", Usage: "use 8-byte LL packets instead of 16-byte ones"},
			&cli.DurationFlag{Name: "timeout", Value: time.Second, Usage: "report a deadlock after `D` without progress"},
			&cli.BoolFlag{Name: "integer-fill", Usage: "int32: fill with integers 0..1023 instead of the reference fill, which is all zeros (an extension)"},
			&cli.StringFlag{Name: "max-memory", Usage: "refuse a size whose run needs more than `SIZE` of memory (0: no limit); also bounds a .star evaluation", DefaultText: "half the machine's memory"},
			countsFlag(),
			&cli.BoolFlag{Name: "one-process", Usage: "run every rank in this process even when launcher variables (mpirun, torchrun) are set"},
			&cli.DurationFlag{Name: "join-timeout", Value: dist.DefaultTimeout, Usage: "one process per rank: wait `D` for every rank to join"},
			&cli.DurationFlag{Name: "peer-timeout", Value: dist.DefaultHeartbeatTimeout, Usage: "one process per rank: a rank silent for `D` is lost"},
		}, scriptFlags()...),
		Action:       func(c *cli.Context) error { return runRun(c, d) },
		OnUsageError: onUsageError,
	}
}

// deviceTimer is a session that times its last launch on the device
// (the GPU backends), excluding its copies of the caller's buffers.
type deviceTimer interface {
	DeviceTime() time.Duration
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
	fill      harness.FillMode
	budget    memoryBudget
	// digest is the plan's SHA-256, which the ranks of a launched run
	// compare.
	digest string
}

// parseRunFlags parses the flags of run for plan, read from path.
func parseRunFlags(c *cli.Context, path string, plan *executor.Plan) (*runOptions, error) {
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
	if c.Bool("race") && o.backend.name != "cpu" {
		return nil, usageErr("--race: the %s backend does not detect races; the cpu backend does", o.backend.name)
	}
	if o.warmup = c.Int("warmup_iters"); o.warmup < 0 {
		return nil, usageErr("-w %d: want 0 or more warm-up launches", o.warmup)
	}
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
	if c.Int("threads") < 0 || c.Int("threads") > executor.MaxThreadsPerBlock {
		return nil, usageErr("--threads %d: want 1 to %d", c.Int("threads"), executor.MaxThreadsPerBlock)
	}
	if c.Duration("timeout") <= 0 {
		return nil, usageErr("--timeout %v: want a positive duration", c.Duration("timeout"))
	}
	o.opts = executor.Options{DType: o.dtype, LL8: c.Bool("ll8"), Race: c.Bool("race"), DeadlockTimeout: c.Duration("timeout")}
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
		s, err := parseSize(c.String("size"))
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
	first, err := parseSize(lo)
	if err != nil {
		return nil, false, usageErr("-b: %v", err)
	}
	last, err := parseSize(hi)
	if err != nil {
		return nil, false, usageErr("-e: %v", err)
	}
	if first > last {
		return nil, false, usageErr("-b %d is above -e %d", first, last)
	}
	var sizes []uint64
	if c.IsSet("stepbytes") {
		if c.IsSet("stepfactor") {
			return nil, false, usageErr("give -f or -i, not both")
		}
		step, err := parseSize(c.String("stepbytes"))
		if err != nil || step == 0 {
			return nil, false, usageErr("-i %s: want a positive size", c.String("stepbytes"))
		}
		for s := first; s <= last; s += step {
			sizes = append(sizes, s)
			if s > last-step {
				break
			}
		}
		return sizes, true, nil
	}
	f := c.Uint64("stepfactor")
	if f < 2 {
		return nil, false, usageErr("-f %d: want a factor of at least 2", f)
	}
	for s := first; s <= last; s *= f {
		sizes = append(sizes, s)
		if s == 0 || s > last/f {
			break
		}
	}
	return sizes, true, nil
}

// runResult is the outcome of one size.
type runResult struct {
	timeUS   float64
	wrong    uint64
	checked  bool
	race     bool
	deadlock bool
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
		return runAllToAllV(c, d, path, plan) // alltoallv.go
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
		o.digest = executor.PlanHash(in.data)
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
	checker := harness.NewChecker()
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	backend := o.backend.new(c.Int("threads"))
	w := d.stdout
	fmt.Fprintf(w, "# mscclgo run %s: plan %q, collective %s, %d ranks, protocol %s\n", path, plan.Name, plan.Collective, len(plan.GPUs), plan.Protocol)
	fmt.Fprintf(w, "# backend %s, dtype %s, iters %d, in-place %v, race detection %v\n#\n", backend.Name(), o.dtype.Name(), o.iters, o.inPlace, o.opts.Race)
	table := newRunTable(w, o.dtype)

	var (
		ran   int
		races bool
	)
	for _, size := range o.sizes {
		layout, inst, err := prepareSize(path, plan, size, o)
		if err != nil {
			var me *memoryError
			if errors.As(err, &me) {
				return err // it names the plan and the size; larger sizes need more
			}
			err = in.locate(err)
			if !o.sweep {
				return atSize(path, size, err)
			}
			fmt.Fprintf(w, "# skipped size %d: %v\n", size, err)
			continue
		}
		res, err := runSize(ctx, backend, inst, layout, checker, o, path, d.stderr)
		if err != nil {
			return atSize(path, size, err)
		}
		if res.deadlock {
			fmt.Fprintf(w, "# size %d: deadlock (reported on standard error)\n", size)
			return &reportedError{code: ExitDeadlock}
		}
		ran++
		races = races || res.race
		table.row(layout, res)
		if res.wrong > 0 && !c.Bool("keep-going") && size != o.sizes[len(o.sizes)-1] {
			fmt.Fprintf(w, "# stopped after size %d, which has wrong data (--keep-going runs the remaining sizes)\n", size)
			break
		}
	}
	table.end()
	switch {
	case races:
		return &reportedError{code: ExitRace}
	case table.wrong > 0:
		fmt.Fprintf(d.stderr, "mscclgo: %s: %d wrong element(s)\n", path, table.wrong)
		return &reportedError{code: ExitError}
	case ran == 0:
		return fmt.Errorf("%s: no size of the sweep suits the plan", path)
	}
	return nil
}

// atSize names the plan and the message size of err, the size once: not
// again when the message names it already ("message size 1024 (the input
// size): below min_message_size 2048").
func atSize(path string, size uint64, err error) error {
	if regexp.MustCompile(`\bsize ` + strconv.FormatUint(size, 10) + `\b`).MatchString(err.Error()) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: size %d: %w", path, size, err)
}

// namePlan makes err, a problem of the plan at path, start with path, as
// check's lines do; errors already printed and command-line mistakes
// (usage errors) are left alone.
func namePlan(path string, err error) error {
	var reported *reportedError
	var ee *exitError
	if errors.As(err, &reported) || errors.As(err, &ee) ||
		strings.HasPrefix(err.Error(), path+":") || strings.HasPrefix(err.Error(), path+" ") {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// formatTime prints a time in µs as nccl-tests does: fewer decimals for
// longer times.
func formatTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

// prepareSize lays out the buffers for size, instantiates the plan, makes
// the checks of a launch (executor.CheckLaunch) and refuses a run above
// the memory budget (a *memoryError), all before anything is allocated
// for the size.
func prepareSize(path string, plan *executor.Plan, size uint64, o *runOptions) (*executor.BufferLayout, *executor.Instance, error) {
	layout, err := executor.PlanLayout(plan, size, o.dtype, o.inPlace)
	if err != nil {
		return nil, nil, err
	}
	layout.Fill = o.fill
	layout.SplitMask = o.splitMask
	inst, err := executor.Instantiate(plan, layout.Sizes)
	if err != nil {
		return nil, nil, err
	}
	use := harness.EstimateMemory(inst, layout, harness.MemoryOptions{
		Iters:        o.iters + o.warmup,
		Race:         o.opts.Race,
		Tables:       true,
		DeviceCopies: o.backend.name == "gpu-emu",
		LaunchCheck:  o.backend.name != "cpu",
	})
	if err := checkBudget(path, size, use, o.budget); err != nil {
		return nil, nil, err
	}
	if err := executor.CheckLaunch(inst, layout, o.opts.LL8); err != nil {
		return nil, nil, err
	}
	return layout, inst, nil
}

// runSize runs the iterations of one size: fill, launch, check. The
// inputs and the expected results come from checker's tables, which are
// built once for the largest size and reused.
func runSize(ctx context.Context, backend executor.Backend, inst *executor.Instance, layout *executor.BufferLayout, checker *harness.Checker, o *runOptions, path string, stderr io.Writer) (res runResult, err error) {
	sess, err := backend.Open(inst, o.opts)
	if err != nil {
		return res, err
	}
	if n, ok := sess.(interface{ NVLS() string }); ok && n.NVLS() != "" && !o.nvlsSaid {
		fmt.Fprintf(stderr, "mscclgo: %s: NVLS: %s\n", path, n.NVLS())
		o.nvlsSaid = true
	}
	defer func() {
		if cerr := sess.Close(); err == nil && !res.deadlock {
			err = cerr
		}
	}()
	slots := make([][]executor.RankBuffers, layout.Slots())
	for i := range slots {
		slots[i] = layout.Alloc()
	}
	for it := 0; it < o.warmup; it++ {
		// Warm-up launches: filled as the first timed one, neither timed
		// nor checked (nccl-tests -w).
		bufs := slots[it%len(slots)]
		if err := fillInputs(checker, layout, bufs, 0); err != nil {
			return res, err
		}
		if err := sess.Launch(ctx, bufs); err != nil {
			var dl *executor.DeadlockError
			if errors.As(err, &dl) {
				fmt.Fprintf(stderr, "mscclgo: %s: size %d, warm-up launch %d: %v\n", path, layout.Size, it, err)
				res.deadlock = true
				return res, nil
			}
			var race *executor.RaceError
			if !errors.As(err, &race) {
				return res, fmt.Errorf("warm-up launch %d: %w", it, err)
			}
		}
	}
	var elapsed time.Duration
	reportedWrong := false
	res.checked = layout.Checked()
	for it := 0; it < o.iters; it++ {
		bufs := slots[it%len(slots)]
		if err := fillInputs(checker, layout, bufs, it); err != nil {
			return res, err
		}
		start := time.Now()
		lerr := sess.Launch(ctx, bufs)
		if dt, ok := sess.(deviceTimer); ok {
			// The kernel alone, without the copies to and from the device.
			elapsed += dt.DeviceTime()
		} else {
			elapsed += time.Since(start)
		}
		var dl *executor.DeadlockError
		var race *executor.RaceError
		switch {
		case errors.As(lerr, &dl):
			fmt.Fprintf(stderr, "mscclgo: %s: size %d, launch %d: %v\n", path, layout.Size, it, lerr)
			res.deadlock = true
			return res, nil
		case errors.As(lerr, &race):
			if !res.race {
				fmt.Fprintf(stderr, "mscclgo: %s: size %d, launch %d: %v\n", path, layout.Size, it, lerr)
			}
			res.race = true
		case lerr != nil:
			return res, lerr
		}
		if !res.checked {
			continue
		}
		wrong, err := checker.Check(layout, bufs, it)
		if err != nil {
			return res, err
		}
		for _, n := range wrong {
			if n > 0 && res.wrong == 0 && !reportedWrong {
				// The first launch with wrong data: where, per rank.
				reportedWrong = true
				explain := func(w io.Writer) bool { return explainWrong(ctx, w, inst, layout, checker, o.opts) }
				reportWrong(stderr, path, inst, layout, bufs, it, wrong, explain)
			}
			res.wrong += n
		}
	}
	res.timeUS = max(float64(elapsed.Nanoseconds())/1e3/float64(o.iters), 1e-3)
	return res, nil
}

// fillInputs fills the inputs of launch seq: from checker's generator
// table when the outputs are checked (the table serves the checks too),
// in place otherwise (no table to keep).
func fillInputs(checker *harness.Checker, l *executor.BufferLayout, bufs []executor.RankBuffers, seq int) error {
	if l.Checked() {
		return checker.FillInputs(l, bufs, seq)
	}
	l.FillInputs(bufs, seq)
	return nil
}

// maxWrongShown is how many wrong elements reportWrong shows per rank.
const maxWrongShown = 3

// reportWrong reports the wrong data of launch it: explained by explain
// (explainWrong) when it can, or else, for each rank with wrong data, its
// first wrong elements: byte offset, chunk, expected and actual values,
// and the ops that write that byte (with their .star positions).
func reportWrong(w io.Writer, path string, inst *executor.Instance, l *executor.BufferLayout, bufs []executor.RankBuffers, it int, wrong []uint64, explain func(io.Writer) bool) {
	fmt.Fprintf(w, "mscclgo: %s: size %d, launch %d: wrong data:\n", path, l.Size, it)
	if explain != nil && explain(w) {
		return
	}
	for r, n := range wrong {
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "  rank %d: %d wrong element(s)\n", r, n)
		for _, e := range l.Wrong(bufs, it, r, maxWrongShown) {
			chunk := ""
			if inst.ChunkBytes > 0 {
				chunk = fmt.Sprintf(", chunk %d", e.Offset/inst.ChunkBytes)
			}
			fmt.Fprintf(w, "    output[%d]%s: want %g, got %g\n", e.Offset, chunk, e.Want, e.Got)
			ws := writers(inst, r, executor.Output, e.Offset)
			if in, ok := l.OutputInInput(r, e.Offset); ok {
				ws = append(ws, writers(inst, r, executor.Input, in)...)
			}
			switch {
			case len(ws) == 0:
				fmt.Fprintf(w, "      no op writes this byte (an op's chunk index or peer may be off)\n")
			default:
				for _, s := range ws {
					fmt.Fprintf(w, "      written by %s\n", s)
				}
			}
		}
	}
}

// maxWriters bounds the ops writers lists.
const maxWriters = 4

// writers lists the ops of inst whose destinations cover byte off of
// rank's buffer bt: local destinations of the rank's own ops, remote ones
// of its peers', and switch destinations whose group it is in.
func writers(inst *executor.Instance, rank int, bt executor.BufferType, off uint64) []string {
	var out []string
	covers := func(r executor.Region, owner int) bool {
		return owner == rank && r.Buffer == bt && off >= r.Offset && off-r.Offset < r.Size
	}
	var visit func(r int, tb int, op *executor.OpInstance)
	visit = func(r, tb int, op *executor.OpInstance) {
		for i := range op.Body {
			visit(r, tb, &op.Body[i])
		}
		for i, d := range op.Dst {
			hit := false
			switch executor.DstKind(op.Type, i) {
			case executor.SwitchOperand:
				if d.Switch >= 0 && d.Switch < len(inst.Ranks[r].Switches) {
					g := inst.Ranks[r].Switches[d.Switch]
					for _, m := range g.Ranks {
						hit = hit || (m == rank && g.Buffer == bt && off >= d.Offset && off-d.Offset < d.Size)
					}
				}
			case executor.RemoteOperand:
				hit = covers(d, d.Rank)
			default:
				hit = covers(d, r)
			}
			if hit && len(out) < maxWriters {
				out = append(out, fmt.Sprintf("rank %d tb %d %s", r, tb, op.Describe()))
				return
			}
		}
	}
	for r := range inst.Ranks {
		for _, tb := range inst.Ranks[r].TBs {
			for i := range tb.Ops {
				visit(r, tb.ID, &tb.Ops[i])
			}
		}
	}
	return out
}
