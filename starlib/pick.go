package starlib

// pick.go: what a command takes of a script's result: the programs it
// works on, the warnings of each compiled program as lines, and where
// their plans are written.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.starlark.net/syntax"

	"github.com/mscclgo/mscclgo/emit"
)

// ErrNoPrograms is the error of Pick for a script that creates no
// program.
var ErrNoPrograms = errors.New("creates no program")

// Pick returns the programs of res that a command works on: the one
// named sel (--program), or all of them when sel is ""; script names the
// script in errors.
func (res *Result) Pick(sel, script string) ([]*Program, error) {
	var names []string
	for _, p := range res.Programs {
		names = append(names, p.Name())
	}
	progs := res.Programs
	if sel != "" {
		progs = nil
		for _, p := range res.Programs {
			if p.Name() == sel {
				progs = append(progs, p)
			}
		}
		if len(progs) == 0 {
			return nil, fmt.Errorf("--program %s: %s creates no program of that name (it creates: %s)", sel, script, strings.Join(names, ", "))
		}
	}
	if len(progs) == 0 {
		return nil, fmt.Errorf("%s %w: call CollectiveProgram(...) in the script", script, ErrNoPrograms)
	}
	return progs, nil
}

// WarningLines returns the warnings of the compiled program
// (emit.Warnings) as FILE:LINE:COL: LEVEL: MESSAGE (the op), one line per
// source position and message however many ops share them. A program
// whose passes failed has none.
func (p *Program) WarningLines(level string) []string {
	if _, err := p.Plan(); err != nil {
		return nil
	}
	type key struct {
		pos syntax.Position
		msg string
	}
	var order []key
	where := map[key][]string{}
	for _, x := range emit.Warnings(p.IR) {
		k := key{x.Pos, x.Msg}
		if _, ok := where[k]; !ok {
			order = append(order, k)
		}
		where[k] = append(where[k], x.Where)
	}
	var lines []string
	for _, k := range order {
		ops := where[k][0]
		if n := len(where[k]) - 1; n > 0 {
			ops += fmt.Sprintf(", and %d more", n)
		}
		lines = append(lines, fmt.Sprintf("%s: %s: %s (%s)", k.pos, level, k.msg, ops))
	}
	return lines
}

// checkFileName rejects program names that cannot be a plan's file name
// inside the output directory.
func checkFileName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("program name %q cannot be used as a file name", name)
	}
	return nil
}

// ErrNotADirectory is the error of PlanPaths for several programs and an
// out that is not an existing directory.
var ErrNotADirectory = errors.New("must name an existing directory")

// PlanPaths returns where each program's plan goes for an output out (the
// -o of mscclgo eval): out itself for one program (or out/NAME.json when
// out is a directory), out/NAME.json for several (out must be a
// directory: ErrNotADirectory).
func PlanPaths(out string, progs []*Program) ([]string, error) {
	if len(progs) == 1 {
		if st, err := os.Stat(out); err != nil || !st.IsDir() {
			return []string{out}, nil
		}
	} else if st, err := os.Stat(out); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("-o %s: the script creates %d programs, so -o %w", out, len(progs), ErrNotADirectory)
	}
	paths := make([]string, len(progs))
	seen := map[string]bool{}
	for i, p := range progs {
		if seen[p.Name()] {
			return nil, fmt.Errorf("two programs are named %q: their plans would both be %s.json", p.Name(), p.Name())
		}
		if err := checkFileName(p.Name()); err != nil {
			return nil, err
		}
		seen[p.Name()] = true
		paths[i] = filepath.Join(out, p.Name()+".json")
	}
	return paths, nil
}
