package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// peers_sweep_test.go is issue 44's sweep beside the named cases of
// peers_test.go: late, lost and strange peers at other points and on the
// other memory, signals, resource limits and leaks over loops, one row
// each (docs/integration.md lists them with the hostile sweep's).

// peersRow is one row of the sweep: peers run as job with args; want
// holds what each process's output must hold; check looks further.
type peersRow struct {
	class, name string
	job         peersJob
	args        []string
	want        map[int][]string
	check       func(t *testing.T, outs []string)
}

// growth checks the cycles mode's line: RSS under 20 MiB more, and at
// most fds descriptors and threads threads more.
func growth(fds, threads int) func(t *testing.T, outs []string) {
	return func(t *testing.T, outs []string) {
		m := regexp.MustCompile(`RSS -?\d+ KiB before, -?\d+ KiB after, (-?\d+) KiB more`).FindStringSubmatch(outs[0])
		f := regexp.MustCompile(`descriptors before, -?\d+ after, (-?\d+) more; -?\d+ threads before, -?\d+ after, (-?\d+) more`).FindStringSubmatch(outs[0])
		if m == nil || f == nil {
			t.Fatalf("no growth lines:\n%s", outs[0])
		}
		rss, _ := strconv.Atoi(m[1])
		df, _ := strconv.Atoi(f[1])
		dt, _ := strconv.Atoi(f[2])
		t.Logf("%d KiB, %d descriptors, %d threads more", rss, df, dt)
		if rss > 20<<10 || df > fds || dt > threads {
			t.Errorf("grew by %d KiB RSS, %d descriptors, %d threads; want under 20 MiB, at most %d and %d:\n%s", rss, df, dt, fds, threads, outs[0])
		}
	}
}

// peersRows are the sweep's rows; plans holds plans for 2 and 3 ranks,
// tmp is a directory for the rows' own files.
func peersRows(plans, tmp string) []peersRow {
	host := []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}
	dev := []string{"MSCCLGO_PLAN_PATH=" + plans}
	with := func(base []string, more ...string) []string { return append(append([]string{}, more...), base...) }
	var rows []peersRow
	add := func(r peersRow) { rows = append(rows, r) }

	// Late peers.
	add(peersRow{"late", "init past the timeout, host memory", peersJob{n: 2, env: with(host, "MSCCLGO_NCCL_TIMEOUT=1s"), exitOK: []int{1}},
		[]string{"late", "init", "3000", "2"}, map[int][]string{
			// "after 1s", or "after 999ms" where the deadline (1 s from
			// the init's start) fired before 1 s from bootstrap's own.
			0: {"rank 0: ncclCommInitRank -> 2", "waiting for rank 1 to join", "context deadline exceeded after "},
			1: {"rank 1: ncclCommInitRank -> 2"}}, func(t *testing.T, outs []string) {
			// Rank 0 has gone when rank 1 comes: rank 1 waits for the
			// address in the id, or, where another process has taken
			// rank 0's freed port meanwhile (tests run side by side),
			// is refused at once by the check of the job's secret.
			if !strings.Contains(outs[1], "waiting for rank 0 at") && !strings.Contains(outs[1], "did not prove this job's secret (the ncclUniqueId): it is not this job's rank 0") {
				t.Errorf("process 1 neither waited for rank 0 nor refused a stranger at its address:\n%s", outs[1])
			}
		}})
	add(peersRow{"late", "call within the timeout, emulated device", peersJob{n: 2, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=20s")},
		[]string{"late", "call", "1500", "3"}, map[int][]string{0: {"rank 0: 3 calls right"}, 1: {"rank 1: 3 calls right"}}, nil})
	add(peersRow{"late", "init within the timeout, emulated device", peersJob{n: 2, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=20s")},
		[]string{"late", "init", "1500", "2"}, map[int][]string{0: {"rank 0: 2 calls right"}, 1: {"rank 1: 2 calls right"}}, nil})

	// Strange peers.
	add(peersRow{"strange peers", "world sizes differ", peersJob{n: 2, env: with(host, "MSCCLGO_NCCL_TIMEOUT=5s"), rankEnv: map[int][]string{1: {"WORLD_SIZE=3"}}, exitOK: []int{1}},
		[]string{"late", "call", "0", "2"}, map[int][]string{
			0: {"rank 0: ncclCommInitRank -> 2", "rank 1 reported world size 3, this rank has 2"},
			1: {"rank 1: ncclCommInitRank -> 2", "rank 0 refused this rank: rank 1 reported world size 3, rank 0 has 2"}}, nil})
	add(peersRow{"strange peers", "a rank out of range", peersJob{n: 2, env: with(host, "MSCCLGO_NCCL_TIMEOUT=2s"), rankEnv: map[int][]string{1: {"RANK=2"}}, exitOK: []int{1}},
		[]string{"late", "call", "0", "2"}, map[int][]string{
			0: {"rank 0: ncclCommInitRank -> 2", "waiting for rank 1 to join"},
			1: {"rank 2: ncclCommInitRank -> 4", "rank 2 outside the 2 ranks of the communicator (0 to 1)"}}, nil})
	add(peersRow{"strange peers", "two rank 0s", peersJob{n: 2, env: with(host, "MSCCLGO_NCCL_TIMEOUT=2s"),
		rankEnv: map[int][]string{1: {"RANK=0", "PEERS_ID_FILE=" + filepath.Join(tmp, "id2")}}, exitOK: []int{1}},
		[]string{"late", "call", "0", "2"}, map[int][]string{
			0: {"rank 0: ncclCommInitRank -> 2", "waiting for rank 1 to join"},
			1: {"rank 0: ncclCommInitRank -> 2", "waiting for rank 1 to join"}}, nil})
	add(peersRow{"strange peers", "mismatch after 3 matching calls, emulated device", peersJob{n: 2, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=10s")},
		[]string{"mismatch", "3"}, map[int][]string{
			// (Which error rank 0 gets depends on whether rank 1's
			// refusal ended its communicator first: the mismatch, or
			// "rank 1 ended its communicator"; rank 1's names neither.)
			0: {"rank 0: the mismatched call -> 6", "(ncclAllReduce count 1024 ncclFloat32 ncclSum with in-place plan allreduce_packet_2gpu)"},
			1: {"rank 1: the mismatched call -> 5"}}, nil})

	// Lost peers.
	for _, how := range []string{"destroy", "abort", "kill"} {
		add(peersRow{"lost", how + " after 2 calls, host memory", peersJob{n: 2, env: with(host, "MSCCLGO_NCCL_TIMEOUT=10s")},
			[]string{"lost", how, "2", "5"}, map[int][]string{0: {"rank 0: a queued call -> 6", "5 of 5 queued calls refused", "rank 0: ncclCommAbort -> 0"}}, nil})
	}
	for _, how := range []string{"destroy", "abort"} {
		add(peersRow{"lost", how + " before any call, emulated device", peersJob{n: 2, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=10s")},
			// (The first call opens the plan's session over the
			// bootstrap, whose end fails it: ncclInvalidUsage.)
			[]string{"lost", how, "0", "10"}, map[int][]string{0: {"rank 0: a queued call -> 5", "10 of 10 queued calls refused", "rank 1 closed its bootstrap"}}, nil})
	}
	for _, how := range []string{"kill", "abort"} {
		add(peersRow{"lost", "3 ranks, rank 1's " + how + ", emulated device", peersJob{n: 3, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=10s")},
			[]string{"lost", how, "2", "10"}, map[int][]string{0: {"rank 0: async error 6: "}, 2: {"rank 2: ncclCommAbort -> 0"}}, nil})
	}

	// Signals.
	add(peersRow{"signals", "SIGUSR2 every ms to calling threads, emulated device", peersJob{emu: true, env: dev},
		[]string{"sigstorm", "3000"}, map[int][]string{0: {"rank 0: 3000 calls right", "rank 1: 3000 calls right", "rank 1: ncclCommDestroy -> 0"}}, nil})
	add(peersRow{"signals", "SIGUSR2 every ms to calling threads, host memory", peersJob{env: host},
		[]string{"sigstorm", "1000"}, map[int][]string{0: {"rank 0: 1000 calls right", "rank 1: 1000 calls right", "rank 1: ncclCommDestroy -> 0"}}, nil})
	add(peersRow{"signals", "abort at once as the steady calls start, emulated device", peersJob{emu: true, env: dev},
		[]string{"abortsteady", "2", "0", "all"}, map[int][]string{0: {"rank 0: ncclCommAbort -> 0", "rank 1: ncclCommAbort -> 0", "all ranks returned"}}, nil})
	add(peersRow{"signals", "abort 3 ranks with launches queued, emulated device", peersJob{emu: true, env: dev},
		[]string{"abortsteady", "3", "200", "async"}, map[int][]string{0: {"rank 2: ncclCommAbort -> 0", "all ranks returned"}}, nil})

	// Resource limits.
	add(peersRow{"limits", "ulimit -v 1 GB, emulated device", peersJob{emu: true, env: dev, limit: "-v 1000000"},
		[]string{"abortsteady", "2", "300", "all"}, map[int][]string{0: {"steady calls, the last -> 5", "(ulimit -v)", "all ranks returned"}}, nil})
	add(peersRow{"limits", "ulimit -n 16, emulated device", peersJob{emu: true, env: dev, limit: "-n 16"},
		[]string{"abortsteady", "2", "300", "all"}, map[int][]string{0: {"steady calls, the last -> 5", "RLIMIT_NOFILE, ulimit -n, is 16", "all ranks returned"}}, nil})
	add(peersRow{"limits", "ulimit -n 8 at the init", peersJob{env: with(host, "MSCCLGO_NCCL_TIMEOUT=2s"), limit: "-n 8", exitOK: []int{2}},
		[]string{"abortsteady", "2", "300", "all"}, map[int][]string{0: {"ncclCommInitAll -> 2", "too many open files"}}, nil})
	add(peersRow{"limits", "ulimit -n 64, a killed peer, emulated device", peersJob{n: 2, emu: true, env: with(dev, "MSCCLGO_NCCL_TIMEOUT=10s"), limit: "-n 64"},
		[]string{"lost", "kill", "2", "10"}, map[int][]string{0: {"rank 0: async error 6: "}}, nil})

	// Leaks over loops.
	add(peersRow{"leaks", "100 cycles, host memory", peersJob{env: host}, []string{"cycles", "100"}, nil, growth(0, 2)})
	add(peersRow{"leaks", "100 cycles ended by abort, emulated device", peersJob{emu: true, env: dev}, []string{"cycles", "100", "abort"}, nil, growth(0, 2)})
	add(peersRow{"leaks", "100 cycles: descriptors and threads, emulated device", peersJob{emu: true, env: dev}, []string{"cycles", "100"}, nil, growth(0, 2)})
	return rows
}

// TestPeersSweep runs peersRows.
func TestPeersSweep(t *testing.T) {
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_2.json": {"allreduce_packet", map[string]string{"world_size": "2"}},
		"allreduce_3.json": {"allreduce_packet", map[string]string{"world_size": "3"}},
	})
	for _, r := range peersRows(plans, t.TempDir()) {
		t.Run(r.class+"/"+r.name, func(t *testing.T) {
			t.Parallel()
			outs := runPeersJob(t, r.job, r.args...)
			for p, ws := range r.want {
				wantIn(t, fmt.Sprintf("process %d", p), outs[p], ws...)
			}
			if r.check != nil {
				r.check(t, outs)
			}
		})
	}
}
