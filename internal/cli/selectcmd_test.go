package cli

// selectcmd_test.go tests mscclgo select on a hand-written plan index:
// usage errors, the rejected plans listed, the in-place-only mismatch
// line.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/planset"
)

// writeSelectIndex writes a plan index (no plan files: select reads only
// the index) into dir/plans.
func writeSelectIndex(t *testing.T, dir string) {
	t.Helper()
	idx := &planset.Index{Version: planset.IndexVersion, Plans: []planset.Entry{
		{File: "ar_pkt_8.json", Name: "allreduce_packet_8", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "LL",
			InPlace: true, MaxMessageSize: 1 << 20, InputChunks: 8, OutputChunks: 8, BufferAlignment: 16},
		{File: "ar_rsag_8.json", Name: "allreduce_rsag_8", Collective: "allreduce", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			InPlace: true, MinMessageSize: 1<<20 + 1, MaxMessageSize: ^uint64(0), InputChunks: 64, OutputChunks: 64, BufferAlignment: 16},
		{File: "ag_8.json", Name: "allgather_8", Collective: "allgather", WorldSize: 8, RanksPerNode: 8, Protocol: "Simple",
			MaxMessageSize: ^uint64(0), InputChunks: 1, OutputChunks: 8, BufferAlignment: 16},
	}}
	data, err := idx.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "plans", planset.IndexFile), string(data))
}

func TestSelect(t *testing.T) {
	dir := t.TempDir()
	writeSelectIndex(t, dir)
	t.Setenv("MSCCLGO_PLAN_PATH", "")
	// --dir names a default set that was never installed: only --plans is
	// searched.
	base := []string{"select", "--plans", "$DIR/plans", "--dir", "$DIR/none"}
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings
		absent   []string // substrings of stdout that must not be there
		stderr   string
		fullHelp bool
	}{
		{name: "found", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "--in-place"},
			stdout: []string{"$DIR/plans/ar_pkt_8.json\n  plan: allreduce_packet_8\n"}, absent: []string{"rejected"}},
		{name: "found verbose lists every collective", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "--in-place", "-v"},
			stdout: []string{"plan: allreduce_packet_8", "rejected allgather_8 ($DIR/plans/ag_8.json): collective allgather, not allreduce",
				"rejected allreduce_rsag_8 ($DIR/plans/ar_rsag_8.json): message size 4096 outside"}},
		{name: "in-place only mismatch", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K"}, code: ExitError,
			stdout: []string{"no plan: no plan for allreduce of 4096 bytes",
				"\n  allreduce_packet_8: in-place plan, the call is out-of-place (it fits otherwise: $DIR/plans/ar_pkt_8.json)\n",
				"rejected allreduce_rsag_8", "(1 plan of another collective not shown; -v lists it)"},
			absent: []string{"rejected allgather_8", "rejected allreduce_packet_8"}},
		{name: "no plan verbose", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "-v"}, code: ExitError,
			stdout: []string{"allreduce_packet_8: in-place plan, the call is out-of-place", "rejected allgather_8"},
			absent: []string{"not shown"}},
		{name: "out-of-place plan for an in-place call", args: []string{"-c", "allgather", "-n", "8", "--size", "64K", "--in-place"}, code: ExitError,
			stdout: []string{"  allgather_8: out-of-place plan, the call is in-place (it fits otherwise"},
			absent: []string{"rejected allreduce"}},
		{name: "in-place and another mismatch", args: []string{"-c", "allgather", "-n", "4", "--size", "64K", "--in-place"}, code: ExitError,
			stdout: []string{"rejected allgather_8 ($DIR/plans/ag_8.json): built for 8 ranks, not 4"},
			absent: []string{"the call is in-place"}},
		{name: "collective in any case", args: []string{"-c", "AllReduce", "-n", "8", "--size", "4K", "--in-place"},
			stdout: []string{"plan: allreduce_packet_8"}},
		{name: "dtype alias", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "--in-place", "-d", "fp32"},
			stdout: []string{"plan: allreduce_packet_8"}},
		{name: "dtype glued to -d", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "--in-place", "-dbf16"},
			stdout: []string{"plan: allreduce_packet_8"}},
		{name: "unknown collective", args: []string{"-c", "allreduc", "-n", "8", "--size", "4K"}, code: ExitUsage,
			stderr: `mscclgo: --collective "allreduc": unknown collective (want allgather, allreduce, reducescatter, alltoall, sendrecv, alltoallv)`},
		{name: "world size 0", args: []string{"-c", "allreduce", "-n", "0", "--size", "4K"}, code: ExitUsage, stderr: "--world-size 0: want at least 1 rank"},
		{name: "negative world size", args: []string{"-c", "allreduce", "--world-size=-2", "--size", "4K"}, code: ExitUsage, stderr: "--world-size -2"},
		{name: "negative ranks per node", args: []string{"-c", "allreduce", "-n", "8", "--ranks-per-node=-1", "--size", "4K"}, code: ExitUsage, stderr: "--ranks-per-node -1"},
		{name: "bad dtype", args: []string{"-c", "allreduce", "-n", "8", "--size", "4K", "-d", "float8"}, code: ExitUsage, stderr: `--dtype: unknown data type "float8"`},
		{name: "bad size", args: []string{"-c", "allreduce", "-n", "8", "--size", "4Q"}, code: ExitUsage, stderr: "--size"},
		{name: "missing flag", args: []string{"-c", "allreduce", "--size", "4K"}, code: ExitUsage, stderr: "world-size", fullHelp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, dir, append(append([]string(nil), base...), tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if want := strings.ReplaceAll(s, "$DIR", dir); !strings.Contains(stdout, want) {
					t.Errorf("stdout does not contain %q:\n%s", want, stdout)
				}
			}
			for _, s := range tt.absent {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout contains %q:\n%s", s, stdout)
				}
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
			if tt.code == ExitUsage && !tt.fullHelp && stdout != "" {
				t.Errorf("a usage error printed on standard output:\n%s", stdout)
			}
		})
	}
}
