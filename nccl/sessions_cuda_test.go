//go:build cuda

package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestDeviceSessionsCUDA: TestDeviceSessionsBounded's calls through
// gpu/cuda on four fake devices (the steady calls held on the stream,
// released by the gate server): with at most 4 plan instances open, ten
// sizes round-robin twice are all right, ranks as threads and as
// processes, and each rank closed 16 instances.
func TestDeviceSessionsCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "4"}}})
	env := append(fakeEnv(dir, 4, plans), "MSCCLGO_NCCL_MAX_SESSIONS=4")
	check := func(t *testing.T, what string, r run, ranks int) {
		t.Helper()
		r.succeeded(t)
		if n := strings.Count(r.stdout, " ok\n"); n != ranks*20 || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("%s: %d results right, want %d:\n%s\n%s", what, n, ranks*20, r.stdout, r.stderr)
		}
		if n := strings.Count(r.stderr, ": 4 plan instances open, 16 closed so far to make room"); n != ranks {
			t.Errorf("%s: %d ranks logged 16 instances closed, want %d:\n%s", what, n, ranks, r.stderr)
		}
	}
	t.Run("threads", func(t *testing.T) {
		check(t, "threads", runCheck(t, env, "sessions", "4"), 4)
	})
	t.Run("processes", func(t *testing.T) {
		for rank, r := range runCheckProcs(t, 4, append(env, "NCCLCHECK_DEVICE=cuda"), "sessionsprocs") {
			check(t, fmt.Sprintf("rank %d", rank), r, 1)
		}
	})
}
