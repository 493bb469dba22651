package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostSessionsBounded: host-memory runs (MSCCLGO_NCCL_HOSTMEM=1, the
// CPU backend) keep at most MSCCLGO_NCCL_MAX_SESSIONS plan instances
// open per communicator, as the device does: with 4, ten sizes of
// allreduce called round-robin twice (each call after the fourth closes
// the least recently called instance and opens its own again) are all
// right, and never more than 4 are open, ranks as threads (one hub) and
// as processes (a multi-process CPU session per rank). Before the bound,
// every size kept its session for the communicator's life.
func TestHostSessionsBounded(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{"allreduce.json": {"allreduce_packet", map[string]string{"world_size": "4"}}})
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "ours"), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_HOSTMEM=1",
		"MSCCLGO_PLAN_PATH=" + plans, "MSCCLGO_NCCL_MAX_SESSIONS=4"}
	const calls = 20 // per rank
	check := func(t *testing.T, what string, r run, ranks int) {
		t.Helper()
		r.succeeded(t)
		if n := strings.Count(r.stdout, " ok\n"); n != ranks*calls || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("%s: %d results right, want %d:\n%s", what, n, ranks*calls, r.stdout)
		}
		if n := strings.Count(r.stderr, ": 4 plan instances open on host memory, 16 closed so far to make room (MSCCLGO_NCCL_MAX_SESSIONS bounds them)"); n != ranks {
			t.Errorf("%s: %d ranks logged 16 host sessions closed, want %d:\n%s", what, n, ranks, r.stderr)
		}
		if strings.Contains(r.stderr, "5 plan instances open on host memory") {
			t.Errorf("%s: more than 4 host sessions open:\n%s", what, r.stderr)
		}
		if !strings.Contains(r.stderr, "on host memory (CPU backend)") {
			t.Errorf("%s: no call ran on host memory:\n%s", what, r.stderr)
		}
	}
	t.Run("threads", func(t *testing.T) {
		check(t, "threads", runCheck(t, env, "sessions", "4"), 4)
	})
	t.Run("processes", func(t *testing.T) {
		for rank, r := range runCheckProcs(t, 4, env, "sessionsprocs") {
			check(t, fmt.Sprintf("rank %d", rank), r, 1)
		}
	})
}

// TestHostSessionsEnv: a bad MSCCLGO_NCCL_MAX_SESSIONS fails the init of
// a build without a device backend too (host-memory runs read it).
func TestHostSessionsEnv(t *testing.T) {
	r := runCheckExit(t, 1, []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "ours"), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_NCCL_MAX_SESSIONS=0"}, "threads", "2")
	if !strings.Contains(r.stdout, `MSCCLGO_NCCL_MAX_SESSIONS="0": want a number of plan instances open per communicator from 1 to 4096`) {
		t.Errorf("the init does not name the variable:\n%s\n%s", r.stdout, r.stderr)
	}
}

// TestHostLRU: the host sessions' eviction rule picks the least recently
// called open instance once max are open, none before.
func TestHostLRU(t *testing.T) {
	for _, c := range []struct {
		name  string
		max   int
		calls []string
		want  string
	}{
		{"room left", 3, []string{"a", "b"}, ""},
		{"oldest first", 2, []string{"a", "b"}, "a"},
		{"called again is young", 2, []string{"a", "b", "a"}, "b"},
		{"default bound", 0, []string{"a", "b"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := hostLRU{max: c.max}
			open := map[string]bool{}
			for _, k := range c.calls {
				l.touch(k)
				open[k] = true
			}
			if got := l.victim(len(open)); got != c.want {
				t.Errorf("victim after %v with max %d: %q, want %q", c.calls, c.max, got, c.want)
			}
		})
	}
}
