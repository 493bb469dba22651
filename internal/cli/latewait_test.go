package cli

import (
	"strings"
	"testing"
)

// TestLateWaitNamesWait runs the newcomer's ring reduce-scatter whose
// wait comes after the reduce it guards (testdata/latewait) without
// --race: the wrong-data report opens, in its first 5 lines, with the
// reduce of line 15 read before its guarding wait, naming the wait's line
// 16, and stays within maxReportLines. The mistake is a race: a run in
// which every put happened to land before its reduce read has no wrong
// data, and the test tries again (the CPU backend shows it on nearly
// every run).
func TestLateWaitNamesWait(t *testing.T) {
	t.Parallel()
	f := "testdata/latewait/ring_reducescatter4_late_wait.star"
	for try := 0; try < 5; try++ {
		code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "1")
		if code == ExitOK {
			continue
		}
		if code != ExitError {
			t.Fatalf("exit %d, want %d (wrong data):\n%s", code, ExitError, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		// The report, without the run's closing count of wrong elements.
		if report := lines[:len(lines)-1]; len(report) > maxReportLines {
			t.Errorf("report of %d lines, want at most %d:\n%s", len(report), maxReportLines, stderr)
		}
		want := []string{"  most likely cause: the re at " + f + ":15:", "before its guarding wait: the wait at " + f + ":16:"}
		for _, l := range lines[:min(5, len(lines))] {
			if strings.HasPrefix(l, want[0]) && strings.Contains(l, want[1]) {
				return
			}
		}
		t.Fatalf("the first 5 lines do not name the reduce of line 15 before its wait of line 16:\n%s", stderr)
	}
	t.Skip("five runs without wrong data: every put landed before its reduce")
}
