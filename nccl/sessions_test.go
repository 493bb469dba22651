package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceSessionsBounded: on the emulated device, with at most 4 plan
// instances open per communicator (MSCCLGO_NCCL_MAX_SESSIONS=4), ten
// sizes of allreduce called round-robin twice (every call closes the
// least recently called instance on every rank and opens its own again:
// its scratch, tables and the peers' mappings) are all right, ranks as
// threads and as processes.
func TestDeviceSessionsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: library runs")
	}
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "4"}}})
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none",
		"MSCCLGO_PLAN_PATH=" + plans, "MSCCLGO_NCCL_MAX_SESSIONS=4"}
	const calls = 20 // per rank
	check := func(t *testing.T, what string, r run, ranks int) {
		t.Helper()
		if n := strings.Count(r.stdout, " ok\n"); n != ranks*calls || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("%s: %d results right, want %d:\n%s", what, n, ranks*calls, r.stdout)
		}
		// Every call after the fourth closed one instance: 16 in all.
		if n := strings.Count(r.stderr, ": 4 plan instances open, 16 closed so far to make room (MSCCLGO_NCCL_MAX_SESSIONS bounds them)"); n != ranks {
			t.Errorf("%s: %d ranks logged 16 instances closed, want %d:\n%s", what, n, ranks, r.stderr)
		}
		if strings.Contains(r.stderr, "5 plan instances open") {
			t.Errorf("%s: more than 4 plan instances open:\n%s", what, r.stderr)
		}
	}
	t.Run("threads", func(t *testing.T) {
		r := runCheck(t, env, "sessions", "4")
		r.succeeded(t)
		check(t, "threads", r, 4)
	})
	t.Run("processes", func(t *testing.T) {
		for rank, r := range runCheckProcs(t, 4, env, "sessionsprocs") {
			r.succeeded(t)
			check(t, fmt.Sprintf("rank %d", rank), r, 1)
		}
	})
}
