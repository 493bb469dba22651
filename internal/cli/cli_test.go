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
