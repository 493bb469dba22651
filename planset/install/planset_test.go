package install

// planset_test.go tests the installed plan set's layout: the recovery from
// every state a killed install can leave (built by hand), Install over
// those states, its permissions, its lock and its cancellation.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/planset"
)

// fakeSet makes a complete plan set at path: an index.json, and a file
// "which" holding which.
func fakeSet(t *testing.T, path, which string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{planset.IndexFile: `{"version": 1, "plans": []}`, "which": which} {
		if err := os.WriteFile(filepath.Join(path, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// partialSet makes an unfinished set at path: plans, no index.
func partialSet(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "half.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, to, at string) {
	t.Helper()
	if err := os.Symlink(to, at); err != nil {
		t.Fatal(err)
	}
}

// which returns the "which" of the set at dir, "" when there is none.
func which(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "which"))
	if err != nil {
		return ""
	}
	return string(b)
}

// names lists dir's entries, the lock file left out.
func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if de.Name() != ".plans.lock" {
			out = append(out, de.Name())
		}
	}
	return out
}

// leftoverStates are the states a killed install (of this scheme or the
// earlier one) can leave beside the plan directory "plans", and others a
// recovery must leave alone. want is the set plans holds afterwards (""
// none), left the entries of the parent afterwards.
var leftoverStates = []struct {
	name  string
	setup func(t *testing.T, p string)
	want  string
	left  []string
}{
	{"installed, nothing left over", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		symlink(t, ".plans.set-aaaa", p+"/plans")
	}, "A", []string{".plans.set-aaaa", "plans"}},
	{"earlier scheme: killed while writing", func(t *testing.T, p string) {
		fakeSet(t, p+"/plans", "A")
		partialSet(t, p+"/.plans.new-1234567")
	}, "A", []string{"plans"}},
	{"earlier scheme: killed between its two renames", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.new-1234567.old", "A")
		fakeSet(t, p+"/.plans.new-1234567", "B")
	}, "A", []string{"plans"}},
	{"killed while writing", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		symlink(t, ".plans.set-aaaa", p+"/plans")
		partialSet(t, p+"/.plans.new-bbbb")
	}, "A", []string{".plans.set-aaaa", "plans"}},
	{"killed before the link was made", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		symlink(t, ".plans.set-aaaa", p+"/plans")
		fakeSet(t, p+"/.plans.set-bbbb", "B")
	}, "A", []string{".plans.set-aaaa", "plans"}},
	{"killed before the link was renamed", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		symlink(t, ".plans.set-aaaa", p+"/plans")
		fakeSet(t, p+"/.plans.set-bbbb", "B")
		symlink(t, ".plans.set-bbbb", p+"/.plans.link-bbbb")
	}, "A", []string{".plans.set-aaaa", "plans"}},
	{"killed before the old set was removed", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		fakeSet(t, p+"/.plans.set-bbbb", "B")
		symlink(t, ".plans.set-bbbb", p+"/plans")
	}, "B", []string{".plans.set-bbbb", "plans"}},
	{"first install killed before the link was renamed", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-bbbb", "B")
		symlink(t, ".plans.set-bbbb", p+"/.plans.link-bbbb")
	}, "", nil},
	{"migration killed with the plain directory moved aside", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.old-bbbb", "A")
		fakeSet(t, p+"/.plans.set-bbbb", "B")
		symlink(t, ".plans.set-bbbb", p+"/.plans.link-bbbb")
	}, "A", []string{"plans"}},
	{"migration killed before the moved-aside directory was removed", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.old-bbbb", "A")
		fakeSet(t, p+"/.plans.set-bbbb", "B")
		symlink(t, ".plans.set-bbbb", p+"/plans")
	}, "B", []string{".plans.set-bbbb", "plans"}},
	{"a dangling link and a moved-aside set", func(t *testing.T, p string) {
		symlink(t, ".plans.set-0000", p+"/plans")
		fakeSet(t, p+"/.plans.old-cccc", "A")
	}, "A", []string{"plans"}},
	{"two moved-aside sets: the one with an index wins", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.old-cccc", "A")
		partialSet(t, p+"/.plans.old-dddd")
	}, "A", []string{"plans"}},
	{"other names are left alone", func(t *testing.T, p string) {
		fakeSet(t, p+"/.plans.set-aaaa", "A")
		symlink(t, ".plans.set-aaaa", p+"/plans")
		for _, n := range []string{".plans.new-XYZ", ".plans.newer", ".other.new-123", "plans.new-123", ".plans.set-", ".plans.set-aaaa.bak"} {
			partialSet(t, p+"/"+n)
		}
	}, "A", []string{".other.new-123", ".plans.newer", ".plans.new-XYZ", ".plans.set-", ".plans.set-aaaa", ".plans.set-aaaa.bak", "plans", "plans.new-123"}},
	{"a link elsewhere is not followed for removal", func(t *testing.T, p string) {
		fakeSet(t, p+"/mine", "M")
		symlink(t, "mine", p+"/plans")
	}, "M", []string{"mine", "plans"}},
}

// TestRecoverPlanSet recovers from each leftover state.
func TestRecoverPlanSet(t *testing.T) {
	t.Parallel()
	for _, tc := range leftoverStates {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := t.TempDir()
			tc.setup(t, p)
			rec, err := RecoverPlanSet(filepath.Join(p, "plans"))
			if err != nil || rec.Err != nil {
				t.Fatalf("RecoverPlanSet: %v, %v", err, rec.Err)
			}
			if got := which(filepath.Join(p, "plans")); got != tc.want {
				t.Errorf("plans holds set %q, want %q (recovery: %s)", got, tc.want, rec)
			}
			left := names(t, p)
			want := slices.Sorted(slices.Values(tc.left))
			if !slices.Equal(left, want) {
				t.Errorf("left %v, want %v (recovery: %s)", left, want, rec)
			}
			// Recovery is idempotent: a second finds nothing to do.
			if rec, err := RecoverPlanSet(filepath.Join(p, "plans")); err != nil || !rec.Empty() {
				t.Errorf("second recovery: %s, %v", rec, err)
			}
		})
	}
}

// TestRecoverPlanSetLocked: while an install holds the lock, recovery
// touches nothing (the leftovers may be that install's files).
func TestRecoverPlanSetLocked(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	fakeSet(t, p+"/.plans.new-1234567.old", "A")
	partialSet(t, p+"/.plans.new-1234567")
	ps, err := newPlanSet(filepath.Join(p, "plans"))
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := ps.lock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := names(t, p)
	if _, err := RecoverPlanSet(ps.dir); !errors.Is(err, ErrRunning) {
		t.Errorf("RecoverPlanSet under the lock: %v, want ErrRunning", err)
	}
	if after := names(t, p); !slices.Equal(before, after) {
		t.Errorf("entries changed under the lock: %v -> %v", before, after)
	}
	unlock()
	if rec, err := RecoverPlanSet(ps.dir); err != nil || rec.Restored == "" {
		t.Errorf("after the unlock: %s, %v", rec, err)
	}
}

// TestRecoverPlanSetNothing: no leftovers, no lock file is created (select
// may run where it cannot write).
func TestRecoverPlanSetNothing(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	fakeSet(t, p+"/plans", "A")
	if rec, err := RecoverPlanSet(filepath.Join(p, "plans")); err != nil || !rec.Empty() {
		t.Errorf("RecoverPlanSet: %s, %v", rec, err)
	}
	if _, err := os.Stat(p + "/.plans.lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file created: %v", err)
	}
	if _, err := RecoverPlanSet(filepath.Join(p, "missing", "plans")); err != nil {
		t.Errorf("RecoverPlanSet of a missing parent: %v", err)
	}
}

var smallJob = []algorithms.Job{{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}}}

// umask returns the process's umask (from /proc; 022 if unknown).
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

// checkInstalled checks that dir is a link to a .plans.set-ID directory
// with an index and the usual permissions, and that nothing else is left
// in its parent but the lock file.
func checkInstalled(t *testing.T, dir string) {
	t.Helper()
	st, err := os.Lstat(dir)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s is not a link: %v, %v", dir, st, err)
	}
	to, _ := os.Readlink(dir)
	if !strings.HasPrefix(to, ".plans.set-") {
		t.Errorf("%s -> %s", dir, to)
	}
	if _, err := planset.ReadIndex(dir); err != nil {
		t.Error(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o755&^umask() {
		t.Errorf("the set's permissions are %v, want %v (%v)", st.Mode().Perm(), 0o755&^umask(), err)
	}
	if left := names(t, filepath.Dir(dir)); !slices.Equal(left, []string{to, "plans"}) {
		t.Errorf("left %v, want [%s plans]", left, to)
	}
}

// TestInstallOverLeftovers installs over each leftover state (the states
// that hold only our own files): the recovery's notes, then a link to the
// new set and nothing else.
func TestInstallOverLeftovers(t *testing.T) {
	t.Parallel()
	for _, tc := range leftoverStates {
		if strings.Contains(tc.name, "other names") || strings.Contains(tc.name, "elsewhere") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := t.TempDir()
			tc.setup(t, p)
			var notes []string
			dir := filepath.Join(p, "plans")
			if _, err := Install(smallJob, Options{Dir: dir, Note: func(s string) { notes = append(notes, s) }}); err != nil {
				t.Fatal(err)
			}
			checkInstalled(t, dir)
			if got := which(dir); got != "" {
				t.Errorf("plans still holds set %q", got)
			}
			hadLeftovers := !strings.HasPrefix(tc.name, "installed")
			if hadLeftovers != (len(notes) > 0) {
				t.Errorf("notes %q", notes)
			}
		})
	}
}

// TestInstallRefuses: a file, or a directory that is not a plan set, is
// not replaced.
func TestInstallRefuses(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	if err := os.WriteFile(p+"/file", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	partialSet(t, p+"/notaset")
	for _, name := range []string{"file", "notaset"} {
		if _, err := Install(smallJob, Options{Dir: filepath.Join(p, name)}); err == nil || !strings.Contains(err.Error(), "refusing to replace") {
			t.Errorf("install into %s: %v", name, err)
		}
	}
	if b, _ := os.ReadFile(p + "/file"); string(b) != "x" {
		t.Errorf("file changed: %q", b)
	}
	if _, err := os.Stat(p + "/notaset/half.json"); err != nil {
		t.Error(err)
	}
	// An empty directory is replaced.
	if err := os.Mkdir(p+"/plans", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(smallJob, Options{Dir: p + "/plans"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p + "/plans"); err != nil {
		t.Fatal(err)
	}
}

// TestInstallCancelled: a cancelled install removes its partial set, says
// so, and leaves the installed one.
func TestInstallCancelled(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	dir := filepath.Join(p, "plans")
	if _, err := Install(smallJob, Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Readlink(dir)
	cause := errors.New("test stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	jobs := append(slices.Clone(smallJob), algorithms.Job{Algorithm: "allgather", Params: map[string]string{"world_size": "2"}})
	_, err := Install(jobs, Options{Dir: dir, Context: ctx, Workers: 1, Progress: func(Event) { cancel(cause) }})
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "removed the partial plan set "+p+"/.plans.new-") {
		t.Errorf("got %v", err)
	}
	if after, _ := os.Readlink(dir); after != before {
		t.Errorf("plans -> %s, was %s", after, before)
	}
	checkInstalled(t, dir)
}

// TestInstallWaitsForLock: a second install waits for the first's lock,
// says so, and can be cancelled while it waits.
func TestInstallWaitsForLock(t *testing.T) {
	t.Parallel()
	p := t.TempDir()
	ps, err := newPlanSet(filepath.Join(p, "plans"))
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := ps.lock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := Install(smallJob, Options{Dir: ps.dir, Note: func(s string) { waiting <- s }})
		done <- err
	}()
	select {
	case note := <-waiting:
		if !strings.Contains(note, "waiting for another install") {
			t.Errorf("note %q", note)
		}
	case err := <-done:
		t.Fatalf("Install did not wait for the lock: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no waiting note in a minute")
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, ps.dir)

	// Cancelled while waiting.
	unlock, err = ps.lock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Install(smallJob, Options{Dir: ps.dir, Context: ctx, Note: func(string) { cancel() }})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "while waiting") {
		t.Errorf("got %v", err)
	}
}

// TestPlanSetNames: what a plan directory may be called.
func TestPlanSetNames(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"", "/", ".", "..", "a/.."} {
		if _, err := newPlanSet(dir); err == nil {
			t.Errorf("newPlanSet(%q) accepted", dir)
		}
	}
	ps, err := newPlanSet("x/plans.v2/")
	if err != nil || ps.parent != "x" || ps.name != "plans.v2" || ps.path("new", "1") != "x/.plans.v2.new-1" {
		t.Errorf("newPlanSet: %+v, %v", ps, err)
	}
}
