package cli

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/internal/bytesize"
	"github.com/mscclgo/mscclgo/plan"
)

func checkCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "validate execution plans as the MSCCL++ executor would load them",
		ArgsUsage: "PLAN.json|ALGO.star [...]",
		Description: "Loads each plan and prints every problem found, one per line prefixed with the\n" +
			"file name: JSON errors, unknown ops, ids out of range, operands that do not fit their\n" +
			"op, executor limits, channels that do not pair between ranks. Warnings (lines with\n" +
			"\"warning:\") do not fail the check. With --size, a clean plan is also instantiated\n" +
			"for that message size (as mscclgo run lays out the buffers: 1K = 1024 bytes, elements\n" +
			"of --dtype) and checked for what a launch of mscclgo run would reject at that size.\n" +
			"A .star script (or a bundled algorithm's name) is evaluated first (-D, --program); a\n" +
			"plan with a source map beside it (eval --source-map) names each op's .star line.\n" +
			"Exit status: 0 when every plan is clean, 1 when any has a problem, 2 on usage errors.",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "size", Aliases: []string{"s"}, Usage: "also instantiate at message size `SIZE` (repeatable; K, M, G suffixes)"},
			&cli.StringFlag{Name: "dtype", Aliases: []string{"d"}, Value: "float16", Usage: "element `TYPE` of the --size checks: float16 (half), bfloat16, float32 (float), int32"},
		}, scriptFlags()...),
		Action:       func(c *cli.Context) error { return runCheck(c, d) },
		OnUsageError: onUsageError,
	}
}

func runCheck(c *cli.Context, d *deps) error {
	if c.NArg() == 0 {
		return usageErr("check: want at least one PLAN.json argument")
	}
	var sizes []uint64
	for _, s := range c.StringSlice("size") {
		n, err := bytesize.Parse(s)
		if err != nil {
			return usageErr("--size: %v", err)
		}
		sizes = append(sizes, n)
	}
	dt, err := executor.ParseDType(c.String("dtype"))
	if err != nil {
		return usageErr("--dtype: %v", err)
	}
	failed := false
	for _, path := range c.Args().Slice() {
		if !checkFile(c, d, path, sizes, dt) {
			failed = true
		}
	}
	if failed {
		return &reportedError{code: ExitError}
	}
	return nil
}

// checkFile prints the problems of one plan and reports whether it is
// clean (warnings allowed). Each of sizes is laid out as run lays it out
// by default (elements of dt, the plan's inplace field), instantiated and
// checked as a launch would check it; nothing is allocated per byte.
func checkFile(c *cli.Context, d *deps, path string, sizes []uint64, dt executor.ElemType) bool {
	w := d.stdout
	in, err := readPlanInput(c, d, path)
	if err != nil {
		if _, reported := err.(*reportedError); !reported {
			if !namesFile(err, path) {
				err = fmt.Errorf("%s: %w", path, err)
			}
			fmt.Fprintln(w, err)
		}
		return false
	}
	if in.note != "" {
		fmt.Fprintf(d.stderr, "mscclgo: note: %s\n", in.note)
	}
	path = in.name
	clean := true
	for _, p := range plan.Check(in.data) {
		if plan.IsWarning(p) {
			fmt.Fprintf(w, "%s: warning: %v\n", path, in.locate(p))
			continue
		}
		fmt.Fprintf(w, "%s: %v\n", path, in.locate(p))
		clean = false
	}
	if !clean {
		return false
	}
	pl, err := in.load()
	if err != nil { // unreachable: Check found no error
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return false
	}
	if pl.AllToAllV != nil {
		return checkVarPlan(w, path, pl, dt)
	}
	checkReuse(w, path, pl, sizes, dt)
	for _, size := range sizes {
		layout, err := executor.PlanLayout(pl, size, dt, pl.Inplace)
		var inst *executor.Instance
		if err == nil {
			inst, err = executor.Instantiate(pl, layout.Sizes)
		}
		if err == nil {
			err = executor.CheckLaunch(inst, layout, false)
		}
		if err != nil {
			fmt.Fprintf(w, "%s: size %d: %v\n", path, size, in.locate(err))
			clean = false
		}
	}
	if clean {
		fmt.Fprintf(w, "%s: ok\n", path)
	}
	return clean
}

// maxReuseWarnings bounds the launch-boundary warnings check prints for
// one plan.
const maxReuseWarnings = 5

// checkReuse prints a warning for every buffer a peer writes that the
// next launch may write again before this launch's access to it by
// another rank (executor.CheckReuse), on the plan instantiated at the
// first of sizes or the smallest size it accepts.
func checkReuse(w io.Writer, path string, pl *plan.Plan, sizes []uint64, dt executor.ElemType) {
	if len(sizes) == 0 {
		sizes = harness.CheckSizes(pl, dt, 1<<20, 1)
	}
	if len(sizes) == 0 {
		return
	}
	layout, err := executor.PlanLayout(pl, sizes[0], dt, pl.Inplace)
	if err != nil {
		return
	}
	inst, err := executor.Instantiate(pl, layout.Sizes)
	if err != nil {
		return // reported by the --size checks
	}
	rs := executor.CheckReuse(inst)
	for i, r := range rs {
		if i == maxReuseWarnings {
			fmt.Fprintf(w, "%s: warning: %d more buffer(s) reused in the next launch with no handshake\n", path, len(rs)-i)
			break
		}
		fmt.Fprintf(w, "%s: warning: %v\n", path, r)
	}
}
