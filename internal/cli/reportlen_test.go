package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReportsShort runs every planted mistake of testdata (causes,
// wrongdata, latewait) on the cpu backend and on gpu-emu (whose wrong data
// is explained by a re-run on the cpu backend, whose deadlocks go through
// the same diagnosis), and checks each report: at most maxReportLines lines by default, the
// most likely cause among its first 5, and with --explain no cut.
func TestReportsShort(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{"causes", "wrongdata", "latewait"} {
		fs, err := filepath.Glob(filepath.Join("testdata", dir, "*.star"))
		if err != nil || len(fs) == 0 {
			t.Fatalf("testdata/%s: %v, %v", dir, fs, err)
		}
		files = append(files, fs...)
	}
	for _, f := range files {
		for _, backend := range []string{"cpu", "gpu-emu"} {
			t.Run(filepath.Base(f)+"/"+backend, func(t *testing.T) {
				t.Parallel()
				if backend == "gpu-emu" && !builtIn("gpu-emu") {
					t.Skip("gpu-emu is not built (cgo and g++)")
				}
				args := []string{"run", f, "-s", "16K", "-n", "1", "--timeout", "500ms", "--backend", backend}
				code, _, stderr := run(t, "", args...)
				switch {
				case code == ExitOK:
					// A race (latewait) that did not show, or wrong data
					// only the cpu backend's schedule gives.
					t.Skip("no failure in this run")
				case strings.Contains(stderr, "found no wrong data"):
					// A race whose re-run on the cpu backend (the wrong
					// data's explanation) did not show it.
					t.Skip("the re-run on the cpu backend found no wrong data")
				case code != ExitError && code != ExitDeadlock:
					t.Fatalf("exit %d, want %d or %d:\n%s", code, ExitError, ExitDeadlock, stderr)
				}
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if code == ExitError {
					lines = lines[:len(lines)-1] // the run's closing count of wrong elements
				}
				if len(lines) > maxReportLines {
					t.Errorf("report of %d lines, want at most %d:\n%s", len(lines), maxReportLines, stderr)
				}
				cause := -1
				for i, l := range lines {
					if strings.HasPrefix(l, "  most likely cause: ") {
						cause = i
						break
					}
				}
				if cause < 0 || cause >= 5 {
					t.Errorf("the most likely cause is line %d, want one of the first 5:\n%s", cause+1, stderr)
				}
				if strings.Contains(stderr, "--explain") {
					_, _, all := run(t, "", append(args, "--explain")...)
					if strings.Contains(all, "more line(s) of detail") || strings.Count(all, "\n") <= len(lines) {
						t.Errorf("--explain cut the report or printed no more:\n%s", all)
					}
				}
			})
		}
	}
}
