// Package hostile runs the mscclgo command as a real process on hostile
// and careless input (runaway scripts, huge plans, devices, signals) and
// checks that each ends with a named error, no Go stack trace, within
// generous bounds of time and memory read from the process's own
// accounting, and without leaving files behind.
//
// The test binary doubles as the mscclgo binary: started with
// MSCCLGO_HOSTILE_MAIN=1 it runs the command line instead of the tests, so
// the tests need no separate build.
package hostile

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/internal/cli"
)

// mainEnv makes the test binary run as mscclgo.
const mainEnv = "MSCCLGO_HOSTILE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(cli.Run(os.Args, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hangBound is how long a command may run before the test calls it hung:
// far above what any case needs on a loaded 2-core machine, it only turns
// a hang into a failure instead of a stuck test run.
const hangBound = 3 * time.Minute

// result is how a finished mscclgo process ended.
type result struct {
	code           int
	stdout, stderr string
	// maxRSS is the peak resident set in bytes (getrusage of the child).
	maxRSS int64
	// cpu is the user plus system time the process used.
	cpu time.Duration
}

// command returns an mscclgo process with args, run in dir, not started.
func command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Args[0] = "mscclgo"
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mainEnv+"=1", "MSCCLGO_CACHE_DIR="+dir+"/.cache")
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// mscclgo runs mscclgo with args in dir and returns how it ended. A
// process still running after hangBound fails the test.
func mscclgo(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	return runToEnd(t, ctx, command(ctx, dir, args...), args)
}

// runToEnd runs cmd, made with ctx (bounded by hangBound), for the
// mscclgo arguments args and returns how it ended.
func runToEnd(t *testing.T, ctx context.Context, cmd *exec.Cmd, args []string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mscclgo %s: still running after %v (a hang)", strings.Join(args, " "), hangBound)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("mscclgo %s: %v", strings.Join(args, " "), err)
	}
	return finished(cmd, out.String(), errb.String())
}

// finished reads the exit status and accounting of a waited-for cmd.
func finished(cmd *exec.Cmd, stdout, stderr string) result {
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout, stderr: stderr}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r
}

// crashMarks are what a Go crash prints; none may reach a user.
var crashMarks = []string{"panic:", "goroutine ", "fatal error:", "runtime error", "[signal "}

// wantError checks that r is a named error: exit code, no crash output,
// the output (stderr, or stdout where check reports) holding every want,
// and peak memory under maxRSS bytes.
func (r result) wantError(t *testing.T, code int, maxRSS int64, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", r.code, code, r.stderr)
	}
	for _, m := range crashMarks {
		if strings.Contains(r.stderr, m) {
			t.Errorf("stderr has %q (a Go crash):\n%s", m, clip(r.stderr))
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) && !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q:\nstderr:\n%s\nstdout:\n%s", w, clip(r.stderr), clip(r.stdout))
		}
	}
	if maxRSS > 0 && r.maxRSS > maxRSS {
		t.Errorf("peak RSS %d MiB, bound %d MiB", r.maxRSS>>20, maxRSS>>20)
	}
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "\n[...]"
	}
	return s
}

// writeFile writes content to dir/name.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := dir + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// entries lists dir's names, for checking that nothing was left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.Name() != ".cache" {
			names = append(names, de.Name())
		}
	}
	return names
}
