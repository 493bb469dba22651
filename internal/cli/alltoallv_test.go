package cli

// alltoallv_test.go checks run --counts (on the cpu and gpu-emu
// backends), model --counts and check on alltoallv plans.

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
		{"gpu-emu", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "$DIR/counts.txt", "-n", "2", "--backend", "gpu-emu"}, 0, " 0\n", ""},
		{"gpu-emu port channels", []string{"run", "alltoallv_port", "-D", "world_size=4", "-D", "ranks_per_node=2", "--counts", "random:seed=4,max=300", "-n", "2", "--backend", "gpu-emu", "--threads", "3", "--dtype", "float16"}, 0, "# backend gpu-emu, dtype half", ""},
		{"race on gpu-emu", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "uniform", "--backend", "gpu-emu", "--race"}, 2, "", "--race: the gpu-emu backend does not detect races"},
		{"threads on cpu", []string{"run", "alltoallv", "-D", "world_size=2", "--counts", "uniform", "--threads", "2"}, 2, "", "--threads applies to the gpu and gpu-emu backends"},
		{"model", []string{"model", "alltoallv", "-D", "world_size=4", "--counts", "uniform:count=4096", "--hw", "a100-sxm", "--dtype", "float32"}, 0, "     262144     float", ""},
		{"model without counts", []string{"model", "alltoallv", "-D", "world_size=2", "--size", "1M"}, 2, "", "give --counts FILE or a generator"},
		{"model counts and size", []string{"model", "alltoallv", "-D", "world_size=2", "--counts", "uniform", "-b", "1K", "-e", "4K"}, 2, "", "--minbytes does not apply to an alltoallv prediction"},
		{"model counts on a static plan", []string{"model", "alltoall", "-D", "world_size=2", "--counts", "uniform"}, 2, "", "--counts applies to alltoallv plans"},
		{"model bad counts", []string{"model", "alltoallv", "-D", "world_size=2", "--counts", "$DIR/bad.txt"}, 1, "", "send_counts[1][0]: -5 is negative"},
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
