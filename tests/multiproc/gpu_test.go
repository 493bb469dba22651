package multiproc

// gpu_test.go: one real process per rank on the emulated GPU backend
// (--backend gpu-emu): each process runs its rank's blocks on its own
// emulated device and opens its same-host peers' device memory through
// IPC handles (memory files); port channels between logical hosts go
// through the proxy and TCP.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/gpu/emu"
)

func TestGPUEmuProcesses(t *testing.T) {
	if !emu.Available {
		t.Skip("gpu-emu is not in this build (no cgo)")
	}
	for _, tc := range []struct {
		name    string
		plan    func(t *testing.T, dir string) string
		ranks   int
		perHost int // ranks per logical host; 0: one host
		sizes   []string
	}{
		{name: "4 ranks LL memory", plan: func(t *testing.T, dir string) string {
			return evalPlan(t, dir, "allreduce_packet", "world_size=4")
		}, ranks: 4, sizes: []string{"-b", "1K", "-e", "16K", "-f", "4"}},
		{name: "8 ranks NVLS reference", plan: func(t *testing.T, _ string) string {
			return plan(t, "single_node/allreduce_nvls_zero_copy.plan.json")
		}, ranks: 8, sizes: []string{"--size", "64K"}},
		{name: "2 ranks port across hosts", plan: func(t *testing.T, _ string) string {
			return plan(t, "unit_tests/put/put_with_signal_and_flush_test.plan.json")
		}, ranks: 2, perHost: 1, sizes: []string{"--size", "64K"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := tc.plan(t, dir)
			args := append([]string{"run", p, "-d", "float", "-n", "2", "--timeout", "20s"}, tc.sizes...)
			sout := singleProcess(t, dir, args)
			ctx, cancel := context.WithTimeout(context.Background(), hangBound)
			defer cancel()
			host := func(r int) []string {
				if tc.perHost == 0 {
					return nil
				}
				return []string{fmt.Sprintf("MSCCLGO_HOST=node%d", r/tc.perHost)}
			}
			procs := startRanks(t, ctx, tc.ranks, host, nil, append(args, "--backend", "gpu-emu", "--threads", "2")...).wait(t)
			for r, pr := range procs {
				if pr.code != 0 {
					t.Fatalf("rank %d: exit %d\n%s", r, pr.code, pr.stderr)
				}
			}
			out := procs[0].stdout
			if !strings.Contains(out, "backend gpu-emu") {
				t.Errorf("rank 0's header does not name gpu-emu:\n%s", out)
			}
			sameTable(t, out, sout)
		})
	}
}

// TestGPUEmuDeadlockAcrossProcesses: rank 1 never signals; the job-wide
// watch, fed by each process's progress records, stops both kernels and
// both ranks exit with the deadlock status, rank 0 listing the blocked
// thread block.
func TestGPUEmuDeadlockAcrossProcesses(t *testing.T) {
	if !emu.Available {
		t.Skip("gpu-emu is not in this build (no cgo)")
	}
	p := deadlockPlan(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	procs := startRanks(t, ctx, 2, nil, nil, "run", p, "-d", "float", "--size", "64K", "--timeout", "300ms",
		"--backend", "gpu-emu", "--threads", "2").wait(t)
	for r, pr := range procs {
		if pr.code != 3 {
			t.Errorf("rank %d: exit %d, want 3 (deadlock):\n%s", r, pr.code, pr.stderr)
		}
	}
	if e := procs[0].stderr; !strings.Contains(e, "deadlock") || !strings.Contains(e, "rank 0 tb 0") || !strings.Contains(e, "expects signal") {
		t.Errorf("rank 0 does not report the blocked thread block:\n%s", e)
	}
	// The same diagnosis as a run of one process: the cause first.
	if e := procs[0].stderr; !strings.Contains(e, "blocked\n  most likely cause: ") || !strings.Contains(e, "which rank 1 never signals") {
		t.Errorf("rank 0's report does not open with the cause (rank 1 never signals):\n%s", e)
	}
}
