package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/emit"
	"github.com/mscclgo/mscclgo/internal/atomicfile"
	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

func evalCommand(d *deps) *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "evaluate an algorithm and write its execution plans",
		ArgsUsage: "FILE.star|BUNDLED_NAME",
		Description: "Evaluates FILE (or the bundled algorithm of that name) and writes the plan of every\n" +
			"program it creates. With one program the plan goes to -o OUT or standard output; with\n" +
			"several, -o names a directory that receives NAME.json for each. Plans are written\n" +
			"atomically: a failed evaluation creates or changes no file.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the plan to `OUT` (a directory when the script creates several programs)"},
			&cli.StringSliceFlag{Name: "define", Aliases: []string{"D"}, Usage: "set script parameter `name=value` (repeatable)"},
			&cli.StringFlag{Name: "program", Usage: "write only the program named `NAME`"},
			&cli.BoolFlag{Name: "params", Usage: "list the parameters the script declares and write no plan"},
			&cli.BoolFlag{Name: "strict", Usage: "treat the warnings (what the MSCCL++ executor cannot run or mis-runs) as errors: write no plan"},
			&cli.BoolFlag{Name: "source-map", Usage: "also write OUT.map beside each plan: the .star position of every op, which check and run then show (needs -o)"},
		}, evalLimitFlags(true)...),
		Action:       func(c *cli.Context) error { return interruptibleOutput(c, func() error { return runEval(c, d) }) },
		OnUsageError: onUsageError,
	}
}

// parseDefines turns -D name=value flags into a map.
func parseDefines(defs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range defs {
		name, value, ok := strings.Cut(d, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, usageErr("-D %q: want name=value", d)
		}
		if _, dup := out[name]; dup {
			return nil, usageErr("-D %s given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

func runEval(c *cli.Context, d *deps) error {
	if c.NArg() != 1 {
		return usageErr("eval: want exactly one FILE argument, got %d", c.NArg())
	}
	defines, err := parseDefines(c.StringSlice("define"))
	if err != nil {
		return err
	}
	src, name, err := algorithms.Resolve(c.Args().First())
	if err != nil {
		return err
	}
	lim, err := evalLimits(c)
	if err != nil {
		return err
	}
	defer starlib.EvalGC()()
	res, err := starlib.Eval(src, name, starlib.Options{
		Defines: defines,
		Limits:  lim,
		Stderr:  d.stderr,
		Context: c.Context,
	})
	if err != nil {
		return reportScriptError(d.stderr, err)
	}
	if c.Bool("params") {
		return listParams(d.stdout, res.Params)
	}
	progs, err := res.Pick(c.String("program"), src.Display(name))
	if err != nil {
		return err
	}
	if c.Bool("strict") {
		// The warnings need the compiled program: compile first, write
		// nothing if any.
		bad := false
		for _, p := range progs {
			if _, err := p.Plan(); err != nil {
				return reportScriptError(d.stderr, err)
			}
			bad = printWarnings(d.stderr, p, "error") || bad
		}
		if bad {
			return &reportedError{code: ExitError}
		}
	} else {
		defer func() {
			for _, p := range progs {
				printWarnings(d.stderr, p, "warning")
			}
		}()
	}
	out := c.String("output")
	if c.Bool("source-map") {
		if out == "" {
			return usageErr("--source-map needs -o: the map is written beside the plan file")
		}
		if st, err := os.Stat(out); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
			// OUT.map beside a device or FIFO would be a stray file
			// in /dev or wherever the stream lives.
			return usageErr("--source-map: -o %s is %s, not a file: the map is written beside a plan file", out, infile.Kind(st.Mode()))
		}
		return writeWithSourceMaps(c.Context, d, src, out, progs)
	}
	if out == "" {
		if len(progs) == 1 {
			return reportScriptError(d.stderr, progs[0].WritePlan(d.stdout))
		}
		return usageErr("the script creates %d programs: give -o DIR to write them all, or --program NAME to pick one", len(progs))
	}
	paths, err := planPaths(out, progs)
	if err != nil {
		return err
	}
	return reportScriptError(d.stderr, atomicfile.WriteAll(c.Context, paths, func(i int, w io.Writer) error { return progs[i].WritePlan(w) }))
}

// reportScriptError prints evaluation and pass errors in the contract's
// form (FILE:LINE:COL: error: MESSAGE plus a traceback) and returns a
// reportedError; other errors are returned unchanged.
func reportScriptError(w io.Writer, err error) error {
	if err == nil {
		return nil
	}
	var se *starlib.Error
	if errors.As(err, &se) {
		io.WriteString(w, se.Detail())
		return &reportedError{code: ExitError}
	}
	return err
}

// listParams prints the declared parameters.
func listParams(w io.Writer, params []starlib.Param) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tDEFAULT\tHELP")
	for _, p := range params {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Default.Type(), p.Default, p.Help)
	}
	return tw.Flush()
}

// planPaths is starlib.PlanPaths, an -o that must be a directory being
// a usage error.
func planPaths(out string, progs []*starlib.Program) ([]string, error) {
	paths, err := starlib.PlanPaths(out, progs)
	if errors.Is(err, starlib.ErrNotADirectory) {
		return nil, usageErr("%v", err)
	}
	return paths, err
}

// writeWithSourceMaps writes every program's plan and, beside it,
// PLAN.json.map, all atomically together.
func writeWithSourceMaps(ctx context.Context, d *deps, src starlib.Source, out string, progs []*starlib.Program) error {
	paths, err := planPaths(out, progs)
	if err != nil {
		return err
	}
	texts := make([][]byte, 0, 2*len(progs))
	all := append([]string(nil), paths...)
	for _, p := range progs {
		plan, err := p.Plan()
		if err != nil {
			return reportScriptError(d.stderr, err)
		}
		texts = append(texts, plan)
	}
	for i, p := range progs {
		m, err := emit.MarshalSourceMap(p.IR, texts[i], nil)
		if err != nil {
			return err
		}
		texts = append(texts, m)
		all = append(all, plan.SourceMapPath(paths[i]))
	}
	return atomicfile.WriteAll(ctx, all, func(i int, w io.Writer) error {
		_, err := w.Write(texts[i])
		return err
	})
}

// printWarnings prints the warnings of a compiled program
// (starlib.Program.WarningLines) and reports whether there were any.
func printWarnings(w io.Writer, p *starlib.Program, level string) bool {
	lines := p.WarningLines(level)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return len(lines) > 0
}
