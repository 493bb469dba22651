package starlib

// hint_test.go tests the hints after syntax errors caused by Python
// habits.

import (
	"errors"
	"strings"
	"testing"
)

// TestSyntaxHints checks that the syntax errors of Python habits keep
// their FILE:LINE:COL form and gain a hint line, and that other errors
// gain none.
func TestSyntaxHints(t *testing.T) {
	t.Parallel()
	const (
		noImports = `hint: Starlark has no imports; use load("file.star", "name") and param()` + "\n"
		noWith    = "hint: Starlark has no with blocks; CollectiveProgram(...) makes the program current; pipelines are for _ in Loop.iteration(...):\n"
		noPower   = "hint: Starlark has no ** operator; write 1 << n or x * x\n"
	)
	tests := []struct {
		name   string
		files  memSource
		detail string // the whole Detail text, or its start when it has a traceback
	}{
		{"from import", memSource{"a.star": "from mscclpp.language import *\n"},
			"a.star:1:1: error: got from, want primary expression\n" + noImports},
		{"import", memSource{"a.star": "x = 1\nimport argparse\n"},
			"a.star:2:1: error: got import, want primary expression\n" + noImports},
		{"import in a function", memSource{"a.star": "def f():\n    import os\n"},
			"a.star:2:5: error: got import, want primary expression\n" + noImports},
		{"with", memSource{"a.star": "with CollectiveProgram():\n    pass\n"},
			"a.star:1:1: error: got with, want primary expression\n" + noWith},
		{"power", memSource{"a.star": "x = 2 ** 20\n"},
			"a.star:1:9: error: got '**', want newline\n" + noPower},
		{"power in a call", memSource{"a.star": "print(2**20)\n"},
			"a.star:1:10: error: got '**', want ','\n" + noPower},
		{"power assignment", memSource{"a.star": "x = 2\nx **= 2\n"},
			"a.star:2:5: error: got '**', want newline\n" + noPower},
		{"import in a loaded file", memSource{"a.star": "load(\"lib.star\", \"x\")\n", "lib.star": "import os\n"},
			"a.star:1:1: error: cannot load lib.star: lib.star:1:1: got import, want primary expression\n" + noImports + "Traceback (most recent call last):\n"},
		{"other syntax error", memSource{"a.star": "x = (\n"},
			"a.star:2:1: error: got end of file, want primary expression\n"},
		{"undefined name", memSource{"a.star": "x = y\n"},
			"a.star:1:5: error: undefined: y\n"},
		{"runtime error", memSource{"a.star": "fail(\"got import, want x\")\n"},
			"a.star:1:5: error: fail: got import, want x\nTraceback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Eval(tt.files, "a.star", Options{})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want an *Error", err)
			}
			got := se.Detail()
			if strings.HasSuffix(tt.detail, "\n") && !strings.Contains(tt.detail, "Traceback") {
				if got != tt.detail {
					t.Errorf("Detail() =\n%s\nwant\n%s", got, tt.detail)
				}
			} else if !strings.HasPrefix(got, tt.detail) {
				t.Errorf("Detail() =\n%s\nwant it to start with\n%s", got, tt.detail)
			}
			if strings.Contains(se.Error(), "hint") {
				t.Errorf("Error() %q carries the hint", se.Error())
			}
		})
	}
}
