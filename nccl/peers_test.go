package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// peers_test.go is issue 44's late and lost peers: testdata/peers.c as
// the ranks of a job of processes (or as threads), one whose peer comes
// late, leaves, aborts or makes another call.

var (
	peersOnce sync.Once
	peersErr  error
)

// peersProgram builds testdata/peers.c against the library, beside
// artifacts' builds.
func peersProgram(t *testing.T) string {
	dir := artifacts(t)
	peersOnce.Do(func() {
		s := []string{"gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude",
			"-o", filepath.Join(dir, "peers"), "testdata/peers.c",
			"-L" + filepath.Join(dir, "ours"), "-l:libnccl.so.2", "-Wl,-rpath," + filepath.Join(dir, "ours"), "-lpthread", "-ldl"}
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil || len(out) > 0 {
			peersErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	})
	if peersErr != nil {
		t.Fatal(peersErr)
	}
	return dir
}

// peersBound bounds each run: one still running then hangs.
const peersBound = 90 * time.Second

// runPeers runs peers with args as the n ranks of a job of processes
// (n 0: one process, its ranks threads), on the emulated device where emu
// says, and returns each process's output. env adds to a clean set.
func runPeers(t *testing.T, n int, emu bool, env []string, args ...string) []string {
	t.Helper()
	return runPeersJob(t, peersJob{n: n, emu: emu, env: env}, args...)
}

// peersJob is how runPeersJob runs peers: n, emu and env as runPeers
// takes them; rankEnv adds to one process's environment; limit is the
// arguments of a shell's ulimit the processes run under ("-n 16");
// exitOK are the exit codes a row expects of a process beside 0 (1: its
// init failed).
type peersJob struct {
	n       int
	emu     bool
	env     []string
	rankEnv map[int][]string
	limit   string
	exitOK  []int
}

// runPeersJob is runPeers for job j.
func runPeersJob(t *testing.T, j peersJob, args ...string) []string {
	t.Helper()
	n, emu, env := j.n, j.emu, j.env
	dir := peersProgram(t)
	idFile := filepath.Join(t.TempDir(), "id")
	procs := max(n, 1)
	outs := make([]string, procs)
	var wg sync.WaitGroup
	for r := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), peersBound)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, "peers"), args...)
			if j.limit != "" {
				cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", "ulimit " + j.limit + ` && exec "$0" "$@"`, filepath.Join(dir, "peers")}, args...)...)
			}
			cmd.Env = append(cleanEnv(), "MSCCLGO_CACHE_DIR="+t.TempDir(), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_TRANSPORT=tcp")
			if n > 0 {
				cmd.Env = append(cmd.Env, "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "PEERS_ID_FILE="+idFile)
			}
			if emu {
				cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+filepath.Join(dir, "emu"))
			}
			cmd.Env = append(cmd.Env, env...)
			cmd.Env = append(cmd.Env, j.rankEnv[r]...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			expected := errors.As(err, &ee) && slices.Contains(j.exitOK, ee.ExitCode())
			outs[r] = string(out)
			switch {
			case ctx.Err() != nil:
				t.Errorf("rank %d: peers %v ran past %v (a hang):\n%s", r, args, peersBound, out)
			case err != nil && r == 1 && slices.Equal(args[:2], []string{"lost", "kill"}) && strings.Contains(err.Error(), "signal: killed"):
				// The rank that kills itself.
			case expected:
			case err != nil:
				t.Errorf("rank %d: peers %v: %v (a crash or a failed set-up):\n%s", r, args, err, out)
			}
			for _, bad := range []string{"SIGSEGV", "signal 11", "panic", "fatal error", "WRONG"} {
				if strings.Contains(string(out), bad) {
					t.Errorf("rank %d: peers %v: %q in the output:\n%s", r, args, bad, out)
				}
			}
		}()
	}
	wg.Wait()
	return outs
}

// peersPlans are plans for two ranks.
func peersPlans(t *testing.T) string {
	return bundledPlans(t, map[string]planDef{"allreduce_2.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
}

// wantIn fails t unless out has every one of want.
func wantIn(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// secondsOf is the time a line "rank R: WHAT -> CODE in S s" gives, -1
// without one.
func secondsOf(out, what string) float64 {
	m := regexp.MustCompile(regexp.QuoteMeta(what) + ` -> \d+ in ([0-9.]+) s`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	s, _ := strconv.ParseFloat(m[1], 64)
	return s
}

// TestLatePeer: with ranks as host-memory processes, a peer that comes
// late to a call is waited for (MSCCLGO_NCCL_TIMEOUT, counted from the
// early rank's call), not declared a deadlock after the CPU backend's
// second (issue 44: "deadlock: 2 thread block(s) blocked" after 1.2 s,
// whatever the timeout); one later than the timeout fails the early
// rank's call with an error naming the rank and the bound, and the late
// rank's call fails at once, naming the rank that left.
func TestLatePeer(t *testing.T) {
	plans := peersPlans(t)
	host := []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}
	t.Run("within the timeout", func(t *testing.T) {
		t.Parallel()
		outs := runPeers(t, 2, false, append([]string{"MSCCLGO_NCCL_TIMEOUT=20s"}, host...), "late", "call", "2000", "3")
		for r, out := range outs {
			wantIn(t, fmt.Sprintf("rank %d", r), out, fmt.Sprintf("rank %d: allreduce 1 -> 0", r), fmt.Sprintf("rank %d: 3 calls right", r))
		}
	})
	t.Run("at the init", func(t *testing.T) {
		t.Parallel()
		outs := runPeers(t, 2, false, append([]string{"MSCCLGO_NCCL_TIMEOUT=20s"}, host...), "late", "init", "2000", "2")
		for r, out := range outs {
			wantIn(t, fmt.Sprintf("rank %d", r), out, fmt.Sprintf("rank %d: 2 calls right", r))
		}
	})
	t.Run("past the timeout", func(t *testing.T) {
		t.Parallel()
		outs := runPeers(t, 2, false, append([]string{"MSCCLGO_NCCL_TIMEOUT=500ms"}, host...), "late", "call", "2500", "3")
		wantIn(t, "rank 0", outs[0], "rank 0: allreduce 1 -> 5",
			"ncclAllReduce count 1024 ncclFloat32 ncclSum (the communicator's call 1): ranks [1] did not call within 500ms (MSCCLGO_NCCL_TIMEOUT, counted from this rank's call")
		wantIn(t, "rank 1", outs[1], "rank 1: allreduce 1 -> ", "waiting for ranks [0] to call", "rank 0 closed its bootstrap")
		if s := secondsOf(outs[1], "rank 1: allreduce 1"); s < 0 || s > 10 {
			t.Errorf("the late rank's call took %v s, want it to fail at once:\n%s", s, outs[1])
		}
	})
}

// TestMismatchAfterMatching: ranks as host-memory processes that make
// different calls after matching ones fail on every rank with an error
// that names both calls (issue 44: "deadlock" or "rank 0 closed its
// bootstrap"), as at the first call.
func TestMismatchAfterMatching(t *testing.T) {
	plans := peersPlans(t)
	for _, at := range []string{"0", "3"} {
		t.Run("after "+at, func(t *testing.T) {
			t.Parallel()
			outs := runPeers(t, 2, false, []string{"MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}, "mismatch", at)
			wantIn(t, "rank 0", outs[0], "rank 0: the mismatched call -> 5",
				"mismatched calls: rank 0 called ncclAllReduce count 1024 ncclFloat32 ncclSum, rank 1 called ncclAllGather count 1024 ncclFloat32")
			wantIn(t, "rank 1", outs[1], "rank 1: the mismatched call -> 5",
				"mismatched calls: rank 1 called ncclAllGather count 1024 ncclFloat32, rank 0 called ncclAllReduce count 1024 ncclFloat32 ncclSum")
			if at != "0" {
				wantIn(t, "rank 0", outs[0], "(the communicator's call 3, after 3 that matched)")
			}
		})
	}
}

// TestLostPeerFailsQueued: on the emulated device, calls queued on a
// stream behind a peer that destroyed or aborted its communicator fail
// together, at once (issue 44: 20 queued calls waited the full timeout
// each, 40 s at MSCCLGO_NCCL_TIMEOUT=2s), and the asynchronous error names
// the peer.
func TestLostPeerFailsQueued(t *testing.T) {
	plans := peersPlans(t)
	for _, how := range []string{"destroy", "abort", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			outs := runPeers(t, 2, true, []string{"MSCCLGO_NCCL_TIMEOUT=10s", "MSCCLGO_PLAN_PATH=" + plans}, "lost", how, "2", "20")
			wantIn(t, "rank 0", outs[0], "rank 0: async error 6: ")
			if s := secondsOf(outs[0], "rank 0: its sync"); s < 0 || s >= 10 {
				t.Errorf("20 queued calls took %v s to fail, want less than one timeout (10s):\n%s", s, outs[0])
			}
			if how != "kill" {
				wantIn(t, "rank 0", outs[0], "rank 1 ended its communicator (ncclCommDestroy or ncclCommAbort) after its first 2 calls: it will not make call 2")
			}
		})
	}
}

// returnedIn is the time of the line "all ranks returned in S s", -1
// without one.
func returnedIn(out string) float64 {
	m := regexp.MustCompile(`all ranks returned in ([0-9.]+) s`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	s, _ := strconv.ParseFloat(m[1], 64)
	return s
}

// TestAbortSteady: ncclCommAbort of communicators whose ranks (threads of
// one process, on the emulated device) make steady calls returns, and the
// process does not crash (issue 44: SIGSEGV in Interp::packet_op every
// time with the launches queued: an aborted rank freed its scratch while
// its peer's kernel still wrote packets into it; a same-process peer now
// holds that memory, gpu.Retainer, until its own kernels have ended).
func TestAbortSteady(t *testing.T) {
	plans := peersPlans(t)
	for _, which := range []string{"all", "one", "async"} {
		t.Run(which, func(t *testing.T) {
			t.Parallel()
			out := runPeers(t, 0, true, []string{"MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_PLAN_PATH=" + plans}, "abortsteady", "2", "300", which)[0]
			wantIn(t, "the output", out, "rank 0: ncclCommAbort -> 0", "rank 1: ncclCommAbort -> 0")
			if s := returnedIn(out); s < 0 || s > 10 {
				t.Errorf("the ranks returned %v s after the first abort, want well within 10 s:\n%s", s, out)
			}
		})
	}
}

// TestAbortFromSignalThread: ncclCommAbort from a thread that took a
// signal with sigwait returns within a second or so, whether the rank's
// peer never calls (wait) or both make steady calls (issue 44: 18.5 s);
// 5 s is the hang guard.
func TestAbortFromSignalThread(t *testing.T) {
	plans := peersPlans(t)
	for _, mode := range []string{"wait", "steady"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out := runPeers(t, 0, true, []string{"MSCCLGO_NCCL_TIMEOUT=20s", "MSCCLGO_PLAN_PATH=" + plans}, "abortsignal", mode)[0]
			wantIn(t, "the output", out, "rank 0: ncclCommAbort from the signal thread -> 0", "rank 1: ncclCommAbort from the signal thread -> 0")
			m := regexp.MustCompile(`all ranks returned in ([0-9.]+) s after the signal`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no line of the ranks' return:\n%s", out)
			}
			if s, _ := strconv.ParseFloat(m[1], 64); s >= 5 {
				t.Errorf("the abort from the signal thread took %v s, want well under 5 s:\n%s", s, out)
			}
		})
	}
}

// TestLostPeerKilledRepeated: a peer process SIGKILLed after its calls,
// again and again, leaves the surviving rank failing its queued calls
// with an error, never crashing (issue 44: 1 run in 3 SIGSEGV in
// mg_emu_copy); runPeers fails a run on a signal or a crash line.
func TestLostPeerKilledRepeated(t *testing.T) {
	plans := peersPlans(t)
	for i, at := range []string{"0", "1", "2", "5"} {
		t.Run(fmt.Sprintf("run %d at %s", i, at), func(t *testing.T) {
			t.Parallel()
			outs := runPeers(t, 2, true, []string{"MSCCLGO_NCCL_TIMEOUT=10s", "MSCCLGO_PLAN_PATH=" + plans}, "lost", "kill", at, "10")
			wantIn(t, "rank 0", outs[0], "rank 0: async error 6: ", "rank 0: ncclCommAbort -> 0")
		})
	}
}

// TestCyclesNoLeak: 100 cycles of ncclCommInitAll, an allreduce and
// ncclCommDestroy on the emulated device grow the process's RSS by less
// than 20 MB (issue 44: 200 MB over 180 cycles), as peers.c's cycles mode
// prints it after a warm-up.
func TestCyclesNoLeak(t *testing.T) {
	plans := peersPlans(t)
	out := runPeers(t, 0, true, []string{"MSCCLGO_PLAN_PATH=" + plans}, "cycles", "100")[0]
	m := regexp.MustCompile(`100 cycles after \d+: RSS (-?\d+) KiB before, (-?\d+) KiB after, (-?\d+) KiB more`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RSS line:\n%s", out)
	}
	more, _ := strconv.Atoi(m[3])
	t.Logf("RSS %s KiB after the warm-up, %s KiB after 100 cycles: %d KiB more", m[1], m[2], more)
	if more > 20<<10 {
		t.Errorf("100 cycles grew the RSS by %d KiB, want under 20 MiB:\n%s", more, out)
	}
}
