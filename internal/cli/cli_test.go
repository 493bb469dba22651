package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run runs the CLI in process and returns its exit status and outputs.
func run(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"mscclgo"}, args...)
	for i, a := range full {
		full[i] = strings.ReplaceAll(a, "$DIR", dir)
	}
	code := Run(full, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const oneProgram = `n = param("n", 2, help = "ranks")
CollectiveProgram("one", AllReduce(n, 1, True), n)
Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb = 0)
`

const twoPrograms = `for n in [2, 4]:
    CollectiveProgram("p%d" % n, AllReduce(n, 1, True), n)
`

const badProgram = `CollectiveProgram("bad", AllReduce(2, 1, True), 2)
def f():
    Rank(7)
f()
`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEval(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "one.star"), oneProgram)
	writeFile(t, filepath.Join(dir, "two.star"), twoPrograms)
	writeFile(t, filepath.Join(dir, "bad.star"), badProgram)
	writeFile(t, filepath.Join(dir, "keep.json"), "precious\n")
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		files      []string
		wantAbsent []string
	}{
		{name: "stdout", args: []string{"eval", "$DIR/one.star"}, stdout: `"name": "one"`},
		{name: "flags after file", args: []string{"eval", "$DIR/one.star", "-D", "n=4", "-o", "$DIR/one4.json"}, files: []string{"one4.json"}},
		{name: "params", args: []string{"eval", "$DIR/one.star", "--params"}, stdout: "n     int   2        ranks"},
		{name: "several to dir", args: []string{"eval", "-o", "$DIR/out", "$DIR/two.star"}, files: []string{"out/p2.json", "out/p4.json"}},
		{name: "several without -o", args: []string{"eval", "$DIR/two.star"}, code: ExitUsage, stderr: "give -o DIR"},
		{name: "program select", args: []string{"eval", "$DIR/two.star", "--program", "p4"}, stdout: `"name": "p4"`},
		{name: "program missing", args: []string{"eval", "$DIR/two.star", "--program", "p3"}, code: ExitError, stderr: "it creates: p2, p4"},
		{name: "script error", args: []string{"eval", "$DIR/bad.star", "-o", "$DIR/keep.json"}, code: ExitError,
			stderr: "bad.star:3:9: error: Rank: rank 7 out of range [0:2] of program \"bad\"\nTraceback (most recent call last):\n  " + "$DIR/bad.star:4:2: in <toplevel>\n  $DIR/bad.star:3:9: in f\n"},
		{name: "script error leaves no file", args: []string{"eval", "$DIR/bad.star", "-o", "$DIR/new.json"}, code: ExitError, wantAbsent: []string{"new.json"}},
		{name: "undeclared define", args: []string{"eval", "$DIR/one.star", "-D", "m=1"}, code: ExitError, stderr: "declared: n"},
		{name: "bad define", args: []string{"eval", "$DIR/one.star", "-D", "m"}, code: ExitUsage, stderr: "want name=value"},
		{name: "unknown flag", args: []string{"eval", "--nope", "$DIR/one.star"}, code: ExitUsage},
		{name: "missing file", args: []string{"eval", "$DIR/none.star"}, code: ExitError, stderr: "no such file"},
		{name: "glued define", args: []string{"eval", "$DIR/one.star", "-Dn=4"}, stdout: `"input_chunks": 4`},
		{name: "unknown command", args: []string{"bogus"}, code: ExitUsage, stderr: "unknown command"},
		{name: "bundled", args: []string{"eval", "allreduce_packet", "-D", "world_size=2"}, stdout: `"name": "allreduce_packet_2gpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if want := strings.ReplaceAll(tt.stdout, "$DIR", dir); !strings.Contains(stdout, want) {
				t.Errorf("stdout %q does not contain %q", stdout, want)
			}
			if want := strings.ReplaceAll(tt.stderr, "$DIR", dir); !strings.Contains(stderr, want) {
				t.Errorf("stderr %q does not contain %q", stderr, want)
			}
			for _, f := range tt.files {
				data, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || !bytes.HasSuffix(data, []byte("}\n")) {
					t.Errorf("%s: %v, content %q", f, err, data)
				}
			}
			for _, f := range tt.wantAbsent {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("%s exists after a failed eval", f)
				}
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "keep.json")); string(data) != "precious\n" {
		t.Errorf("a failed eval overwrote keep.json: %q", data)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestCommandTree lints the command tree: every command and flag has usage
// text.
func TestCommandTree(t *testing.T) {
	app := newApp(&deps{})
	for _, c := range app.Commands {
		if c.Usage == "" {
			t.Errorf("command %s has no usage", c.Name)
		}
		for _, f := range c.Flags {
			if s, ok := f.(interface{ GetUsage() string }); !ok || s.GetUsage() == "" {
				t.Errorf("command %s: flag %v has no usage", c.Name, f.Names())
			}
		}
	}
}

// TestHelpCommand checks that `mscclgo help CMD` prints what `mscclgo CMD
// --help` prints, `mscclgo help` what `mscclgo --help` prints, and that an
// unknown CMD is a usage error.
func TestHelpCommand(t *testing.T) {
	dir := t.TempDir()
	for _, c := range newApp(&deps{}).Commands {
		t.Run(c.Name, func(t *testing.T) {
			code, got, stderr := run(t, dir, "help", c.Name)
			if code != ExitOK || stderr != "" {
				t.Fatalf("help %s: exit %d, stderr %q", c.Name, code, stderr)
			}
			_, want, _ := run(t, dir, c.Name, "--help")
			if got != want || !strings.Contains(got, "mscclgo "+c.Name+" - ") {
				t.Errorf("help %s printed\n%s\nmscclgo %s --help printed\n%s", c.Name, got, c.Name, want)
			}
		})
	}
	_, appHelp, _ := run(t, dir, "--help")
	if !strings.Contains(appHelp, "COMMANDS:") || !strings.Contains(appHelp, "--help, -h") {
		t.Fatalf("mscclgo --help printed\n%s", appHelp)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // the whole standard output, when not empty
		stderr string // substring
	}{
		{name: "app help", args: []string{"help"}, stdout: appHelp},
		{name: "no arguments", args: nil, stdout: appHelp},
		{name: "-h", args: []string{"-h"}, stdout: appHelp},
		{name: "unknown command", args: []string{"help", "bogus"}, code: ExitUsage, stderr: `mscclgo: help: unknown command "bogus" (run mscclgo --help for the list)`},
		{name: "two commands", args: []string{"help", "eval", "run"}, code: ExitUsage, stderr: "help: want at most one COMMAND"},
		// help after a command is an argument, not a subcommand.
		{name: "eval help", args: []string{"eval", "help"}, code: ExitError, stderr: "help: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout\n%s\nwant\n%s", stdout, tt.stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
		})
	}
}

// TestEvalSyntaxHints checks that eval prints a hint after the syntax
// errors of Python habits, keeping the FILE:LINE:COL form.
func TestEvalSyntaxHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct{ name, script, stderr string }{
		{"import", "import argparse\n", "$DIR/a.star:1:1: error: got import, want primary expression\n" +
			`hint: Starlark has no imports; use load("file.star", "name") and param()` + "\n"},
		{"from", "from mscclpp.language import *\n", "$DIR/a.star:1:1: error: got from, want primary expression\nhint: Starlark has no imports"},
		{"with", "with CollectiveProgram():\n    pass\n", "$DIR/a.star:1:1: error: got with, want primary expression\n" +
			"hint: Starlark has no with blocks; CollectiveProgram(...) makes the program current; pipelines are for _ in Loop.iteration(...):\n"},
		{"power", "n = 2**20\n", "$DIR/a.star:1:8: error: got '**', want newline\nhint: Starlark has no ** operator; write 1 << n or x * x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sub := filepath.Join(dir, tt.name)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(sub, "a.star"), tt.script)
			code, stdout, stderr := run(t, sub, "eval", "$DIR/a.star")
			if code != ExitError || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if want := strings.ReplaceAll(tt.stderr, "$DIR", sub); !strings.HasPrefix(stderr, want) {
				t.Errorf("stderr\n%s\nwant it to start with\n%s", stderr, want)
			}
		})
	}
}
