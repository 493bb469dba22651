package multiproc

// fabric_test.go: port channels between processes over libfabric
// (--transport fabric, package executor/fabric) instead of the
// bootstrap's TCP connections: the port-channel plans of the reference
// set and of the default set, run with each transport and compared; two
// network-namespace hosts over tcp;ofi_rxm; the GPU backend's proxy on the
// emulated device and on the fake driver (make test-fabric-cuda); and
// faults (a rank killed mid-run, the link between
// the namespaces taken down, an unreachable address), each a named error
// on every surviving rank. Skipped with a message where libfabric1 is
// missing. The full matrix runs with MSCCLGO_FABRIC_FULL=1 (make
// test-fabric); `go test` runs a representative part.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/executor/fabric"
)

// needFabric skips the test where libfabric or its tcp provider is
// missing.
func needFabric(t *testing.T, provider string) {
	t.Helper()
	if _, err := fabric.Available(provider); err != nil {
		t.Skipf("libfabric provider %s not available (Debian's libfabric1; .ci/run installs it): %v", provider, err)
	}
}

// fabricFull says whether to run the whole matrix.
func fabricFull() bool { return os.Getenv("MSCCLGO_FABRIC_FULL") == "1" }

// fabricCase is a plan run one process per rank, over two logical hosts.
type fabricCase struct {
	name    string
	plan    func(t *testing.T, dir string) string
	ranks   int
	perHost int
	args    []string
	backend string // "" : cpu
	short   bool   // part of the default run
}

func fabricCases() []fabricCase {
	bundled := func(algo string, defs ...string) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string { return evalPlan(t, dir, algo, defs...) }
	}
	port := func(rel string) func(t *testing.T, dir string) string {
		return func(t *testing.T, _ string) string { return plan(t, rel) }
	}
	exact := []string{"-d", "int32", "--integer-fill"}
	var cs []fabricCase
	for _, p := range []string{"put/put_with_signal_and_flush_test", "put/put_with_signal_test", "flush/flush_test", "flush/flush_fuse_test"} {
		cs = append(cs, fabricCase{name: "reference " + p, plan: port("unit_tests/" + p + ".plan.json"), ranks: 2, perHost: 1,
			args: []string{"-d", "float", "--size", "64K"}, short: p == "put/put_with_signal_and_flush_test"})
	}
	for _, algo := range []string{"allreduce_hier", "allreduce_hier_packet", "allgather_hier", "reducescatter_hier"} {
		size := "1M"
		switch algo {
		case "allreduce_hier_packet":
			size = "64K"
		case "allreduce_hier":
			size = "4M" // its smallest size is 2M+1
		}
		cs = append(cs, fabricCase{name: algo + " 2x2", plan: bundled(algo, "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2,
			args: append([]string{"--size", size}, exact...), short: algo == "allreduce_hier_packet" || algo == "reducescatter_hier"})
	}
	cs = append(cs,
		fabricCase{name: "gpu-emu reference put/put_with_signal_test", plan: port("unit_tests/put/put_with_signal_test.plan.json"), ranks: 2, perHost: 1,
			args: []string{"-d", "float", "--size", "64K"}, backend: "gpu-emu"},
		fabricCase{name: "gpu-emu allreduce_hier 2x2", plan: bundled("allreduce_hier", "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2,
			args: append([]string{"--size", "4M"}, exact...), backend: "gpu-emu", short: true},
		fabricCase{name: "gpu fake driver allreduce_hier 2x2", plan: bundled("allreduce_hier", "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2,
			args: append([]string{"--size", "4M", "--threads", "4"}, exact...), backend: "gpu"},
		fabricCase{name: "gpu fake driver allreduce_hier_packet 2x2", plan: bundled("allreduce_hier_packet", "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2,
			args: append([]string{"--size", "64K", "--threads", "4"}, exact...), backend: "gpu"},
		fabricCase{name: "gpu-emu allreduce_hier_packet 2x2", plan: bundled("allreduce_hier_packet", "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2,
			args: append([]string{"--size", "64K"}, exact...), backend: "gpu-emu"})
	return cs
}

// runHosts runs args as n ranks by hand, perHost to a logical host, with
// the extra environment env, and returns how each ended.
func runHosts(t *testing.T, n, perHost int, env []string, args ...string) []proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	extra := func(r int) []string {
		return append([]string{fmt.Sprintf("MSCCLGO_HOST=fabF%d", r/perHost), fmt.Sprintf("LOCAL_RANK=%d", r%perHost),
			fmt.Sprintf("LOCAL_WORLD_SIZE=%d", perHost), "MSCCLGO_JOB_TOKEN=fabric-test-job"}, env...) // a job across hosts shares a secret
	}
	return startRanks(t, ctx, n, extra, nil, args...).wait(t)
}

// succeeded checks that every rank exited 0 and returns rank 0's output.
func succeeded(t *testing.T, procs []proc) string {
	t.Helper()
	for r, pr := range procs {
		if pr.code != 0 {
			t.Fatalf("rank %d: exit %d\n%s", r, pr.code, pr.stderr)
		}
	}
	return procs[0].stdout
}

// TestFabricMatchesTCP runs each port-channel plan over the TCP wire and
// over libfabric's tcp provider (and, for the first, its shm provider):
// the same sizes, each with no wrong element. With int32 and the integer
// fill every output element is compared exactly with the reference, so
// equal results mean byte-identical outputs; the plans of the test
// collective (no defined result) must finish alike, without deadlock.
func TestFabricMatchesTCP(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	for _, tc := range fabricCases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.backend == "gpu" && os.Getenv("MSCCLGO_FAKE_KERNEL_LIB") == "" {
				t.Skip("the gpu backend on the fake driver: make test-fabric-cuda")
			}
			if !tc.short && !fabricFull() && tc.backend != "gpu" {
				t.Skip("part of the full matrix: MSCCLGO_FABRIC_FULL=1 (make test-fabric)")
			}
			dir := t.TempDir()
			p := tc.plan(t, dir)
			args := append([]string{"run", p, "-n", "2", "--timeout", "20s"}, tc.args...)
			if tc.backend != "" {
				args = append(args, "--backend", tc.backend)
			}
			tcp := succeeded(t, runHosts(t, tc.ranks, tc.perHost, nil, append(args, "--transport", "tcp")...))
			provs := []string{"tcp;ofi_rxm"}
			if tc.short && tc.ranks == 2 {
				provs = append(provs, "shm")
			}
			for _, prov := range provs {
				got := succeeded(t, runHosts(t, tc.ranks, tc.perHost, []string{"FI_PROVIDER=" + strings.Split(prov, ";")[0]}, append(args, "--transport", "fabric")...))
				if want := "port channels between processes: fabric, libfabric provider " + prov; !strings.Contains(got, want) {
					t.Errorf("%s: the header lacks %q:\n%s", prov, want, got)
				}
				sameTable(t, got, tcp)
			}
		})
	}
}

// TestFabricTwoNamespaces runs a hierarchical allreduce with one host per
// network namespace: libfabric's tcp provider crosses the veth link.
func TestFabricTwoNamespaces(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	h := newTwoHostsNamed(t, "msgoE")
	dir := t.TempDir()
	algos := []string{"allreduce_hier_packet"}
	if fabricFull() {
		algos = append(algos, "allreduce_hier", "allgather_hier", "reducescatter_hier")
	}
	for _, algo := range algos {
		t.Run(algo, func(t *testing.T) {
			p := evalPlan(t, dir, algo, "world_size=4", "ranks_per_node=2")
			size := map[string]string{"allreduce_hier_packet": "64K", "allreduce_hier": "4M"}[algo]
			if size == "" {
				size = "1M"
			}
			var outs []string
			for _, tr := range []string{"tcp", "fabric"} {
				ctx, cancel := context.WithTimeout(context.Background(), hangBound)
				procs := h.start(t, ctx, 4, "run", p, "-d", "int32", "--integer-fill", "--size", size, "-n", "2", "--timeout", "20s", "--transport", tr).wait(t)
				cancel()
				outs = append(outs, succeeded(t, procs))
			}
			if !strings.Contains(outs[1], "on 2 host(s)") || !strings.Contains(outs[1], "libfabric provider tcp;ofi_rxm") {
				t.Errorf("rank 0 printed:\n%s", outs[1])
			}
			sameTable(t, outs[1], outs[0])
		})
	}
}

// TestFabricKilledRank kills rank 2 of 4 mid-run over the fabric: every
// other rank stops with an error naming rank 2.
func TestFabricKilledRank(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	dir := t.TempDir()
	p := evalPlan(t, dir, "allreduce_hier", "world_size=4", "ranks_per_node=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	extra := func(r int) []string {
		return []string{fmt.Sprintf("MSCCLGO_HOST=fabF%d", r/2), fmt.Sprintf("LOCAL_RANK=%d", r%2), "LOCAL_WORLD_SIZE=2", "MSCCLGO_JOB_TOKEN=fabric-test-job"}
	}
	rs := startRanks(t, ctx, 4, extra, nil, "run", p, "-d", "float", "--size", "4M", "-n", "1000000", "--transport", "fabric", "--timeout", "5s")
	rs.waitLaunching(t)
	rs.killNamed(t, 2)
}

// TestFabricLinkDown takes the link between the namespaces down in the
// middle of a run over the fabric: every rank stops within the peer
// timeout with an error naming a lost rank.
func TestFabricLinkDown(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	linkDownRun(t, newTwoHostsNamed(t, "msgoE"), "--transport", "fabric")
}

// TestFabricUnreachable binds every rank's endpoint to the loopback
// interface (FI_TCP_IFACE=lo) in two namespaces: the ranks of the other
// namespace cannot reach those addresses, and every rank fails the
// fabric's set-up with an error that names the step and the ranks.
func TestFabricUnreachable(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	h := newTwoHostsNamed(t, "msgoE")
	dir := t.TempDir()
	p := evalPlan(t, dir, "allreduce_hier", "world_size=4", "ranks_per_node=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	t.Setenv("FI_TCP_IFACE", "lo")
	t.Setenv("FI_PROVIDER", "tcp")
	procs := h.start(t, ctx, 4, "run", p, "-d", "float", "--size", "4M", "-n", "1", "--transport", "fabric", "--join-timeout", "5s").wait(t)
	for r, pr := range procs {
		t.Logf("rank %d: exit %d: %s", r, pr.code, strings.TrimSpace(pr.stderr))
		if pr.code == 0 || !strings.Contains(pr.stderr, "fabric: reaching the peers failed") || !strings.Contains(pr.stderr, "rank ") ||
			!strings.Contains(pr.stderr, "no answer within 5s (an unreachable address?)") {
			t.Errorf("rank %d: exit %d, want the fabric's set-up error naming ranks and the bound:\n%s", r, pr.code, pr.stderr)
		}
	}
}

// TestFabricUnreachableAuto: the unreachable addresses of
// TestFabricUnreachable under --transport auto, with a join timeout (the
// bound of --transport fabric's hello) far beyond the test's deadline.
// The job gives the fabric up after --fabric-hello-timeout (default 5 s)
// and completes over tcp; every rank warns with the same transport and
// reason, and rank 0's header says the same.
func TestFabricUnreachableAuto(t *testing.T) {
	needFabric(t, "tcp;ofi_rxm")
	h := newTwoHostsNamed(t, "msgoM")
	dir := t.TempDir()
	p := evalPlan(t, dir, "allreduce_hier", "world_size=4", "ranks_per_node=2")
	// Well inside the join timeout below: a job that waits for it fails.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	t.Setenv("FI_TCP_IFACE", "lo")
	t.Setenv("FI_PROVIDER", "tcp")
	procs := h.start(t, ctx, 4, "run", p, "-d", "float", "--size", "4M", "-n", "1", "--transport", "auto", "--join-timeout", "10m").wait(t)
	if ctx.Err() != nil {
		t.Fatalf("the job outlived 100s: auto waited for the fabric's hello past --fabric-hello-timeout")
	}
	const said = "port channels between processes: "
	var want string
	for r, pr := range procs {
		t.Logf("rank %d: exit %d: %s", r, pr.code, strings.TrimSpace(pr.stderr))
		if pr.code != 0 {
			t.Errorf("rank %d: exit %d, want the job to complete over tcp:\n%s", r, pr.code, pr.stderr)
			continue
		}
		_, line, ok := strings.Cut(pr.stderr, said)
		line, _, _ = strings.Cut(line, "\n")
		if !ok || !strings.HasPrefix(line, "tcp (the bootstrap's connections; fabric refused: fabric: reaching the peers failed: rank ") ||
			!strings.Contains(line, "no answer within 5s (--fabric-hello-timeout)") {
			t.Errorf("rank %d: want a warning of the fallback to tcp naming the hello and its bound:\n%s", r, pr.stderr)
		}
		if r == 0 {
			want = line
			if !strings.Contains(pr.stdout, "# "+said+line+"\n") {
				t.Errorf("rank 0's header does not say %q:\n%s", line, pr.stdout)
			}
		} else if line != want {
			t.Errorf("rank %d says %q, rank 0 %q", r, line, want)
		}
	}
}

// TestFabricSelection: --transport auto, the default, takes the fabric
// where libfabric loads, and falls back to tcp, and says why, where it
// does not load (MSCCLGO_LIBFABRIC names a missing
// library); --transport fabric refuses there, on every rank, naming the
// library; MSCCLGO_TRANSPORT chooses as the flag does; an unknown
// transport is a usage error.
func TestFabricSelection(t *testing.T) {
	dir := t.TempDir()
	p := plan(t, "unit_tests/put/put_with_signal_and_flush_test.plan.json")
	args := []string{"run", p, "-d", "float", "--size", "64K", "-n", "1"}
	missing := "MSCCLGO_LIBFABRIC=" + dir + "/libfabric-missing.so.1"

	// auto, named or the default, falls back quietly where libfabric
	// does not load, and takes the fabric where it does.
	for _, a := range [][]string{append(args, "--transport", "auto"), args} {
		out := succeeded(t, runHosts(t, 2, 1, []string{missing}, a...))
		if !strings.Contains(out, "port channels between processes: tcp (the bootstrap's connections; fabric refused:") ||
			!strings.Contains(out, "libfabric-missing.so.1 not loaded") {
			t.Errorf("%v without libfabric: rank 0 printed:\n%s", a, out)
		}
	}
	if _, err := fabric.Available("tcp;ofi_rxm"); err == nil {
		out := succeeded(t, runHosts(t, 2, 1, []string{"FI_PROVIDER=tcp"}, args...))
		if !strings.Contains(out, "port channels between processes: fabric, libfabric provider tcp;ofi_rxm") {
			t.Errorf("the default transport with libfabric: rank 0 printed:\n%s", out)
		}
	}
	for _, env := range [][]string{{missing, "MSCCLGO_TRANSPORT=fabric"}, {missing}} {
		a := args
		if len(env) == 1 {
			a = append(a, "--transport", "fabric")
		}
		for r, pr := range runHosts(t, 2, 1, env, a...) {
			if pr.code == 0 || !strings.Contains(pr.stderr, "fabric: opening the endpoint failed: rank 0: ") ||
				!strings.Contains(pr.stderr, "libfabric-missing.so.1 not loaded") {
				t.Errorf("%v: rank %d: exit %d, want the library named:\n%s", env, r, pr.code, pr.stderr)
			}
		}
	}
	for r, pr := range runHosts(t, 2, 1, nil, append(args, "--transport", "rdma")...) {
		if pr.code != 2 || !strings.Contains(pr.stderr, `--transport "rdma": want tcp, fabric or auto`) {
			t.Errorf("rank %d: exit %d, want a usage error:\n%s", r, pr.code, pr.stderr)
		}
	}
}
