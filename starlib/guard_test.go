package starlib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.starlark.net/starlark"
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

// TestStrSizeMemo: the estimate of str's length keeps a memo entry only
// for containers that hold containers (which sharing can double): a list
// of many small lists costs one entry, not one per element, and a value
// doubled by sharing is still sized once per distinct part; the
// estimate is never under the text's length.
func TestStrSizeMemo(t *testing.T) {
	m := startMeter(&starlark.Thread{}, Limits{MaxMemory: 1 << 30})
	defer m.stopMeter()
	small := make([]starlark.Value, 100000)
	for i := range small {
		small[i] = starlark.NewList([]starlark.Value{starlark.MakeInt(i)})
	}
	doubled := starlark.Value(starlark.NewList([]starlark.Value{starlark.MakeInt(1)}))
	for range 20 {
		doubled = starlark.NewList([]starlark.Value{doubled, doubled})
	}
	dict := starlark.NewDict(2)
	if err := dict.SetKey(starlark.String("k"), starlark.NewList(small[:2])); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		v        starlark.Value
		wantMemo int
	}{
		{"a list of small lists", starlark.NewList(small), 1},
		{"a tuple of small lists", starlark.Tuple(small), 1},
		{"a dict of a list of lists", dict, 2},
		{"doubled twenty times", doubled, 20},
	} {
		s := sizer{m: m, memo: map[any]uint64{}}
		n, err := s.size(c.v, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(s.memo) != c.wantMemo {
			t.Errorf("%s: %d memo entries, want %d", c.name, len(s.memo), c.wantMemo)
		}
		if text := uint64(len(c.v.String())); n < text {
			t.Errorf("%s: estimated %d bytes, under the text's %d", c.name, n, text)
		}
	}
}
