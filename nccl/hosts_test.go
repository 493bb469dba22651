package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mscclgo/mscclgo/planset"
)

// hostsPlans are the plans of a job of two hosts of two ranks each: the
// hierarchical packet allreduce (memory channels inside a host, port
// channels between the hosts) and, for messages of 64 KiB and more, the
// hierarchical Simple one (puts into the other host's buffers).
// The index says 2 ranks per node (a directory without one is read as
// plans of one node).
func hostsPlans(t *testing.T) string {
	t.Helper()
	dir := bundledPlans(t, map[string]planDef{
		"allreduce_hier_packet.json": {"allreduce_hier_packet", map[string]string{"world_size": "4", "ranks_per_node": "2",
			"nblocks": "2", "instances": "1", "min_message_size": "0", "max_message_size": "32768"}},
		"allreduce_hier.json": {"allreduce_hier", map[string]string{"world_size": "4", "ranks_per_node": "2",
			"min_message_size": "65536"}},
	})
	idx, err := planset.ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range idx.Plans {
		idx.Plans[i].RanksPerNode = 2
	}
	text, err := idx.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, planset.IndexFile), text, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runHosts runs ncclcheck hosts CASE as the four ranks of a job of
// processes on two pretend hosts: ranks 0 and 1 say MSCCLGO_HOST=hostK0,
// ranks 2 and 3 hostK1 (the rank table groups ranks by that name, so the
// plans' port channels cross between them).
func runHosts(t *testing.T, env []string, hostVar, hcase string) []run {
	t.Helper()
	return runHostsWith(t, env, hcase, 0, hostSide(hostVar))
}

// hostSide names side s's ranks' host hostK<s> in variable hostVar.
func hostSide(hostVar string) func(s int) ([]string, []string) {
	return func(side int) ([]string, []string) {
		return nil, []string{fmt.Sprintf("%s=hostK%d", hostVar, side)}
	}
}

// runHostsWith runs ncclcheck hosts CASE as the four ranks, two per
// side, each expected to exit with status want: side(s) gives the
// command prefix of side s's ranks (a network namespace, say) and what
// they add to env (their host's name).
func runHostsWith(t *testing.T, env []string, hcase string, want int, side func(s int) (prefix, env []string)) []run {
	t.Helper()
	idFile := filepath.Join(t.TempDir(), "id")
	const n = 4
	runs := make([]run, n)
	var wg sync.WaitGroup
	for rank := range n {
		wg.Go(func() {
			prefix, extra := side(rank / 2)
			mine := append(slices.Clone(env), fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", n), "NCCLCHECK_ID_FILE="+idFile)
			runs[rank] = runCheckIn(t, prefix, want, append(mine, extra...), "hosts", hcase)
		})
	}
	wg.Wait()
	return runs
}

// checkHostsData checks that rank's run has want right results and no
// wrong one.
func checkHostsData(t *testing.T, rank int, r run, want int) {
	t.Helper()
	r.succeeded(t)
	if n := strings.Count(r.stdout, " ok\n"); n != want || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("rank %d: %d results right, want %d:\n%s\n%s", rank, n, want, r.stdout, r.stderr)
	}
}

// TestHostsLibrary: a communicator of the emulated-device library whose
// four ranks are processes on two pretend hosts (MSCCLGO_HOST, and
// NCCL_HOSTID, NCCL's name for it), as a job of two machines sees it
// (hostsCases).
func TestHostsLibrary(t *testing.T) {
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none",
		"MSCCLGO_PLAN_PATH=" + hostsPlans(t), "NCCLCHECK_DEVICE=emu", "MSCCLGO_TRANSPORT=tcp"}
	hostsCases(t, env, "gpu-emu")
}

// hostsCases runs the cases of a job of two pretend hosts through the
// library of env, whose device backend the INFO log names backend:
//   - steady: the rank table has two hosts of two ranks, the hierarchical
//     packet allreduce is chosen (2 ranks per node) and nine calls are
//     right, every value checked;
//   - mismatch: once both plan instances are open, a steady call of 1024
//     floats on one host and 2048 on the other returns on every rank and
//     becomes every rank's asynchronous error, naming both calls, in
//     ncclGetLastError;
//   - abort: the first host's ranks make a call the other host never
//     makes and abort while it is in flight; every abort returns;
//   - switch: each rank switches among three buffers call by call (call k
//     on buffer k mod 3), and the first host's ranks come 20 ms late to
//     every call, so the other host's kernel of a call runs, and sends
//     its port traffic, before the late ranks have set that call's
//     buffers. Every value of the nine calls is checked, with each plan
//     that crosses hosts: the packet plan (its port traffic lands in the
//     peer's scratch, which belongs to the session, never in the caller's
//     buffers) and the Simple one (its puts land in the peer's buffers,
//     but only after the start handshake with that peer: the late rank's
//     kernel, launched on this call's buffers, has signalled it). Made to
//     write the port traffic into the previous call's buffers, the
//     receiver fails the Simple case on every rank.
func hostsCases(t *testing.T, env []string, backend string) {
	for _, hostVar := range []string{"MSCCLGO_HOST", "NCCL_HOSTID"} {
		t.Run("steady/"+hostVar, func(t *testing.T) {
			for rank, r := range runHosts(t, env, hostVar, "steady") {
				checkHostsData(t, rank, r, 9)
				want := fmt.Sprintf("rank %d of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (in-place, 4096 bytes): plan allreduce_hier_packet_2x2gpu on %s, enqueued", rank, backend)
				if !strings.Contains(r.stderr, want) {
					t.Errorf("rank %d: log lacks %q:\n%s", rank, want, r.stderr)
				}
			}
		})
	}
	t.Run("mismatch", func(t *testing.T) {
		for rank, r := range runHosts(t, append(env, "MSCCLGO_NCCL_TIMEOUT=30s"), "MSCCLGO_HOST", "mismatch") {
			res := r.results()
			for _, call := range []string{"ncclAllReduce mismatched", "ncclCommAbort"} {
				if got := res[fmt.Sprintf("rank %d: %s", rank, call)]; got != "0" {
					t.Errorf("rank %d: %s -> %q, want 0\n%s\n%s", rank, call, got, r.stdout, r.stderr)
				}
			}
			line := lineWith(r.stdout, fmt.Sprintf("rank %d: async error ", rank))
			if !strings.HasPrefix(line, fmt.Sprintf("rank %d: async error 6: ", rank)) ||
				!strings.Contains(line, "mismatched calls: rank 0 called ncclAllReduce count 1024 ncclFloat32 ncclSum") ||
				!strings.Contains(line, "called ncclAllReduce count 2048 ncclFloat32 ncclSum") {
				t.Errorf("rank %d: async error line %q, want ncclRemoteError (6) naming both calls\n%s\n%s", rank, line, r.stdout, r.stderr)
			}
			t.Log(line)
			if n := strings.Count(r.stdout, " ok\n"); n != 2 || strings.Contains(r.stdout, "WRONG") {
				t.Errorf("rank %d: %d results right before the mismatch, want 2:\n%s", rank, n, r.stdout)
			}
		}
	})
	t.Run("abort", func(t *testing.T) {
		for rank, r := range runHosts(t, append(env, "MSCCLGO_NCCL_TIMEOUT=10m"), "MSCCLGO_HOST", "abort") {
			checkHostsData(t, rank, r, 1)
			if got := r.results()[fmt.Sprintf("rank %d: ncclCommAbort", rank)]; got != "0" {
				t.Errorf("rank %d: ncclCommAbort -> %q, want 0\n%s\n%s", rank, got, r.stdout, r.stderr)
			}
		}
	})
	for _, c := range []struct {
		count int
		plan  string
	}{
		{1024, "allreduce_hier_packet_2x2gpu"},
		{32768, "allreduce_hier_2x2gpu"},
	} {
		t.Run("switch/"+c.plan, func(t *testing.T) {
			for rank, r := range runHosts(t, append(env, fmt.Sprintf("NCCLCHECK_COUNT=%d", c.count)), "MSCCLGO_HOST", "switch") {
				checkHostsData(t, rank, r, 9)
				want := fmt.Sprintf("rank %d of 4: ncclAllReduce count %d ncclFloat32 ncclSum (in-place, %d bytes): plan %s on %s, enqueued", rank, c.count, 4*c.count, c.plan, backend)
				if !strings.Contains(r.stderr, want) {
					t.Errorf("rank %d: log lacks %q:\n%s", rank, want, r.stderr)
				}
			}
		})
	}
}
