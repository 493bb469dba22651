package multiproc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/gpu/emu"
)

// The alltoallv plans run one process per rank (run --counts under a
// launcher): each rank fills its input with the data of the run of one
// process and checks every byte of its output, sentinels included, so a
// row of 0 wrong with the same total bytes as the run of one process
// means byte-identical outputs.

// alltoallvCase is an alltoallv plan run by hand as ranks processes,
// perHost to a logical host.
type alltoallvCase struct {
	name           string
	algo           string
	defs           []string
	ranks, perHost int
	transports     []string
	// backends run it, each process on its own device on gpu-emu.
	backends []string
}

func alltoallvCases() []alltoallvCase {
	return []alltoallvCase{
		// Memory channels between two processes of one host.
		{name: "alltoallv 2 processes", algo: "alltoallv", defs: []string{"world_size=2"}, ranks: 2, perHost: 2, transports: []string{"tcp"}, backends: []string{"cpu", "gpu-emu", "gpu"}},
		// Port channels between two hosts of two processes each.
		{name: "alltoallv_port 2x2", algo: "alltoallv_port", defs: []string{"world_size=4", "ranks_per_node=2"}, ranks: 4, perHost: 2, transports: []string{"tcp", "fabric"}, backends: []string{"cpu", "gpu-emu", "gpu"}},
	}
}

// alltoallvHeader checks that rank 0's header names a job of n processes
// on the transport tr: the run crossed processes.
func alltoallvHeader(t *testing.T, out string, n int, tr string) {
	t.Helper()
	want := []string{fmt.Sprintf("# %d processes (", n), "collective alltoallv", "port channels between processes: " + tr}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("rank 0's header lacks %q:\n%s", w, out)
		}
	}
}

// TestAllToAllVProcesses runs alltoallv plans one process per rank over
// the TCP wire and libfabric's tcp provider, on the cpu backend and on
// gpu-emu (each process its own emulated device: memory channels
// through IPC handles, port channels through each rank's proxy) and, in
// make test-fabric-cuda, on the gpu backend over the fake driver, with
// three counts matrices, each compared with the cpu backend's run of one
// process. Each rank checks every byte of its output, sentinels
// included.
func TestAllToAllVProcesses(t *testing.T) {
	for _, tc := range alltoallvCases() {
		for _, backend := range tc.backends {
			t.Run(tc.name+" "+backend, func(t *testing.T) {
				switch {
				case backend == "gpu-emu" && !emu.Available:
					t.Skip("gpu-emu is not in this build (no cgo)")
				case backend == "gpu" && os.Getenv("MSCCLGO_FAKE_KERNEL_LIB") == "":
					t.Skip("the gpu backend on the fake driver: make test-fabric-cuda")
				}
				dir := t.TempDir()
				p := evalPlan(t, dir, tc.algo, tc.defs...)
				for _, counts := range []string{"random:seed=3,max=3000", "moe:tokens=256,hidden=64", "uniform:count=0"} {
					args := []string{"run", p, "--counts", counts, "-n", "2", "--timeout", "20s"}
					single := singleProcess(t, dir, append(args, "--backend", "cpu"))
					args = append(args, "--backend", backend)
					switch backend {
					case "gpu-emu":
						args = append(args, "--threads", "2")
					case "gpu":
						args = append(args, "--threads", "4")
					}
					for _, tr := range tc.transports {
						var env []string
						want := "tcp (the bootstrap's connections)"
						if tr == "fabric" {
							needFabric(t, "tcp;ofi_rxm")
							env, want = []string{"FI_PROVIDER=tcp"}, "fabric, libfabric provider tcp;ofi_rxm"
						}
						got := succeeded(t, runHosts(t, tc.ranks, tc.perHost, env, append(args, "--transport", tr)...))
						alltoallvHeader(t, got, tc.ranks, want)
						if !strings.Contains(got, "backend "+backend+",") {
							t.Errorf("rank 0's header does not name backend %s:\n%s", backend, got)
						}
						sameTable(t, got, single)
					}
				}
			})
		}
	}
}

// TestAllToAllVTwoNamespaces runs alltoallv_port with two ranks in each
// of two network namespaces, over the TCP wire and the fabric.
func TestAllToAllVTwoNamespaces(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	h := newTwoHostsNamed(t, "msgoG")
	dir := t.TempDir()
	p := evalPlan(t, dir, "alltoallv_port", "world_size=4", "ranks_per_node=2")
	args := []string{"run", p, "--counts", "moe", "-n", "2", "--timeout", "20s"}
	single := singleProcess(t, dir, args)
	for _, tr := range []string{"tcp", "fabric"} {
		ctx, cancel := context.WithTimeout(context.Background(), hangBound)
		procs := h.start(t, ctx, 4, append(args, "--transport", tr)...).wait(t)
		cancel()
		got := succeeded(t, procs)
		if !strings.Contains(got, "on 2 host(s)") {
			t.Errorf("%s: rank 0 printed:\n%s", tr, got)
		}
		sameTable(t, got, single)
	}
}

// TestAllToAllVKilledRank kills rank 2 of 4 in the middle of an
// alltoallv_port run over the fabric: every other rank stops with an
// error naming rank 2, none crashes.
func TestAllToAllVKilledRank(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	dir := t.TempDir()
	p := evalPlan(t, dir, "alltoallv_port", "world_size=4", "ranks_per_node=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	extra := func(r int) []string {
		return []string{fmt.Sprintf("MSCCLGO_HOST=fabG%d", r/2), fmt.Sprintf("LOCAL_RANK=%d", r%2), "LOCAL_WORLD_SIZE=2", "FI_PROVIDER=tcp", "MSCCLGO_JOB_TOKEN=alltoallv-test-job"}
	}
	rs := startRanks(t, ctx, 4, extra, nil, "run", p, "--counts", "moe", "-n", "1000000", "--transport", "fabric", "--timeout", "5s")
	// Rank 0 prints its header just before the rank sessions open.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(rs.outs[0].String(), "# time: ") {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 never started:\n%s", rs.errs[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	rs.killNamed(t, 2)
}
