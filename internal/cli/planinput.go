package cli

// planinput.go holds what `check` and `run` accept where a plan is
// expected: a plan file (with its source map, PLAN.json.map, when one is
// there), or a .star script or bundled algorithm name, evaluated on the
// spot with -D and --program so that every report can name its .star
// line. Anything else gets a message that says what it is.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/emit"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// scriptFlags are the flags of check and run that apply to a .star input.
func scriptFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringSliceFlag{Name: "define", Aliases: []string{"D"}, Usage: "for a .star input: set script parameter `name=value` (repeatable)"},
		&cli.StringFlag{Name: "program", Usage: "for a .star input that creates several programs: the one named `NAME`"},
	}, evalLimitFlags(false)...)
}

// planInput is one plan given on the command line.
type planInput struct {
	name  string // as given
	data  []byte // the plan text
	smap  *plan.SourceMap
	index *plan.SourceIndex // smap's ops, indexed on first use
	note  string            // why a source map beside the file was not used
}

// isScriptArg reports whether arg names a Starlark script (or a bundled
// algorithm) rather than a plan file.
func isScriptArg(arg string) bool {
	if strings.HasSuffix(arg, ".star") {
		return true
	}
	if _, err := os.Stat(arg); err == nil || strings.HasSuffix(arg, ".json") {
		return false
	}
	_, _, err := algorithms.Resolve(arg)
	return err == nil
}

// readPlanInput reads a plan file, or evaluates a script into one.
func readPlanInput(c *cli.Context, d *deps, arg string) (*planInput, error) {
	if isScriptArg(arg) {
		return evalPlanInput(c, d, arg)
	}
	data, err := executor.ReadPlan(arg, "a plan (.json) or a .star script")
	if err != nil {
		return nil, aboutFile(arg, err) // every one names the file first
	}
	if err := looksLikePlan(arg, data); err != nil {
		return nil, aboutFile(arg, err)
	}
	in := &planInput{name: arg, data: data}
	in.smap, in.note = executor.ReadSourceMap(arg, data)
	return in, nil
}

// looksLikePlan says what a file is when it is not a JSON plan.
func looksLikePlan(name string, data []byte) error {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(t) > 0 && t[0] == '{' {
		return nil
	}
	ext := strings.ToLower(filepath.Ext(name))
	script := (ext == "" || ext == ".bzl" || ext == ".sky") &&
		(bytes.Contains(data, []byte("CollectiveProgram(")) || bytes.Contains(data, []byte("param(")))
	switch {
	case len(t) == 0:
		return fmt.Errorf("%s is empty, want an execution plan (JSON)", name)
	case ext == ".py":
		return fmt.Errorf("%s is a Python file, not an execution plan: mscclgo runs plans (.json) and Starlark algorithms (.star); docs/porting.md shows how to port a Python DSL program", name)
	case script:
		return fmt.Errorf("%s is a Starlark script, not an execution plan: name it NAME.star to run it directly, or compile it with mscclgo eval", name)
	}
	return fmt.Errorf("%s is not an execution plan: a plan is a JSON object, this file starts with %q", name, firstLineOf(t))
}

func firstLineOf(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// evalPlanInput evaluates a script and returns the plan of its program.
func evalPlanInput(c *cli.Context, d *deps, arg string) (*planInput, error) {
	defines, err := parseDefines(c.StringSlice("define"))
	if err != nil {
		return nil, err
	}
	src, name, err := algorithms.Resolve(arg)
	if err != nil {
		return nil, aboutFile(arg, err) // it names arg first
	}
	lim, err := evalLimits(c)
	if err != nil {
		return nil, err
	}
	restoreGC := starlib.EvalGC()
	res, err := starlib.Eval(src, name, starlib.Options{Defines: defines, Limits: lim, Stderr: d.stderr, Context: c.Context})
	restoreGC()
	if err != nil {
		return nil, reportScriptError(d.stderr, err)
	}
	progs, err := res.Pick(c.String("program"), src.Display(name))
	if errors.Is(err, starlib.ErrNoPrograms) {
		return nil, aboutFile(src.Display(name), err)
	} else if err != nil {
		return nil, err
	}
	if len(progs) > 1 {
		var names []string
		for _, p := range progs {
			names = append(names, p.Name())
		}
		return nil, usageErr("%s creates %d programs (%s): pick one with --program NAME", src.Display(name), len(progs), strings.Join(names, ", "))
	}
	plan, err := progs[0].Plan()
	if err != nil {
		return nil, reportScriptError(d.stderr, err)
	}
	return &planInput{name: src.Display(name), data: plan, smap: emit.SourceMap(progs[0].IR, plan, nil)}, nil
}

// load loads the plan with its positions.
func (in *planInput) load() (*plan.Plan, error) {
	p, err := plan.Load(in.data)
	if err != nil {
		return nil, in.locate(err)
	}
	if in.smap != nil {
		if err := p.AttachSources(in.smap, in.data); err != nil {
			in.note = err.Error()
		}
	}
	return p, nil
}

// where returns the .star positions of the op a plan problem is in, "" if
// it has none.
func (in *planInput) where(err error) string {
	if in.smap == nil {
		return ""
	}
	if in.index == nil {
		in.index = in.smap.Index()
	}
	return strings.Join(in.index.Where(err), ", ")
}

// locate adds the op's .star position to a plan problem.
func (in *planInput) locate(err error) error {
	if w := in.where(err); w != "" {
		return fmt.Errorf("%w (%s)", err, w)
	}
	return err
}
