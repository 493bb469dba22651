package cli

// alltoallv_test.go checks run --counts and check on alltoallv plans.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAllToAllVCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counts.txt"), []byte("0 9\n5 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.txt"), []byte("0 9\n-5 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // a substring
		stderr string // a substring
	}{
		{"check explains", []string{"check", "alltoallv", "-D", "world_size=2"}, 0,
			`MSCCL++ refuses it: its collective "alltoallv" matches no MSCCL++ collective and its min_message_size 18446744073709551615 > max_message_size 0`, ""},
		{"counts file", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "$DIR/counts.txt", "-n", "2", "--race"}, 0, " 0\n", ""},
		{"generator", []string{"run", "alltoallv_port", "-D", "world_size=4", "-D", "ranks_per_node=2", "--counts", "moe:experts=8,topk=2,tokens=64,seed=2", "-n", "1"}, 0, " 0\n", ""},
		{"negative count", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "$DIR/bad.txt"}, 1, "", "send_counts[1][0]: -5 is negative"},
		{"no counts", []string{"run", "alltoallv", "-D", "world_size=2", "--size", "1M"}, 2, "", "give --counts FILE or a generator"},
		{"gpu backend refused", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "uniform", "--backend", "gpu-emu"}, 1, "", "the GPU backends do not run alltoallv plans"},
		{"counts on a static plan", []string{"run", "alltoall", "-D", "world_size=2", "--counts", "uniform"}, 2, "", "--counts applies to alltoallv plans"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stdout containing %q, stderr containing %q", code, tt.code, stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
}
