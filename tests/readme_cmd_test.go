package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeCommand is one shell command of README.md's code blocks.
type readmeCommand struct {
	line int    // README line of its first line
	text string // as written (a heredoc spans several lines)
}

// readmeCommands returns the commands of README.md's code blocks in
// order: every line of an indented block, and the lines of a ```sh
// block, a heredoc with its body as one command.
func readmeCommands(readme string) []readmeCommand {
	var cmds []readmeCommand
	lines := strings.Split(readme, "\n")
	fence, sh := false, false
	var heredoc string // the end marker of an open heredoc
	prevBlank := true
	indented := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "```"):
			fence = !fence
			sh = fence && strings.TrimPrefix(l, "```") == "sh"
			prevBlank = false
			continue
		case fence && !sh:
			continue
		case heredoc != "":
			cmds[len(cmds)-1].text += "\n" + l
			if strings.TrimSpace(l) == heredoc {
				heredoc = ""
			}
			continue
		}
		text := ""
		switch {
		case sh:
			text = l
		case strings.HasPrefix(l, "    ") && (prevBlank || indented):
			indented = true
			text = strings.TrimPrefix(l, "    ")
		default:
			indented = false
		}
		prevBlank = strings.TrimSpace(l) == ""
		if strings.TrimSpace(text) == "" {
			continue
		}
		cmds = append(cmds, readmeCommand{line: i + 1, text: text})
		if m := regexp.MustCompile(`<<'(\w+)'`).FindStringSubmatch(text); m != nil {
			heredoc = m[1]
		}
	}
	return cmds
}

// TestReadmeCommandsExtracted checks the extraction on a small README.
func TestReadmeCommandsExtracted(t *testing.T) {
	got := readmeCommands("intro\n\n    go run . eval x -o a.json\n    mscclgo run a.json\n\ntext\n\n```sh\ncat > r.star <<'EOF'\nx = 1\nEOF\n```\n\n```python\nnot = 1\n```\n")
	var texts []string
	for _, c := range got {
		texts = append(texts, c.text)
	}
	want := []string{"go run . eval x -o a.json", "mscclgo run a.json", "cat > r.star <<'EOF'\nx = 1\nEOF"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("commands %q, want %q", texts, want)
	}
}

// TestReadmeRunsAsWritten runs README.md's commands in order, as a
// newcomer would, in a copy of the checkout's tracked files, with this
// checkout's mscclgo built onto PATH (what `go install .` gives):
// `go run .` runs that binary too; `go install .`, `make build` and `go
// test ./...` (this test's own run) are not run again; commands marked
// "needs the CUDA toolkit" are skipped, "needs a GPU" must either run or
// be refused with the message of a missing GPU backend, and "needs
// mpirun" run where mpirun is installed (the plain mpirun line only where
// Open MPI would start it: not as root, enough cores). A comment "writes
// FILE" must leave FILE behind. Every other command must succeed, and
// the copy (a git repository, every file staged) must show nothing
// untracked or changed in git status at the end.
func TestReadmeRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: README's commands are not run")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the checkout's tracked files cannot be listed")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(string(readme))
	if len(cmds) < 15 {
		t.Fatalf("README.md: only %d commands found: is the extraction broken?", len(cmds))
	}

	tmp := t.TempDir()
	clone, bin, home := filepath.Join(tmp, "clone"), filepath.Join(tmp, "bin"), filepath.Join(tmp, "home")
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // a file deleted in the work tree
		}
		dst := filepath.Join(clone, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The copy is a git repository with every file staged, so that what
	// the commands leave behind shows in git status.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
		g := exec.Command("git", args...)
		g.Dir = clone
		if out, err := g.CombinedOutput(); err != nil {
			t.Fatalf("git %s in the copy: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "mscclgo"), ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "MSCCLGO_") ||
			strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMI") || k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	_, mpiErr := exec.LookPath("mpirun")
	installed := false
	np := regexp.MustCompile(`-np (\d+)`)
	writes := regexp.MustCompile(`writes (\S+\.\w+)`)
	for _, c := range cmds {
		text := c.text
		comment := ""
		if i := strings.Index(text, "  # "); i >= 0 && !strings.Contains(text, "\n") {
			comment = text[i:]
		}
		where := "README.md:" + strconv.Itoa(c.line) + ": " + strings.SplitN(text, "\n", 2)[0]
		switch {
		case strings.HasPrefix(text, "go install .") || strings.HasPrefix(text, "make install") || strings.HasPrefix(text, "make build"):
			installed = true
			continue
		case strings.HasPrefix(text, "go test ./..."), strings.Contains(comment, "needs the CUDA toolkit"):
			continue
		case strings.HasPrefix(text, "go run . "):
			text = "mscclgo " + strings.TrimPrefix(text, "go run . ")
		case strings.HasPrefix(text, "mscclgo ") && !installed:
			t.Errorf("%s: runs mscclgo before README says to install it (make install)", where)
		}
		if strings.Contains(comment, "needs mpirun") {
			if mpiErr != nil {
				t.Logf("%s: skipped: no mpirun", where)
				continue
			}
			if m := np.FindStringSubmatch(text); m != nil && !strings.Contains(text, "--oversubscribe") {
				if n, _ := strconv.Atoi(m[1]); n > runtime.NumCPU() {
					t.Logf("%s: skipped: %d cores, Open MPI refuses %s ranks without --oversubscribe", where, runtime.NumCPU(), m[1])
					continue
				}
			}
			if os.Geteuid() == 0 && !strings.Contains(text, "--allow-run-as-root") {
				t.Logf("%s: skipped: Open MPI refuses to start as root without --allow-run-as-root", where)
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-e", "-c", text)
		cmd.Dir, cmd.Env = clone, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if strings.HasPrefix(text, "mscclgo view ") && !strings.Contains(text, " -o ") {
			// As on a terminal: the page goes beside the plan.
			devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = devnull
			defer devnull.Close()
		}
		start := time.Now()
		err := cmd.Run()
		cancel()
		t.Logf("%s: %.1fs", where, time.Since(start).Seconds())
		var ee *exec.ExitError
		switch {
		case strings.Contains(comment, "needs a GPU"):
			if err != nil && !strings.Contains(stderr.String(), "--backend gpu: not available") && !strings.Contains(stderr.String(), "no CUDA") {
				t.Errorf("%s: %v, without the refusal of a missing GPU backend:\n%s", where, err, stderr.String())
			}
		case err != nil && errors.As(err, &ee):
			t.Errorf("%s: %v\nstdout:\n%.2000s\nstderr:\n%.2000s", where, err, stdout.String(), stderr.String())
		case err != nil:
			t.Fatalf("%s: %v", where, err)
		}
		if m := writes.FindStringSubmatch(comment); m != nil && err == nil {
			if _, err := os.Stat(filepath.Join(clone, m[1])); err != nil {
				t.Errorf("%s: says it writes %s: %v", where, m[1], err)
			}
		}
	}
	if !installed {
		t.Error("README.md: no `make install`, `go install .` or `make build` command")
	}
	// Following the README leaves the checkout clean: every file its
	// commands write is ignored (.gitignore), none tracked is changed.
	st := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	st.Dir = clone
	out, err := st.Output()
	if err != nil {
		t.Fatalf("git status in the copy: %v", err)
	}
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "A  ") {
			t.Errorf("README.md's commands leave the checkout unclean (git status: %q): add the file to .gitignore or write it elsewhere", l)
		}
	}
}
