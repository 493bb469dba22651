//go:build !race

package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRacyPlan runs a plan whose two thread blocks write the same
// output without synchronisation. The CPU backend really performs both
// writes at once, so the Go race detector would flag them: this test is
// built without -race only.
func TestRunRacyPlan(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "race.json"), testPlan{name: "race", collective: "test", ranks: 1, copyTBs: 2}.json())
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{name: "race", args: []string{"run", "$DIR/race.json", "--size", "4K", "--race", "--iters", "2"}, code: ExitRace,
			stderr: "rank 0 tb 0 op 0 copy write of rank 0 o[0:4096]"},
		{name: "no race detection", args: []string{"run", "$DIR/race.json", "--size", "4K", "--iters", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
			if n := strings.Count(stderr, "race:"); tt.code == ExitRace && n != 1 {
				t.Errorf("race reported %d times, want once per size", n)
			}
		})
	}
}

// TestRunRaceAcrossLaunches runs the newcomer's ring reduce-scatter,
// which reuses its scratch slots in the next launch with no handshake
// (issue 49): --race flags the put of line 12 in launch 1 against the
// reduce of line 17 in launch 0; the plan with its handshake passes.
func TestRunRaceAcrossLaunches(t *testing.T) {
	t.Parallel()
	f := filepath.Join("testdata", "races", "ring_reducescatter4_reuse.star")
	code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "2", "--race")
	if code != ExitRace {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitRace, stderr)
	}
	for _, want := range []string{"across the launch boundary", "ring_reducescatter4_reuse.star:12:", "ring_reducescatter4_reuse.star:17:", "in launch 0", "in launch 1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the report does not say %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "3", "--race", "-D", "handshake=true"); code != 0 {
		t.Errorf("with the handshake: exit %d, want 0:\n%s", code, stderr)
	}
}
