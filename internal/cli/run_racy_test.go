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
		stdout string
	}{
		{name: "race", args: []string{"run", "$DIR/race.json", "--size", "4K", "--race", "--iters", "2"}, code: ExitRace,
			stderr: "rank 0 tb 0 op 0 copy write of rank 0 output[0:4096]"},
		// gpu-emu has no detector of its own: the cpu backend's runs the
		// same plan and launches first, and says so.
		{name: "race on gpu-emu", args: []string{"run", "$DIR/race.json", "--size", "4K", "--race", "--iters", "2", "--backend", "gpu-emu"}, code: ExitRace,
			stderr: "launch 0 (cpu detector): race:", stdout: "race detection by the cpu backend's detector"},
		{name: "no race detection", args: []string{"run", "$DIR/race.json", "--size", "4K", "--iters", "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(strings.Join(tt.args, " "), "gpu-emu") && !builtIn("gpu-emu") {
				t.Skip("gpu-emu is not built (cgo and g++)")
			}
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
			if !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.stdout)
			}
			if n := strings.Count(stderr, "race:"); tt.code == ExitRace && n != 1 {
				t.Errorf("race reported %d times, want once per size", n)
			}
		})
	}
}
