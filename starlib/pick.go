package starlib

// pick.go: what a command takes of a script's result: the programs it
// works on, and the warnings of each compiled program as lines.

import (
	"errors"
	"fmt"
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
