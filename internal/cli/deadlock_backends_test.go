package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDeadlockCauseAcrossBackends runs the planted LL-slot mistakes that
// wait forever (a read of a scratch slot no op writes) and the ring whose
// ranks wait before they signal on the cpu backend and on gpu-emu: both give the same typed packet wait
// (executor.PacketWait) and go through the same diagnosis
// (executor/diagnose), so the report opens with the same most likely
// cause (the same buffer, slot and .star lines), within maxReportLines,
// and with --explain every line of the two reports is the same (a packet
// wait names its slot's packets by their offset within the scratch, not
// the packet a GPU thread happened to check).
func TestDeadlockCauseAcrossBackends(t *testing.T) {
	if !builtIn("gpu-emu") {
		t.Skip("gpu-emu is not built (cgo and g++)")
	}
	for _, name := range []string{"ll_allgather4_wrong_slot", "ll_allgather_wrong_slot", "ll_allgather_unpack_wrong_slot", "ring_reducescatter4_wait_before_signal"} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join("testdata", "causes", name+".star")
			var causes []string
			for _, backend := range []string{"cpu", "gpu-emu"} {
				code, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "1", "--timeout", "500ms", "--backend", backend)
				if code != ExitDeadlock {
					t.Fatalf("%s: exit %d, want %d:\n%s", backend, code, ExitDeadlock, stderr)
				}
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if len(lines) > maxReportLines {
					t.Errorf("%s: report of %d lines, want at most %d:\n%s", backend, len(lines), maxReportLines, stderr)
				}
				if len(lines) < 2 || !strings.HasPrefix(lines[1], "  most likely cause: ") {
					t.Fatalf("%s: the report does not open with the most likely cause:\n%s", backend, stderr)
				}
				causes = append(causes, lines[1])
			}
			if causes[0] != causes[1] {
				t.Errorf("the causes differ:\ncpu:     %s\ngpu-emu: %s", causes[0], causes[1])
			}
			var all []string
			for _, backend := range []string{"cpu", "gpu-emu"} {
				_, _, stderr := run(t, "", "run", f, "-s", "16K", "-n", "1", "--timeout", "500ms", "--backend", backend, "--explain")
				lines := strings.Split(stderr, "\n")
				slices.Sort(lines)
				all = append(all, strings.Join(lines, "\n"))
			}
			if all[0] != all[1] {
				t.Errorf("the reports differ:\ncpu:\n%s\ngpu-emu:\n%s", all[0], all[1])
			}
		})
	}
}
