package starlib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestScriptsMustBeRegularFiles: a device, a FIFO or a directory given as
// a script or loaded is an error, not an endless read.
func TestScriptsMustBeRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.star"), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loads.star"), []byte("load(\"fifo.star\", \"x\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.star"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src        Source
		name, want string
	}{
		{DirSource(dir), "fifo.star", "fifo.star is a FIFO, not a regular file"},
		{DirSource(dir), "loads.star", "fifo.star is a FIFO, not a regular file"},
		{DirSource(dir), "sub.star", "sub.star is a directory"},
		{DirSource("/dev"), "null", "null is a device, not a regular file"},
	} {
		_, err := Eval(c.src, c.name, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
