package starlib

import (
	"errors"
	"strings"
	"testing"
)

// TestBuiltinPanicsAreErrors: builtins of the interpreter that panic on
// huge arguments fail at the call with a Starlark error and position
// instead of crashing the process.
func TestBuiltinPanicsAreErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ script, want string }{
		{"x = list(range(1 << 62))", "list: "},
		{"x = tuple(range(1 << 62))", "tuple: "},
		{"x = sorted(range(1 << 62))", "sorted: "},
		{"x = reversed(range(1 << 62))", "reversed: "},
		{"x = zip(range(1 << 62))", "zip: "},
		{"x = enumerate(range(1 << 62))", "enumerate: "},
		{"x = dict(zip(range(1 << 62), range(1 << 62)))", "zip: "},
	} {
		_, err := Eval(memSource{"p.star": "\n" + c.script + "\n"}, "p.star", Options{})
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a *starlib.Error", c.script, err)
			continue
		}
		if se.Pos.Line != 2 || !strings.Contains(se.Msg, c.want) {
			t.Errorf("%s: got %s: %s, want line 2 and %q", c.script, se.Pos, se.Msg, c.want)
		}
	}
}
