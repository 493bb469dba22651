package starlib

// hint.go turns the syntax errors that Python habits cause into hints
// (imports, with blocks, the ** operator); see docs/porting.md.

import "strings"

// syntaxHints maps the start of a Starlark syntax error ("got TOKEN,
// want ...") to the hint printed after it.
var syntaxHints = []struct{ got, hint string }{
	{"got from, want", `Starlark has no imports; use load("file.star", "name") and param()`},
	{"got import, want", `Starlark has no imports; use load("file.star", "name") and param()`},
	{"got with, want", "Starlark has no with blocks; CollectiveProgram(...) makes the program current; pipelines are for _ in Loop.iteration(...):"},
	{"got '**', want", "Starlark has no ** operator; write 1 << n or x * x"},
}

// syntaxHint returns the hint for a syntax error message, or "". msg is the
// message of a syntax error, possibly inside a failed load ("cannot load
// lib.star: lib.star:1:1: got import, want ...").
func syntaxHint(msg string) string {
	for _, h := range syntaxHints {
		if strings.Contains(msg, h.got) {
			return h.hint
		}
	}
	return ""
}
