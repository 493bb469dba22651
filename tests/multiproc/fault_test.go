package multiproc

// fault_test.go: runs of one process per rank that go wrong. Each must end
// on every surviving rank with an error that names the cause (the lost
// rank, both world sizes, the missing rank, the blocked thread blocks),
// never hang.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKilledRank kills rank 2 of 4 mid-run: the others stop with an
// error naming rank 2.
func TestKilledRank(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allgather", "world_size=4")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	rs := startRanks(t, ctx, 4, nil, nil, "run", p, "-d", "float", "--size", "1M", "-n", "1000000")
	rs.waitLaunching(t)
	rs.killNamed(t, 2)
}

// TestWrongWorldSize: a plan of 4 ranks started as 2 processes, and one
// rank told a different world size than the others.
func TestWrongWorldSize(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allgather", "world_size=4")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	procs := startRanks(t, ctx, 2, nil, nil, "run", p, "-d", "float", "--size", "64K").wait(t)
	for r, pr := range procs {
		if pr.code == 0 || !strings.Contains(pr.stderr, "the plan has 4 ranks, the job 2 processes") {
			t.Errorf("rank %d: exit %d, want both sizes named:\n%s", r, pr.code, pr.stderr)
		}
	}

	odd := func(r int) []string {
		if r == 3 {
			// Told consistently: a launcher saying 5 ranks on this
			// host says a local size of 5 (a local size of 4 would
			// make this rank a multi-host one without a secret).
			return []string{"WORLD_SIZE=5", "LOCAL_WORLD_SIZE=5"}
		}
		return nil
	}
	procs = startRanks(t, ctx, 4, odd, nil, "run", p, "-d", "float", "--size", "64K", "--join-timeout", "20s").wait(t)
	for r, pr := range procs {
		if pr.code == 0 || !strings.Contains(pr.stderr, "world size") {
			t.Errorf("rank %d: exit %d, want a world-size mismatch:\n%s", r, pr.code, pr.stderr)
		}
	}
}

// TestRankNeverStarts: with a short join timeout, a missing rank is named.
func TestRankNeverStarts(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allgather", "world_size=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	never := func(r int) time.Duration {
		if r == 1 {
			return time.Hour
		}
		return 0
	}
	rs := startRanks(t, ctx, 2, nil, never, "run", p, "-d", "float", "--size", "64K", "--join-timeout", "1s")
	err := rs.cmds[0].Wait()
	if err == nil || !strings.Contains(rs.errs[0].String(), "rank 1") {
		t.Errorf("rank 0: %v, want an error naming rank 1:\n%s", err, rs.errs[0])
	}
}

// TestDeadlockAcrossProcesses: rank 1 of a signal/wait plan never
// signals; both ranks exit with the deadlock status and rank 0 prints
// the blocked thread blocks of the job.
func TestDeadlockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	p := deadlockPlan(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	procs := startRanks(t, ctx, 2, nil, nil, "run", p, "-d", "float", "--size", "64K", "--timeout", "300ms").wait(t)
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

// deadlockPlan writes into dir the signal/wait test plan without rank 1's
// signals and returns its path.
func deadlockPlan(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(plan(t, "unit_tests/signal_wait/signal_wait_test.plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // max_message_size is 2^64-1
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	gpus := doc["gpus"].([]any)
	g1 := gpus[1].(map[string]any)
	for _, tb := range g1["threadblocks"].([]any) {
		tbm := tb.(map[string]any)
		var keep []any
		for _, op := range tbm["ops"].([]any) {
			if op.(map[string]any)["name"] != "signal" {
				keep = append(keep, op)
			}
		}
		tbm["ops"] = keep
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "deadlock.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWrongDataAcrossProcesses: a 4-rank ring reduce-scatter whose put
// sends the wrong chunk (a planted mistake of internal/cli/testdata) run
// one process per rank: rank 0 explains the wrong data as a run of one
// process does, opening with the put's line as the most likely cause.
func TestWrongDataAcrossProcesses(t *testing.T) {
	p, err := filepath.Abs(filepath.Join("..", "..", "internal", "cli", "testdata", "causes", "ring_reducescatter4_wrong_source.star"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	procs := startRanks(t, ctx, 4, nil, nil, "run", p, "--size", "16K", "-n", "1").wait(t)
	for r, pr := range procs {
		if pr.code != 1 {
			t.Errorf("rank %d: exit %d, want 1 (wrong data):\n%s", r, pr.code, pr.stderr)
		}
	}
	lines := strings.Split(procs[0].stderr, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "  most likely cause: the put at "+p+":11:") {
		t.Errorf("rank 0's report does not open with the put of line 11:\n%s", procs[0].stderr)
	}
}

// TestPacketDeadlockAcrossProcesses: the 4-rank LL allgather whose put
// writes the wrong scratch slot (a planted mistake of internal/cli/testdata)
// run one process per rank: the packet waits travel typed between the
// ranks, and rank 0 names the put's line as a run of one process does.
func TestPacketDeadlockAcrossProcesses(t *testing.T) {
	p, err := filepath.Abs(filepath.Join("..", "..", "internal", "cli", "testdata", "causes", "ll_allgather4_wrong_slot.star"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	procs := startRanks(t, ctx, 4, nil, nil, "run", p, "--size", "16K", "-n", "1", "--timeout", "500ms").wait(t)
	for r, pr := range procs {
		if pr.code != 3 {
			t.Errorf("rank %d: exit %d, want 3 (deadlock):\n%s", r, pr.code, pr.stderr)
		}
	}
	lines := strings.Split(procs[0].stderr, "\n")
	want := "  most likely cause: the ppkt at " + p + ":10:44 wrote slot 0 of rank 0's scratch (rank 3 tb 0 op 0), where the upkt at " + p + ":16:35 reads slot 1"
	if len(lines) < 2 || !strings.HasPrefix(lines[1], want) || !strings.Contains(procs[0].stderr, "packets at scratch[8192:16384] (slot 1) have flag 0, want 1") {
		t.Errorf("rank 0's report does not open with the put of line 10:\n%s", procs[0].stderr)
	}
}
