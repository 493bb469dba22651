package multiproc

// netns_test.go: two hosts on one machine. Two network namespaces joined
// by a veth pair, each with its own address; half the ranks run in each
// (ip netns exec), so rank 0's rendezvous, the bootstrap links and the
// port-channel transport cross a real network link. Needs root and
// iproute2; skipped with a message where namespaces are refused.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// twoHosts is a pair of namespaces and their addresses.
type twoHosts struct {
	ns   [2]string
	addr [2]string
	dev  [2]string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newTwoHosts makes the namespaces or skips the test.
func newTwoHosts(t *testing.T) *twoHosts { t.Helper(); return newTwoHostsNamed(t, "msgo") }

// newTwoHostsNamed makes the namespaces, their names and devices
// starting with prefix, or skips the test.
func newTwoHostsNamed(t *testing.T, prefix string) *twoHosts {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not found: the two-namespace tests are skipped")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: the two-namespace tests are skipped")
	}
	id := os.Getpid() % 100000
	h := &twoHosts{
		ns:   [2]string{fmt.Sprintf("%s%d-a", prefix, id), fmt.Sprintf("%s%d-b", prefix, id)},
		dev:  [2]string{fmt.Sprintf("%s%da", prefix, id), fmt.Sprintf("%s%db", prefix, id)},
		addr: [2]string{fmt.Sprintf("10.%d.%d.1", 200+id%50, id%250), fmt.Sprintf("10.%d.%d.2", 200+id%50, id%250)},
	}
	if err := ipCmd("netns", "add", h.ns[0]); err != nil {
		t.Skipf("network namespaces refused here (%v): the two-namespace tests are skipped", err)
	}
	t.Cleanup(func() {
		_ = ipCmd("netns", "del", h.ns[0])
		_ = ipCmd("netns", "del", h.ns[1])
	})
	steps := [][]string{
		{"netns", "add", h.ns[1]},
		{"link", "add", h.dev[0], "type", "veth", "peer", "name", h.dev[1]},
		{"link", "set", h.dev[0], "netns", h.ns[0]},
		{"link", "set", h.dev[1], "netns", h.ns[1]},
	}
	for i := range 2 {
		steps = append(steps,
			[]string{"-n", h.ns[i], "addr", "add", h.addr[i] + "/24", "dev", h.dev[i]},
			[]string{"-n", h.ns[i], "link", "set", h.dev[i], "up"},
			[]string{"-n", h.ns[i], "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			t.Skipf("setting up two namespaces failed (%v): the two-namespace tests are skipped", err)
		}
	}
	return h
}

// start runs n ranks, the first half in namespace 0 (with rank 0) and the
// rest in namespace 1, as torchrun would on two hosts.
func (h *twoHosts) start(t *testing.T, ctx context.Context, n int, args ...string) *rankSet {
	t.Helper()
	rs := &rankSet{}
	for r := range n {
		side := 0
		if r >= n/2 {
			side = 1
		}
		env := []string{fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", n), fmt.Sprintf("LOCAL_RANK=%d", r%(n/2)),
			fmt.Sprintf("LOCAL_WORLD_SIZE=%d", n/2), "MASTER_ADDR=" + h.addr[0], "MASTER_PORT=29517",
			fmt.Sprintf("MSCCLGO_HOST=host%d", side), "MSCCLGO_JOB_TOKEN=netns-test-job"} // hosts share a secret as a job across hosts must
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns[side], os.Args[0]}, args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(baseEnv(), env...)
		cmd.WaitDelay = 10 * time.Second
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		rs.cmds, rs.outs, rs.errs = append(rs.cmds, cmd), append(rs.outs, &o), append(rs.errs, &e)
	}
	return rs
}

// TestTwoNamespaces runs the 2x4 hierarchical allreduces with ranks 0-3
// in one namespace and 4-7 in the other: port channels cross the veth
// link over TCP, memory channels stay inside each namespace.
func TestTwoNamespaces(t *testing.T) {
	h := newTwoHosts(t)
	dir := t.TempDir()
	for _, algo := range []string{"allreduce_hier", "allreduce_hier_packet", "allgather_hier"} {
		t.Run(algo, func(t *testing.T) {
			p := evalPlan(t, dir, algo, "world_size=8", "ranks_per_node=4")
			size := "4M"
			if strings.HasSuffix(algo, "packet") {
				size = "64K"
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangBound)
			defer cancel()
			procs := h.start(t, ctx, 8, "run", p, "-d", "float", "--size", size, "-n", "2", "--timeout", "20s").wait(t)
			for r, pr := range procs {
				if pr.code != 0 {
					t.Fatalf("rank %d: exit %d\n%s", r, pr.code, pr.stderr)
				}
			}
			out := procs[0].stdout
			rows := tableRows(out)
			if len(rows) != 1 || rows[0][len(rows[0])-1] != "0" || !strings.Contains(out, "on 2 host(s)") {
				t.Errorf("rank 0 printed:\n%s", out)
			}
		})
	}
}

// TestNamespaceLinkDown takes the link between the namespaces down in the
// middle of a run: every rank stops within the peer timeout with an
// error naming a lost rank.
func TestNamespaceLinkDown(t *testing.T) {
	linkDownRun(t, newTwoHosts(t))
}

// linkDownRun runs the hier allreduce on h's two hosts (with extra
// arguments to run), takes the second host's link down mid-run, and
// wants every rank to stop with an error naming a lost rank, without a
// crash.
func linkDownRun(t *testing.T, h *twoHosts, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	p := evalPlan(t, dir, "allreduce_hier", "world_size=4", "ranks_per_node=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	args := append([]string{"run", p, "-d", "float", "--size", "4M", "-n", "1000000", "--peer-timeout", "3s", "--timeout", "2s"}, extra...)
	rs := h.start(t, ctx, 4, args...)
	rs.waitLaunching(t)
	if err := ipCmd("-n", h.ns[1], "link", "set", h.dev[1], "down"); err != nil {
		t.Fatal(err)
	}
	for r, pr := range rs.wait(t) {
		t.Logf("rank %d: exit %d: %s", r, pr.code, strings.TrimSpace(pr.stderr))
		if pr.code == 0 || !strings.Contains(pr.stderr, "rank") || !strings.Contains(pr.stderr, "lost") {
			t.Errorf("rank %d: exit %d, want an error naming a lost rank:\n%s", r, pr.code, pr.stderr)
		}
		if strings.Contains(pr.stderr, "goroutine ") {
			t.Errorf("rank %d crashed:\n%s", r, pr.stderr)
		}
	}
}
