package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of the wrong-data reports")

// TestWrongDataExplained runs the planted mistakes of testdata/wrongdata
// (a correct 4-rank allreduce with one mistake each: a reduce onto the
// scratch buffer instead of the input, a missing contribution, a put to
// the wrong peer, a put of the wrong chunk) and compares run's report
// with the golden file beside each: the contributions that arrived, the
// missing ones with the op that should have brought them, the extra ones,
// grouped into patterns. go test -run TestWrongDataExplained -update
// rewrites them.
func TestWrongDataExplained(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "wrongdata", "*.star"))
	if err != nil || len(files) < 4 {
		t.Fatalf("planted mistakes: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := run(t, "", "run", f, "-b", "4K", "-e", "16K", "-n", "1")
			if code != ExitError {
				t.Fatalf("exit %d, want %d:\n%s", code, ExitError, stderr)
			}
			golden := strings.TrimSuffix(f, ".star") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(stderr), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestWrongDataExplained -update writes it)", err)
			}
			if stderr != string(want) {
				t.Errorf("report differs from %s:\n%s", golden, stderr)
			}
		})
	}
}

// TestStopAfterFirstWrongSize checks that a sweep stops after the first
// size with wrong data, and runs on with --keep-going.
func TestStopAfterFirstWrongSize(t *testing.T) {
	t.Parallel()
	f := filepath.Join("testdata", "wrongdata", "wrong_peer.star")
	for _, tt := range []struct {
		args []string
		rows int
	}{{nil, 1}, {[]string{"--keep-going"}, 3}} {
		code, stdout, stderr := run(t, "", append([]string{"run", f, "-b", "4K", "-e", "16K", "-n", "1"}, tt.args...)...)
		rows := 0
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "4096 ") || strings.HasPrefix(strings.TrimSpace(l), "8192 ") || strings.HasPrefix(strings.TrimSpace(l), "16384 ") {
				rows++
			}
		}
		if code != ExitError || rows != tt.rows || strings.Count(stderr, "wrong data:") != tt.rows {
			t.Errorf("%v: exit %d, %d rows (want %d), stderr:\n%s\nstdout:\n%s", tt.args, code, rows, tt.rows, stderr, stdout)
		}
	}
}
