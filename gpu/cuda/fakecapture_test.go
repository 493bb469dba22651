//go:build cuda

package cuda

// fakecapture_test.go checks that the fake libcuda refuses, during stream
// capture, what CUDA refuses, so that capture tests on it fail where a
// GPU would: it builds testdata/fakecuda/capturecheck.c against the fake
// (the libcuda.so.1 beside MSCCLGO_FAKE_KERNEL_LIB, as `make fakecuda`
// lays them out) and runs it, one line per check.

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeCaptureChecks are the checks of capturecheck.c and the rule each
// one holds the fake to.
var fakeCaptureChecks = []struct {
	name, rule string
}{
	{"unsafe-own-global-thread-global", "an unsafe call on the thread of a GLOBAL capture is refused and invalidates it"},
	{"unsafe-own-threadlocal-thread-global", "an unsafe call on the thread of a THREAD_LOCAL capture is refused and invalidates it"},
	{"unsafe-own-global-thread-threadlocal", "a THREAD_LOCAL thread's unsafe call with its own GLOBAL capture is refused"},
	{"unsafe-own-threadlocal-thread-threadlocal", "a THREAD_LOCAL thread's unsafe call with its own THREAD_LOCAL capture is refused"},
	{"unsafe-own-global-thread-relaxed", "a RELAXED thread's unsafe call is allowed beside its own GLOBAL capture"},
	{"unsafe-own-relaxed-thread-global", "an unsafe call beside the thread's own RELAXED capture is allowed"},
	{"unsafe-other-global-thread-global", "a GLOBAL thread's unsafe call is refused while another thread's GLOBAL capture runs, which it invalidates"},
	{"unsafe-other-global-thread-threadlocal", "a THREAD_LOCAL thread ignores other threads' captures"},
	{"unsafe-other-global-thread-relaxed", "a RELAXED thread ignores other threads' captures"},
	{"unsafe-other-threadlocal-thread-global", "another thread's THREAD_LOCAL capture prohibits nothing here"},
	{"unsafe-other-relaxed-thread-global", "another thread's RELAXED capture prohibits nothing here"},
	{"begin-legacy", "the legacy stream cannot capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)"},
	{"begin-twice", "a capturing stream cannot begin another capture (CUDA_ERROR_ILLEGAL_STATE)"},
	{"status", "cuStreamIsCapturing and cuStreamGetCaptureInfo(_v2) report the status and a unique id"},
	{"thread-mode", "cuThreadExchangeStreamCaptureMode swaps a per-thread mode, GLOBAL by default"},
	{"invalidated-work", "work submitted to an invalidated capture fails; its end returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph"},
	{"sync-capturing", "synchronising with or querying a capturing stream is refused in any mode and invalidates it"},
	{"captured-event", "an event recorded in a capture cannot be waited for or queried (CUDA_ERROR_CAPTURED_EVENT)"},
	{"implicit-blocking", "legacy-stream work while a blocking stream captures fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates it"},
	{"implicit-nonblocking", "a non-blocking capturing stream has no legacy-stream dependency"},
	{"implicit-other-device", "another device's capturing stream has no dependency on this device's legacy stream"},
	{"implicit-query", "the legacy stream's capture status is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream captures"},
	{"end-thread", "a capture not begun in RELAXED mode ends on its own thread (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)"},
	{"replay", "captured work runs only at each launch of the graph, in order"},
}

func TestFakeCapture(t *testing.T) {
	if !fake() {
		t.Skip("checks the fake libcuda's capture rules: runs on the fake driver (make gpu-test), not on a GPU's")
	}
	dir := filepath.Dir(os.Getenv("MSCCLGO_FAKE_KERNEL_LIB"))
	lib := filepath.Join(dir, "libcuda.so.1")
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("the fake libcuda beside MSCCLGO_FAKE_KERNEL_LIB: %v (make fakecuda builds both)", err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "capturecheck")
	build := exec.CommandContext(ctx, cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
		"-I/usr/local/cuda/include", "-o", bin, filepath.Join("testdata", "fakecuda", "capturecheck.c"), lib,
		"-Wl,-rpath,"+dir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building capturecheck.c against %s: %v\n%s", lib, err, out)
	}
	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	out, runErr := run.CombinedOutput()

	passed := map[string]bool{}
	failures := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "ok "); ok {
			passed[name] = true
		} else if rest, ok := strings.CutPrefix(line, "FAIL "); ok {
			name, _, _ := strings.Cut(rest, ":")
			failures[name] = append(failures[name], line)
		}
	}
	known := map[string]bool{}
	for _, c := range fakeCaptureChecks {
		known[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			if len(failures[c.name]) > 0 || !passed[c.name] {
				t.Errorf("rule: %s\n%s", c.rule, strings.Join(failures[c.name], "\n"))
			}
		})
	}
	for name, lines := range failures {
		if !known[name] {
			t.Errorf("%s:\n%s", name, strings.Join(lines, "\n"))
		}
	}
	for name := range passed {
		if !known[name] {
			t.Errorf("capturecheck ran %q, which this test's table lacks", name)
		}
	}
	if runErr != nil || t.Failed() {
		t.Errorf("capturecheck: %v; its output:\n%s", runErr, out)
	}
}
