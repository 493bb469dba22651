package cli

import (
	"fmt"
	"strings"
	"testing"
)

// TestRaceReports runs the newcomer's ring reduce-scatters of
// testdata/races (issue 49) with --race: the one that reuses its scratch
// slots in the next launch with no handshake is flagged across the launch
// boundary, the put of line 12 in launch 1 against the reduce of line 17
// in launch 0, and passes with its handshake; so are the allgathers that
// rewrite a scratch their peers get from, or their proxy sends from
// (passing with a handshake, a flush); the one whose wait comes
// after the reduce it guards is named as such, with the wait's line. Each
// report is at most maxReportLines lines, the cause in its first 5, and
// --explain prints every pair.
func TestRaceReports(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file  string
		cause []string // in the cause line
		pairs string   // in the pairs
		n     int      // pairs that --explain lists
	}{
		{"ring_reducescatter4_reuse.star", []string{"the put at testdata/races/ring_reducescatter4_reuse.star:12:", "in launch 1 while", "reducescatter4_reuse.star:17:", "in launch 0", "handshake"}, "in launch 1", 12},
		{"allgather4_get_reuse.star", []string{"the copy at testdata/races/allgather4_get_reuse.star:9:", "in launch 1 while", "allgather4_get_reuse.star:18:", "in launch 0", "handshake"}, "in launch 1", 12},
		{"allgather4_port_reuse.star", []string{"the copy at testdata/races/allgather4_port_reuse.star:9:", "in launch 1 while the pws at testdata/races/allgather4_port_reuse.star:13:", "in launch 0", "rank 0's proxy", "flush"}, "(proxy) read", 4},
		{"ring_reducescatter4_late_wait.star", []string{"the re at testdata/races/ring_reducescatter4_late_wait.star:15:", "before its guarding wait, the wait at testdata/races/ring_reducescatter4_late_wait.star:16:", "the put at testdata/races/ring_reducescatter4_late_wait.star:11:"}, "scratch[", 12},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			f := "testdata/races/" + tt.file
			code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "2", "--race")
			if code != ExitRace {
				t.Fatalf("exit %d, want %d:\n%s", code, ExitRace, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			var report []string
			for i, l := range lines {
				if strings.Contains(l, ": race: ") {
					report = lines[i:]
					break
				}
			}
			for i, l := range report[1:] {
				if !strings.HasPrefix(l, "  ") {
					report = report[:i+1]
					break
				}
			}
			if len(report) > maxReportLines {
				t.Errorf("race report of %d lines, want at most %d:\n%s", len(report), maxReportLines, stderr)
			}
			cause := ""
			for _, l := range report[:min(5, len(report))] {
				if strings.HasPrefix(l, "  most likely cause: ") {
					cause = l
				}
			}
			for _, want := range tt.cause {
				if !strings.Contains(cause, want) {
					t.Errorf("the cause line (in the first 5) does not say %q:\n%s", want, strings.Join(report, "\n"))
				}
			}
			if !strings.Contains(strings.Join(report, "\n"), tt.pairs) {
				t.Errorf("the pairs do not say %q:\n%s", tt.pairs, stderr)
			}
			_, _, all := run(t, "", "run", f, "-s", "16K", "-n", "2", "--race", "--explain")
			if n := strings.Count(all, " vs rank "); n != tt.n {
				t.Errorf("--explain lists %d pairs, want the %d:\n%s", n, tt.n, all)
			}
		})
	}
	for _, fix := range [][2]string{
		{"ring_reducescatter4_reuse.star", "handshake=true"},
		{"allgather4_get_reuse.star", "handshake=true"},
		{"allgather4_port_reuse.star", "flush=true"},
	} {
		f := "testdata/races/" + fix[0]
		if code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "3", "--race", "-D", fix[1]); code != 0 {
			t.Errorf("%s -D %s: exit %d, want 0:\n%s", f, fix[1], code, stderr)
		}
	}
}

// TestCheckWarnsOfReuse: mscclgo check warns, from the plan alone, where
// the newcomer's ring reduce-scatter writes a peer's scratch slot again in
// the next launch with no handshake after the peer's read (the put of
// line 12 against the reduce of line 17), and where an allgather rewrites
// its own scratch that its peers get from (the copy of line 9 against the
// get of line 18), or rewrites the scratch its proxy may still be sending
// from (the copy of line 9 against the pws of line 13); and not once the
// plans have their handshakes or flushes.
func TestCheckWarnsOfReuse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file           string
		later, earlier string // file:line:col (rank R tb 0)
		fix            string // the define that fixes it
	}{
		{"ring_reducescatter4_reuse.star", "the put at %s:12:20 (rank 0 tb 0) writes rank 1 scratch", "%s:17:23 (rank 1 tb 0) reads", "handshake=true"},
		{"allgather4_get_reuse.star", "the copy at %s:9:17 (rank 0 tb 0) writes rank 0 scratch", "%s:18:27 (rank 1 tb 0) reads", "handshake=true"},
		{"allgather4_port_reuse.star", "the copy at %s:9:17 (rank 0 tb 0) writes rank 0 scratch", "%s:13:39 (rank 0 tb 0) reads: no signal and wait orders rank 0's proxy's access", "flush=true"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			f := "testdata/races/" + tt.file
			code, stdout, stderr := run(t, "", "check", f)
			if code != 0 {
				t.Fatalf("exit %d, want 0 (a warning):\n%s%s", code, stdout, stderr)
			}
			later, earlier := "warning: "+fmt.Sprintf(tt.later, f), fmt.Sprintf(tt.earlier, f)
			if !strings.Contains(stdout, later) || !strings.Contains(stdout, earlier) || !strings.Contains(stdout, "launch boundary") {
				t.Errorf("check does not warn %q ... %q:\n%s", later, earlier, stdout)
			}
			code, stdout, _ = run(t, "", "check", f, "-D", tt.fix)
			if code != 0 || strings.Contains(stdout, "launch boundary") {
				t.Errorf("-D %s: exit %d, want 0 and no warning:\n%s", tt.fix, code, stdout)
			}
		})
	}
}

// TestRaceRunsTwoLaunches: run --race runs at least two launches, so
// that -n 1 still finds the newcomer's race across the launch boundary;
// without --race, -n 1 is one launch.
func TestRaceRunsTwoLaunches(t *testing.T) {
	t.Parallel()
	f := "testdata/races/ring_reducescatter4_reuse.star"
	code, stdout, stderr := run(t, "", "run", f, "-s", "16K", "-n", "1", "--race")
	if code != ExitRace || !strings.Contains(stdout, "iters 2,") || !strings.Contains(stderr, "in launch 1") {
		t.Errorf("-n 1 --race: exit %d, want %d, iters 2 and a race in launch 1:\n%s%s", code, ExitRace, stdout, stderr)
	}
	code, stdout, stderr = run(t, "", "run", f, "-s", "16K", "-n", "1")
	if code != 0 || !strings.Contains(stdout, "iters 1,") {
		t.Errorf("-n 1: exit %d, want 0 and iters 1:\n%s%s", code, stdout, stderr)
	}
}

// TestRaceOnGPUEmu: run --race on gpu-emu, which has no detector of its
// own, flags the newcomer's ring reuse through the cpu backend's
// detector over the same plan and launches, with both lines and launch
// numbers, and passes the version with the handshake.
func TestRaceOnGPUEmu(t *testing.T) {
	t.Parallel()
	if !builtIn("gpu-emu") {
		t.Skip("gpu-emu is not built (cgo and g++)")
	}
	f := "testdata/races/ring_reducescatter4_reuse.star"
	code, stdout, stderr := run(t, "", "run", f, "-s", "16K", "-n", "2", "--race", "--backend", "gpu-emu")
	if code != ExitRace {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitRace, stdout, stderr)
	}
	for _, want := range []string{"launch 1 (cpu detector): race:", "the put at " + f + ":12:", "in launch 1 while", f + ":17:", "in launch 0"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the report does not say %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "race detection by the cpu backend's detector") {
		t.Errorf("the header does not say who detects races:\n%s", stdout)
	}
	if code, stdout, stderr := run(t, "", "run", f, "-s", "16K", "-n", "3", "--race", "--backend", "gpu-emu", "-D", "handshake=true"); code != 0 {
		t.Errorf("with the handshake: exit %d, want 0:\n%s%s", code, stdout, stderr)
	}
}
