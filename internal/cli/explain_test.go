package cli

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
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

// causeLine is the .star line a planted mistake's file names: "# cause:
// line N" (the most likely cause names it) or "# candidate: line N" (the
// most likely cause or one of the others does: a mistake that looks like
// another).
var causeLine = regexp.MustCompile(`(?m)^# (cause|candidate): line (\d+)$`)

// racy marks a planted mistake that is a data race ("# racy: why"): its
// report is compared with the golden file up to the most likely cause.
var racy = regexp.MustCompile(`(?m)^# racy: `)

// racePlaces are the parts of a cause's text that name one instance of
// an op's line (its rank, thread block and op, the chunk it read).
var racePlaces = regexp.MustCompile(`\b(rank|chunk|tb|op) \d+`)

// maskPlaces replaces each of racePlaces' numbers by N.
func maskPlaces(s string) string { return racePlaces.ReplaceAllString(s, "$1 N") }

// TestCauseFirst runs the planted mistakes of testdata/causes (an 8-rank
// and a 4-rank LL all-pairs allgather with a wrong source chunk or a
// wrong scratch slot in the put_packets line, or a wrong slot in the
// unpack_packets line; Simple ring reduce-scatters with a wrong source
// chunk or a wrong scratch slot in the put or the reduce) and checks that the report opens with the
// most likely cause, naming the line of the mistake, in at most
// maxReportLines lines, that --explain prints more, and compares the
// report with the golden file beside each (-update rewrites them; a
// planted race, "# racy:", is compared up to its most likely cause).
func TestCauseFirst(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "causes", "*.star"))
	if err != nil || len(files) < 9 {
		t.Fatalf("planted mistakes: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := causeLine.FindSubmatch(src)
			if m == nil {
				t.Fatalf("%s: no \"# cause: line N\" comment", f)
			}
			code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "1")
			if code != ExitError && code != ExitDeadlock {
				t.Fatalf("exit %d, want %d or %d:\n%s", code, ExitError, ExitDeadlock, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			// The report, without the run's closing count of wrong elements.
			report := lines
			if code == ExitError {
				report = lines[:len(lines)-1]
			}
			if len(report) > maxReportLines {
				t.Errorf("report of %d lines, want at most %d:\n%s", len(report), maxReportLines, stderr)
			}
			if len(lines) < 2 || !strings.HasPrefix(lines[1], "  most likely cause: ") {
				t.Fatalf("the report does not open with the most likely cause:\n%s", stderr)
			}
			want := regexp.MustCompile(regexp.QuoteMeta(filepath.Base(f)) + `:` + string(m[2]) + `:\d+`)
			found := false
			for i, l := range lines[1:] {
				if i > 0 && (string(m[1]) == "cause" || !strings.HasPrefix(l, "  or: ")) {
					break
				}
				found = found || want.MatchString(regexp.MustCompile(`\S+\.star:\d+:\d+`).FindString(l))
			}
			if !found {
				t.Errorf("the %s does not name line %s first:\n%s", m[1], m[2], strings.Join(lines[1:min(4, len(lines))], "\n"))
			}
			golden := strings.TrimSuffix(f, ".star") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(stderr), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if g, err := os.ReadFile(golden); err != nil {
				t.Fatalf("%v (go test -run TestCauseFirst -update writes it)", err)
			} else if racy.Match(src) {
				// The planted mistake races (a read of a slot that a
				// peer may or may not have written yet): the values read,
				// and so the patterns and the other candidates, vary from
				// run to run; the header and the most likely cause do not.
				// Which rank's instance of the blamed line read first
				// varies too: the ranks, chunks and places it names are
				// masked.
				if got, want := maskPlaces(strings.Join(lines[:2], "\n")), maskPlaces(strings.Join(strings.SplitN(string(g), "\n", 3)[:2], "\n")); got != want {
					t.Errorf("the report's most likely cause differs from %s's:\n%s\nwant:\n%s", golden, got, want)
				}
			} else if stderr != string(g) {
				t.Errorf("report differs from %s:\n%s", golden, stderr)
			}
			if strings.Contains(stderr, "--explain") {
				_, _, all := run(t, "", "run", f, "-s", "16K", "-n", "1", "--explain")
				if n := strings.Count(all, "\n"); n <= len(lines) || strings.Contains(all, "--explain") {
					t.Errorf("--explain: %d lines, want more than %d, uncut:\n%s", n, len(lines), all)
				}
			}
		})
	}
}
