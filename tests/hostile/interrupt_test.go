// Interruption: real SIGINT and SIGTERM sent to real `install` and
// `eval -o` processes in the middle of their work, and the leftovers of
// killed installs (built by hand) that the next install or select
// recovers from. Each case checks the exit status (130 or 143), the
// message, no Go stack trace, no temporary file left, and the previous
// plan set or output intact.

package hostile

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// running is a started mscclgo process.
type running struct {
	cmd            *exec.Cmd
	args           []string
	stdout, stderr lockedBuffer
	done           chan struct{}
	waitErr        error
}

// start starts mscclgo with args in dir; the process is killed after
// hangBound.
func start(t *testing.T, dir string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	t.Cleanup(cancel)
	r := &running{cmd: command(ctx, dir, args...), args: args, done: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.waitErr = r.cmd.Wait()
		close(r.done)
	}()
	return r
}

// exited reports whether the process has ended.
func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitUntil polls cond until it holds; the process ending first, or
// hangBound passing, fails the test.
func (r *running) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangBound)
	for !cond() {
		if r.exited() {
			if cond() {
				return
			}
			t.Fatalf("mscclgo %s ended (%v) before %s; stderr:\n%s", strings.Join(r.args, " "), r.waitErr, what, clip(r.stderr.String()))
		}
		if time.Now().After(deadline) {
			t.Fatalf("mscclgo %s: no %s after %v", strings.Join(r.args, " "), what, hangBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// signal sends sig to the process.
func (r *running) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to end and returns how it ended.
func (r *running) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(hangBound + 30*time.Second):
		t.Fatalf("mscclgo %s: still running after %v (a hang)", strings.Join(r.args, " "), hangBound)
	}
	return finished(r.cmd, r.stdout.String(), r.stderr.String())
}

// matching lists the entries of dir whose names start with prefix.
func matching(dir, prefix string) []string {
	des, _ := os.ReadDir(dir)
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), prefix) {
			out = append(out, de.Name())
		}
	}
	return out
}

// umask returns the process's umask (from /proc; 022 if unknown). The
// children inherit it.
func umask() os.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return os.FileMode(n)
				}
			}
		}
	}
	return 0o022
}

// planSetState is what the test compares before and after an
// interruption: the link's target and the index.
type planSetState struct {
	target string
	index  string
}

// installedState checks that dir is an installed plan set (a link to
// .plans.set-ID beside it, group- and world-readable as the umask allows,
// the lock file and nothing else beside it) and returns its state.
func installedState(t *testing.T, dir string) planSetState {
	t.Helper()
	to, err := os.Readlink(dir)
	if err != nil || !strings.HasPrefix(to, ".plans.set-") {
		t.Fatalf("%s is not a link to .plans.set-ID: %q, %v", dir, to, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o755 &^ umask(); st.Mode().Perm() != want {
		t.Errorf("the installed set has mode %v, want %v", st.Mode().Perm(), want)
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if left, want := entries(t, filepath.Dir(dir)), []string{".plans.lock", to, "plans"}; !slices.Equal(left, want) {
		t.Errorf("beside the plan set: %v, want %v", left, want)
	}
	return planSetState{target: to, index: string(index)}
}

// wantSelect checks that select finds a plan in dir.
func wantSelect(t *testing.T, work, dir string) result {
	t.Helper()
	r := mscclgo(t, work, "select", "--dir", dir, "-c", "allreduce", "-n", "8", "--size", "4K", "--in-place")
	r.wantError(t, 0, 0)
	if !strings.HasPrefix(r.stdout, filepath.Join(dir, "allreduce_packet_8gpu.json")) {
		t.Errorf("select: %s", r.stdout)
	}
	return r
}

// copyDir copies the plan set src (plain files) to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// TestInstallInterrupted installs the default set, interrupts a second
// install of it with SIGINT and with SIGTERM, runs two installs at once,
// and recovers from leftovers of killed installs. The subtests share one
// validation cache, so that only the first install and the interrupted
// ones (--no-cache) validate every plan.
func TestInstallInterrupted(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	first := filepath.Join(work, "first", "plans")
	if err := os.MkdirAll(filepath.Dir(first), 0o755); err != nil {
		t.Fatal(err)
	}
	mscclgo(t, work, "install", "--dir", first).wantError(t, 0, 0)
	installedState(t, first)
	wantSelect(t, work, first)

	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(work, tc.name, "plans")
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				t.Fatal(err)
			}
			mscclgo(t, work, "install", "--dir", dir).wantError(t, 0, 0)
			before := installedState(t, dir)
			r := start(t, work, "install", "--dir", dir, "--no-cache")
			r.waitUntil(t, "partial plan set and first validated job", func() bool {
				return len(matching(filepath.Dir(dir), ".plans.new-")) > 0 && strings.Contains(r.stderr.String(), "install: [1/")
			})
			r.signal(t, tc.sig)
			res := r.wait(t)
			res.wantError(t, tc.code, 0, "mscclgo: interrupted by "+tc.name+": removed the partial plan set "+filepath.Dir(dir)+"/.plans.new-",
				"the installed plan set in "+dir+" was left unchanged")
			if after := installedState(t, dir); after != before {
				t.Errorf("the installed set changed: %s -> %s", before.target, after.target)
			}
			wantSelect(t, work, dir)
		})
	}

	t.Run("two at once", func(t *testing.T) {
		dir := filepath.Join(work, "two", "plans")
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		a := start(t, work, "install", "--dir", dir, "--no-cache")
		a.waitUntil(t, "partial plan set", func() bool { return len(matching(filepath.Dir(dir), ".plans.new-")) > 0 })
		b := start(t, work, "install", "--dir", dir)
		b.waitUntil(t, "note that it waits", func() bool { return strings.Contains(b.stderr.String(), "waiting for another install into "+dir) })
		// select neither waits nor removes the running install's files.
		partial := matching(filepath.Dir(dir), ".plans.new-")
		r := mscclgo(t, work, "select", "--dir", dir, "-c", "allreduce", "-n", "8", "--size", "4K", "--in-place")
		r.wantError(t, 1, 0, "no plan index")
		if !a.exited() {
			for _, p := range partial {
				if _, err := os.Stat(filepath.Join(filepath.Dir(dir), p)); err != nil {
					t.Errorf("select removed the running install's %s: %v", p, err)
				}
			}
		}
		a.wait(t).wantError(t, 0, 0)
		b.wait(t).wantError(t, 0, 0)
		installedState(t, dir)
		wantSelect(t, work, dir)
	})

	// Leftovers of installs killed at each step, built by hand from the
	// first install's set; select (or install) recovers.
	set := first // through the link
	partial := func(t *testing.T, path string) {
		t.Helper()
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, "allreduce_packet_8gpu.json", "{")
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p string)
		note  string
	}{
		{"earlier scheme killed between its renames", func(t *testing.T, p string) {
			copyDir(t, set, p+"/.plans.new-123.old")
			copyDir(t, set, p+"/.plans.new-123")
		}, "restored the plan set"},
		{"killed while moving a plain directory aside", func(t *testing.T, p string) {
			copyDir(t, set, p+"/.plans.old-00ab")
			partial(t, p+"/.plans.set-00ab")
			if err := os.Symlink(".plans.set-00ab", p+"/.plans.link-00ab"); err != nil {
				t.Fatal(err)
			}
		}, "restored the plan set"},
		{"killed before the swap and after it", func(t *testing.T, p string) {
			copyDir(t, set, p+"/.plans.set-00aa")
			if err := os.Symlink(".plans.set-00aa", p+"/plans"); err != nil {
				t.Fatal(err)
			}
			partial(t, p+"/.plans.new-00bb")
			partial(t, p+"/.plans.set-00cc")
			if err := os.Symlink(".plans.set-00cc", p+"/.plans.link-00cc"); err != nil {
				t.Fatal(err)
			}
		}, "removed the leftovers of an interrupted install"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(work, "recover-"+strings.ReplaceAll(tc.name, " ", "-"))
			dir := filepath.Join(p, "plans")
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, p)
			leftovers := entries(t, p)

			// While an install holds the lock, select touches nothing.
			lock, err := os.OpenFile(filepath.Join(p, ".plans.lock"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			mscclgo(t, work, "select", "--dir", dir, "-c", "allreduce", "-n", "8", "--size", "4K", "--in-place")
			noLock := func(names []string) []string {
				return slices.DeleteFunc(names, func(n string) bool { return n == ".plans.lock" })
			}
			if now := entries(t, p); !slices.Equal(noLock(now), noLock(leftovers)) {
				t.Errorf("select changed the directory under the lock: %v -> %v", leftovers, now)
			}
			lock.Close()

			r := wantSelect(t, work, dir)
			if !strings.Contains(r.stderr, "mscclgo: note: "+tc.note) {
				t.Errorf("select's stderr lacks %q:\n%s", tc.note, r.stderr)
			}
			for _, e := range entries(t, p) {
				if strings.Contains(e, ".new-") || strings.Contains(e, ".link-") || strings.Contains(e, ".old") {
					t.Errorf("left over after select: %s", e)
				}
			}
			mscclgo(t, work, "install", "--dir", dir).wantError(t, 0, 0)
			installedState(t, dir)
			wantSelect(t, work, dir)
		})
	}
}

// manyPrograms creates count programs (count param), each an 8-rank
// all-pairs allgather: a few seconds of passes and writing in all.
const manyPrograms = `
n = 8
for i in range(param("count", 1000)):
    CollectiveProgram("ag_%d" % i, AllGather(n, 1, True), n, protocol = "Simple")
    for src in range(n):
        chunk = Rank(src).get_output_buffer()[src:src + 1]
        for dst in range(n):
            if dst != src:
                ch = MemoryChannel(dst, src)
                ch.put(Rank(dst).get_output_buffer()[src:src + 1], chunk, tb = 0)
                ch.signal(tb = 0, data_sync = SyncType.before)
                MemoryChannel(src, dst).wait(tb = 0, data_sync = SyncType.after)
`

// slowEval says it started, then loops for minutes before it creates its
// program.
const slowEval = `
print("started")
x = 0
for i in range(2000000000):
    x += i
CollectiveProgram("p", AllGather(2, 1, True), 2, protocol = "Simple")
`

// TestEvalInterrupted: eval -o stopped by a signal while it writes many
// plans into a directory, and while it evaluates the script, leaves the
// previous output as it was and no temporary file.
func TestEvalInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		t.Run("writing/"+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "many.star", manyPrograms)
			out := filepath.Join(dir, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, out, "ag_0.json", "old")
			r := start(t, dir, "eval", "many.star", "-o", "out")
			r.waitUntil(t, "temporary file", func() bool { return len(matching(out, ".ag_")) > 0 })
			r.signal(t, tc.sig)
			res := r.wait(t)
			res.wantError(t, tc.code, 0, "mscclgo: interrupted by "+tc.name+": removed the partial output out/.ag_")
			if got := entries(t, out); !slices.Equal(got, []string{"ag_0.json"}) {
				t.Errorf("out holds %v, want only the old ag_0.json", got)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "ag_0.json")); string(b) != "old" {
				t.Errorf("ag_0.json changed: %.40q", b)
			}
		})
		t.Run("evaluating/"+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "slow.star", slowEval)
			writeFile(t, dir, "plan.json", "old")
			r := start(t, dir, "eval", "slow.star", "-o", "plan.json")
			r.waitUntil(t, "evaluation", func() bool { return strings.Contains(r.stderr.String(), "started") })
			r.signal(t, tc.sig)
			res := r.wait(t)
			res.wantError(t, tc.code, 0, "mscclgo: interrupted by "+tc.name)
			if got := entries(t, dir); !slices.Equal(got, []string{"plan.json", "slow.star"}) {
				t.Errorf("left %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "plan.json")); string(b) != "old" {
				t.Errorf("plan.json changed: %.40q", b)
			}
		})
	}
}
