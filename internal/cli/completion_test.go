package cli

// completion_test.go checks the completion scripts with their shells and
// runs the bash and fish completions on sample command lines.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/algorithms"
)

// completionScript returns `mscclgo completion SHELL`, written to a file
// in dir.
func completionScript(t *testing.T, dir, shell string) (text, path string) {
	t.Helper()
	code, stdout, stderr := run(t, dir, "completion", shell)
	if code != ExitOK || stderr != "" {
		t.Fatalf("completion %s: exit %d, stderr %q", shell, code, stderr)
	}
	path = filepath.Join(dir, "mscclgo."+shell)
	writeFile(t, path, stdout)
	return stdout, path
}

// TestCompletionScripts checks each script's syntax with its shell (a
// shell that is not installed is skipped) and that it names every command,
// every flag and every bundled algorithm.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	names, err := algorithms.Names()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		shell string
		check []string // the syntax check, run with the script's path appended
	}{
		{"bash", []string{"bash", "-n"}},
		{"zsh", []string{"zsh", "-n"}},
		{"fish", []string{"fish", "--no-execute"}},
	}
	for _, tt := range tests {
		t.Run(tt.shell, func(t *testing.T) {
			t.Parallel()
			text, path := completionScript(t, t.TempDir(), tt.shell)
			for _, c := range newApp(&deps{}).Commands {
				if !strings.Contains(text, c.Name) {
					t.Errorf("the script does not name command %s", c.Name)
				}
				for _, f := range c.Flags {
					for _, n := range f.Names() {
						if !strings.Contains(text, n) {
							t.Errorf("the script does not name flag %s of %s", n, c.Name)
						}
					}
				}
			}
			for _, n := range names {
				if !strings.Contains(text, n) {
					t.Errorf("the script does not name the bundled algorithm %s", n)
				}
			}
			if _, err := exec.LookPath(tt.check[0]); err != nil {
				t.Skipf("%s is not installed: syntax not checked", tt.check[0])
			}
			out, err := exec.Command(tt.check[0], append(tt.check[1:], path)...).CombinedOutput()
			if err != nil {
				t.Errorf("%s: %v\n%s", strings.Join(tt.check, " "), err, out)
			}
		})
	}
}

func TestCompletionUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		code, stdout, stderr := run(t, t.TempDir(), args...)
		if code != ExitUsage || stdout != "" || !strings.Contains(stderr, "mscclgo: completion: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// completionDir makes a directory with files for the file completions.
func completionDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"plan.json", "algo.star", "notes.txt"} {
		writeFile(t, filepath.Join(dir, f), "")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// completionCases are command lines (the last word being completed) and
// the completions that must, and must not, be offered.
var completionCases = []struct {
	name   string
	words  []string
	want   []string
	absent []string
}{
	{"commands", []string{"mscclgo", "se"}, []string{"select"}, []string{"eval"}},
	{"every command", []string{"mscclgo", ""}, []string{"eval", "install", "select", "check", "run", "list", "completion", "help"}, nil},
	{"global flags", []string{"mscclgo", "--ver"}, []string{"--version"}, nil},
	{"command flags", []string{"mscclgo", "select", "--dt"}, []string{"--dtype"}, nil},
	{"short flags", []string{"mscclgo", "select", "-"}, []string{"-c", "-d", "--in-place", "--help"}, nil},
	{"dtype values", []string{"mscclgo", "select", "-d", "b"}, []string{"bfloat16"}, []string{"float16"}},
	{"collective values", []string{"mscclgo", "select", "--collective", "all"}, []string{"allreduce", "allgather", "alltoall"}, []string{"sendrecv"}},
	{"backend values", []string{"mscclgo", "run", "plan.json", "--backend", ""}, []string{"cpu", "gpu", "gpu-emu"}, nil},
	{"bundled algorithms", []string{"mscclgo", "eval", "allreduce_p"}, []string{"allreduce_packet"}, []string{"allgather"}},
	{"eval files", []string{"mscclgo", "eval", ""}, []string{"algo.star", "sub", "allgather"}, []string{"plan.json", "notes.txt"}},
	{"run files", []string{"mscclgo", "run", ""}, []string{"plan.json", "algo.star", "sub"}, []string{"notes.txt"}},
	{"check files after a flag", []string{"mscclgo", "check", "--size", "1K", "p"}, []string{"plan.json"}, nil},
	{"any output file", []string{"mscclgo", "eval", "algo.star", "-o", ""}, []string{"notes.txt", "plan.json"}, nil},
	{"free-text flag value", []string{"mscclgo", "run", "plan.json", "--size", ""}, nil, []string{"plan.json", "cpu"}},
	{"help topics", []string{"mscclgo", "help", "ins"}, []string{"install"}, nil},
	{"shells", []string{"mscclgo", "completion", ""}, []string{"bash", "zsh", "fish"}, nil},
}

// TestBashCompletion sources the bash script and calls its completion
// function as bash does, with COMP_WORDS and COMP_CWORD.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	_, script := completionScript(t, t.TempDir(), "bash")
	dir := completionDir(t)
	cases := append(completionCases[:len(completionCases):len(completionCases)], struct {
		name   string
		words  []string
		want   []string
		absent []string
	}{"--flag=value", []string{"mscclgo", "select", "--dtype", "=", ""}, []string{"float16", "int32"}, nil})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			quoted := make([]string, len(tt.words))
			for i, w := range tt.words {
				quoted[i] = "'" + w + "'"
			}
			cmd := exec.Command("bash", "--norc", "--noprofile", "-c",
				`source "$1" || exit 1
complete -p mscclgo >/dev/null || exit 1
COMP_WORDS=(`+strings.Join(quoted, " ")+`)
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_mscclgo
printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			checkCompletions(t, strings.Fields(string(out)), tt.want, tt.absent)
		})
	}
}

// TestFishCompletion asks fish for the completions of the same command
// lines (skipped when fish is not installed).
func TestFishCompletion(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	_, script := completionScript(t, t.TempDir(), "fish")
	dir := completionDir(t)
	for _, tt := range completionCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			line := strings.Join(tt.words, " ")
			cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; and complete -C $argv[2]`, script, line)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				// Each line is the completion, a tab and its description.
				got = append(got, strings.TrimSuffix(strings.SplitN(l, "\t", 2)[0], "/"))
			}
			checkCompletions(t, got, tt.want, tt.absent)
		})
	}
}

func checkCompletions(t *testing.T, got, want, absent []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("completions %q lack %q", got, w)
		}
	}
	for _, a := range absent {
		if slices.Contains(got, a) {
			t.Errorf("completions %q include %q", got, a)
		}
	}
}
