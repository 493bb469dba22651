package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// netnsK runs ip with args, naming the command in its error.
func netnsK(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// twoNamespaces makes two network namespaces joined by a veth pair, each
// with an address of its own, and returns their names and addresses; it
// skips the test where that is refused (no root, no iproute2). The names
// carry "K" and the process id, so that concurrent runs do not collide.
func twoNamespaces(t *testing.T) (ns, addr [2]string) {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not found: the two-namespace test is skipped")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: the two-namespace test is skipped")
	}
	id := os.Getpid() % 100000
	ns = [2]string{fmt.Sprintf("ncclK%d-a", id), fmt.Sprintf("ncclK%d-b", id)}
	dev := [2]string{fmt.Sprintf("ncK%da", id), fmt.Sprintf("ncK%db", id)}
	addr = [2]string{fmt.Sprintf("10.%d.%d.1", 150+id%50, id%250), fmt.Sprintf("10.%d.%d.2", 150+id%50, id%250)}
	if err := netnsK("netns", "add", ns[0]); err != nil {
		t.Skipf("network namespaces refused here (%v): the two-namespace test is skipped", err)
	}
	t.Cleanup(func() {
		_ = netnsK("netns", "del", ns[0])
		_ = netnsK("netns", "del", ns[1])
	})
	steps := [][]string{
		{"netns", "add", ns[1]},
		{"link", "add", dev[0], "type", "veth", "peer", "name", dev[1]},
		{"link", "set", dev[0], "netns", ns[0]},
		{"link", "set", dev[1], "netns", ns[1]},
	}
	for i := range 2 {
		steps = append(steps,
			[]string{"-n", ns[i], "addr", "add", addr[i] + "/24", "dev", dev[i]},
			[]string{"-n", ns[i], "link", "set", dev[i], "up"},
			[]string{"-n", ns[i], "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := netnsK(s...); err != nil {
			t.Skipf("setting up two namespaces failed (%v): the two-namespace test is skipped", err)
		}
	}
	return ns, addr
}

// TestHostsNamespaces: the steady and buffer-switching cases of
// TestHostsLibrary with the two hosts in two network namespaces joined
// by a veth pair: ranks 0 and 1 in one, 2 and 3 in the other, each
// host's bootstrap on its own address (rank 0's in the unique id), so
// the bootstrap and the port traffic between the hosts cross a real
// network link. The namespaces share the machine's host name, so
// MSCCLGO_HOST is what tells the library they are two hosts.
func TestHostsNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: library runs")
	}
	ns, addr := twoNamespaces(t)
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none",
		"MSCCLGO_PLAN_PATH=" + hostsPlans(t), "NCCLCHECK_DEVICE=emu", "MSCCLGO_TRANSPORT=tcp"}
	for _, c := range []struct {
		hcase string
		count int
		plan  string
	}{
		{"steady", 1024, "allreduce_hier_packet_2x2gpu"},
		{"switch", 32768, "allreduce_hier_2x2gpu"},
	} {
		t.Run(c.hcase+"/"+c.plan, func(t *testing.T) {
			runs := runHostsWith(t, append(env, fmt.Sprintf("NCCLCHECK_COUNT=%d", c.count)), c.hcase, 0, func(side int) ([]string, []string) {
				return []string{"ip", "netns", "exec", ns[side]},
					[]string{fmt.Sprintf("MSCCLGO_HOST=hostK%d", side), "MSCCLGO_NCCL_BOOTSTRAP_HOST=" + addr[side]}
			})
			for rank, r := range runs {
				checkHostsData(t, rank, r, 9)
				want := fmt.Sprintf("rank %d of 4: ncclAllReduce count %d ncclFloat32 ncclSum (in-place, %d bytes): plan %s on gpu-emu, enqueued", rank, c.count, 4*c.count, c.plan)
				if !strings.Contains(r.stderr, want) {
					t.Errorf("rank %d: log lacks %q:\n%s", rank, want, r.stderr)
				}
			}
		})
	}
}
