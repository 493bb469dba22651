package cli

// selectcmd.go is `mscclgo select`: where the plan directories are, the
// recovery of the default set after an interrupted install, and the
// report of the chosen and rejected plans.

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/model"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/planset"
	"github.com/mscclgo/mscclgo/planset/install"
)

// planSources returns the plan directories to search, in order: the --plans
// directories, then $MSCCLGO_PLAN_PATH, then the default set (or --dir).
// The default set is first recovered from an interrupted install, with a
// note on stderr, unless an install is running.
func planSources(c *cli.Context, stderr io.Writer) ([]planset.Source, error) {
	def := c.String("dir")
	if def == "" {
		var err error
		if def, err = planset.DefaultDir(); err != nil {
			return nil, err
		}
	}
	recoverDefault(def, stderr)
	return planset.OpenSources(planset.SearchPath(c.StringSlice("plans"), def), def)
}

// recoverDefault cleans up after an interrupted install into dir, noting
// on stderr what it did. It never fails select: with an install running it
// leaves everything alone (the running install's files are not leftovers),
// and a failure to clean up is only noted.
func recoverDefault(dir string, stderr io.Writer) {
	rec, err := install.RecoverPlanSet(dir)
	switch {
	case errors.Is(err, install.ErrRunning):
	case err != nil:
		fmt.Fprintf(stderr, "mscclgo: note: could not check %s for the leftovers of an interrupted install: %v\n", dir, err)
	case !rec.Empty():
		fmt.Fprintf(stderr, "mscclgo: note: %s\n", rec)
	}
}

func selectCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:  "select",
		Usage: "print the installed plan a collective call would use, and why",
		Description: "Searches the --plans directories, then $MSCCLGO_PLAN_PATH, then the default set written by\n" +
			"mscclgo install, and prints the plan that fits the call (or \"no plan\") with the reason\n" +
			"every other plan was rejected. If an install into the default set was interrupted, select first\n" +
			"cleans up after it (unless an install is running), putting the previous set back if needed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "collective", Aliases: []string{"c"}, Usage: "`NAME`: allreduce, allgather, reducescatter, alltoall, alltoallv or sendrecv (required)"},
			&cli.IntFlag{Name: "world-size", Aliases: []string{"n"}, Usage: "number of ranks (`N`, required)"},
			&cli.IntFlag{Name: "ranks-per-node", Usage: "ranks per node (`N`; default: the world size)"},
			&cli.StringFlag{Name: "size", Usage: "message `SIZE` in bytes, nccl-tests style (1K, 64M): output size for allgather, input size otherwise; required but for alltoallv"},
			&cli.BoolFlag{Name: "in-place", Usage: "the call is in place"},
			&cli.StringFlag{Name: "dtype", Aliases: []string{"d"}, Value: "float16", Usage: "data `TYPE`: float16, bfloat16, float32, int32"},
			&cli.BoolFlag{Name: "nvls", Usage: "NVLink SHARP (switch channels) is available"},
			&cli.BoolFlag{Name: "host", Usage: "the call is on host memory (the CPU backend, as the NCCL library runs CPU tensors): the plans' size ranges do not apply, the cheapest by the CPU cost model wins"},
			&cli.StringSliceFlag{Name: "plans", Usage: "search plan `DIR` before the defaults (repeatable; its index.json, or else its *.json plans as single-node plans)"},
			&cli.StringFlag{Name: "dir", Usage: "the default plan set `DIR` (default: $MSCCLGO_CACHE_DIR/default or ~/.cache/mscclgo/default)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list every rejected plan, of any collective, also when a plan is found"},
			&cli.StringFlag{Name: "hw", Usage: "rank the plans that fit by their predicted time on hardware profile `NAME` (or a profile file) and pick the fastest; implies --nvls when the profile has NVLS"},
			&cli.StringFlag{Name: "launch", Value: "graph", Usage: "with --hw: the launch overhead of the predictions, `graph` or kernel"},
		},
		Action:       func(c *cli.Context) error { return runSelect(c, d) },
		OnUsageError: onUsageError,
	}
}

// selectable returns the collectives select accepts: those with a
// defined result, and alltoallv.
func selectable() []string {
	c := slices.DeleteFunc(plan.Collectives(), func(s string) bool { return s == plan.TestCollective })
	return append(c, plan.AllToAllVCollective)
}

func runSelect(c *cli.Context, d *deps) error {
	// Every missing flag at once (a parser's required flags would be
	// reported before --size, which is required but for alltoallv).
	var missing []string
	if !c.IsSet("collective") {
		missing = append(missing, "--collective (-c) NAME")
	}
	if !c.IsSet("world-size") {
		missing = append(missing, "--world-size (-n) N")
	}
	if !c.IsSet("size") && !strings.EqualFold(c.String("collective"), plan.AllToAllVCollective) {
		missing = append(missing, "--size SIZE")
	}
	if len(missing) > 0 {
		return usageErr("select: missing %s (see mscclgo select --help)", strings.Join(missing, ", "))
	}
	coll := strings.ToLower(c.String("collective"))
	if known := selectable(); !slices.Contains(known, coll) {
		return usageErr("--collective %q: unknown collective (want %s)", c.String("collective"), strings.Join(known, ", "))
	}
	if n := c.Int("world-size"); n < 1 {
		return usageErr("--world-size %d: want at least 1 rank", n)
	}
	if n := c.Int("ranks-per-node"); n < 0 {
		return usageErr("--ranks-per-node %d: want at least 1 rank (or 0 for the world size)", n)
	}
	var size uint64
	var err error
	// alltoallv plans fit any size (their block sizes are per call), so
	// --size is optional for them.
	if coll != plan.AllToAllVCollective && !c.IsSet("size") {
		return usageErr("select: give the message size: --size SIZE")
	}
	if coll != plan.AllToAllVCollective || c.IsSet("size") {
		if size, err = bytesize.Parse(c.String("size")); err != nil {
			return usageErr("--size: %v", err)
		}
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return usageErr("--dtype: %v", err)
	}
	req := planset.Request{
		Collective:   coll,
		WorldSize:    c.Int("world-size"),
		RanksPerNode: c.Int("ranks-per-node"),
		Size:         size,
		InPlace:      c.Bool("in-place"),
		ElementSize:  dt.Size(),
		NVLS:         c.Bool("nvls"),
		Host:         c.Bool("host"),
	}
	if req.Host && c.IsSet("hw") {
		return usageErr("--host and --hw: a call on host memory is ranked by the CPU cost model, not a hardware profile")
	}
	if req.RanksPerNode == 0 {
		req.RanksPerNode = req.WorldSize
	}
	sources, err := planSources(c, d.stderr)
	if err != nil {
		return err
	}
	var predict planset.Predictor
	if c.IsSet("hw") {
		if predict, err = selectPredictor(c, &req, dt); err != nil {
			return err
		}
	} else if c.IsSet("launch") {
		return usageErr("--launch applies to --hw")
	}
	choice, err := planset.SelectBy(sources, req, predict)
	if err == nil {
		fmt.Fprintf(d.stdout, "%s\n  plan: %s\n  why: %s\n", filepath.Join(choice.Dir, choice.Entry.File), choice.Entry.Name, choice.Why)
		for i, r := range choice.Ranking {
			fmt.Fprintf(d.stdout, "  %d. %9.2f µs  %s\n", i+1, r.TimeUS, r.Entry.Name)
		}
	} else {
		fmt.Fprintf(d.stdout, "no plan: %v\n", err)
	}
	if c.Bool("verbose") || err != nil {
		planset.WriteRejected(d.stdout, choice.Rejected, req, c.Bool("verbose"))
	}
	if err != nil {
		return &reportedError{code: ExitError}
	}
	return nil
}

// selectPredictor returns the predictor of select --hw, and makes req ask
// for NVLS when the profile has it.
func selectPredictor(c *cli.Context, req *planset.Request, dt executor.ElemType) (planset.Predictor, error) {
	hw, err := model.LoadProfile(c.String("hw"))
	if err != nil {
		return nil, err
	}
	mo, err := launchOption(c.String("launch"))
	if err != nil {
		return nil, err
	}
	mo.NoTimeline = true
	req.NVLS = req.NVLS || hw.NVLS
	return func(dir string, e planset.Entry) (float64, error) {
		plan, err := executor.LoadFile(filepath.Join(dir, e.File))
		if err != nil {
			return 0, err
		}
		o := mo
		o.RanksPerNode = e.RanksPerNode
		pt, err := model.PredictSize(plan, req.Size, dt, req.InPlace, hw, o)
		if err != nil {
			return 0, err
		}
		return pt.Time, nil
	}, nil
}
