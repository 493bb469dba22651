package cli

import (
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/gpu/emu"
)

// TestRunCounters: run --counters on gpu-emu prints each size's traffic
// (gpu.WriteTraffic) after its row, and is refused on another backend.
func TestRunCounters(t *testing.T) {
	t.Parallel()
	if !emu.Available {
		t.Skip("no gpu-emu in this build")
	}
	dir := t.TempDir()
	code, stdout, stderr := run(t, dir, "run", "allreduce_packet", "-D", "world_size=2", "-s", "64K", "-n", "1", "--backend", "gpu-emu", "--counters")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		"# counters, size 65536, last launch: bytes each op type moved",
		"#   op         channel          moved       required",
		"#   ops that moved more than the plan requires: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := run(t, dir, "run", "allreduce_packet", "-D", "world_size=2", "-s", "64K", "--backend", "cpu", "--counters"); code != ExitUsage || !strings.Contains(stderr, "--counters: the cpu backend does not count traffic") {
		t.Errorf("cpu: exit %d: %s", code, stderr)
	}
}
