package multiproc

// run_test.go: correct runs of one process per rank, under mpirun and by
// hand with torchrun's variables, on one and two logical hosts.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// mpiCase is one plan run under mpirun.
type mpiCase struct {
	name    string
	plan    func(t *testing.T, dir string) string
	ranks   int
	perHost int // ranks per logical host (MSCCLGO_HOST); 0: one host
	sizes   []string
}

func mpiCases() []mpiCase {
	bundled := func(algo string, defs ...string) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string { return evalPlan(t, dir, algo, defs...) }
	}
	port := func(rel string) func(t *testing.T, dir string) string {
		return func(t *testing.T, _ string) string { return plan(t, rel) }
	}
	return []mpiCase{
		{name: "2 ranks LL memory", plan: bundled("allreduce_packet", "world_size=2"), ranks: 2, sizes: []string{"-b", "1K", "-e", "64K", "-f", "8"}},
		{name: "4 ranks Simple memory", plan: bundled("allgather", "world_size=4"), ranks: 4, sizes: []string{"-b", "4K", "-e", "1M", "-f", "16"}},
		{name: "4 ranks NVLS", plan: bundled("allreduce_nvls", "world_size=4"), ranks: 4, sizes: []string{"-b", "2M", "-e", "8M", "-f", "4"}},
		{name: "8 ranks NVLS reference", plan: port("single_node/allreduce_nvls_zero_copy.plan.json"), ranks: 8, sizes: []string{"--size", "256K"}},
		{name: "8 ranks LL packets reference", plan: port("single_node/allgather_pkt.plan.json"), ranks: 8, sizes: []string{"--size", "64K"}},
		{name: "2 ranks port reference", plan: port("unit_tests/put/put_with_signal_and_flush_test.plan.json"), ranks: 2, perHost: 1, sizes: []string{"--size", "64K"}},
		{name: "2x4 hierarchical, port channels between hosts", plan: bundled("allreduce_hier", "world_size=8", "ranks_per_node=4"), ranks: 8, perHost: 4, sizes: []string{"--size", "4M"}},
		{name: "2x4 hierarchical LL", plan: bundled("allreduce_hier_packet", "world_size=8", "ranks_per_node=4"), ranks: 8, perHost: 4, sizes: []string{"--size", "64K"}},
		{name: "2x2 alltoallv port", plan: bundled("alltoallv_port", "world_size=4", "ranks_per_node=2"), ranks: 4, perHost: 2, sizes: []string{"--counts", "moe"}},
	}
}

// TestMpirun runs plans of 2, 4 and 8 ranks (memory, port and switch
// channels, LL and Simple) under a real mpirun, one process per rank, and
// checks that every size is correct on every rank and that the table
// lists the same sizes as the single-process run.
func TestMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian's openmpi-bin; .ci/run installs it): the runs under mpirun are skipped")
	}
	for _, tc := range mpiCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := tc.plan(t, dir)
			args := append([]string{"run", p, "-d", "float", "-n", "2", "--timeout", "20s"}, tc.sizes...)
			sout := singleProcess(t, dir, args)
			ctx, cancel := context.WithTimeout(context.Background(), hangBound)
			defer cancel()
			mpiArgs := []string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(tc.ranks), "-x", mainEnv + "=1"}
			if tc.perHost > 0 {
				// Two logical hosts: shared memory inside each, the TCP
				// port transport between them.
				mpiArgs = append(mpiArgs, "sh", "-c", fmt.Sprintf(`MSCCLGO_HOST=node$((OMPI_COMM_WORLD_RANK / %d)) exec "$0" "$@"`, tc.perHost), os.Args[0])
			} else {
				mpiArgs = append(mpiArgs, os.Args[0])
			}
			cmd := exec.CommandContext(ctx, mpirun, append(mpiArgs, args...)...)
			cmd.Dir = dir
			cmd.Env = baseEnv()
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("mpirun still running after %v", hangBound)
			}
			if err != nil {
				t.Fatalf("mpirun: %v\n%s", err, out)
			}
			sameTable(t, string(out), sout)
			if hosts := fmt.Sprintf("on %d host(s)", tc.ranks/max(tc.perHost, 1)); tc.perHost > 0 && !strings.Contains(string(out), hosts) {
				t.Errorf("want %q in the header:\n%s", hosts, out)
			}
		})
	}
}

// TestTorchrunVariables starts the ranks by hand with torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and
// no MPI; only rank 0 prints the table.
func TestTorchrunVariables(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allreduce_packet", "world_size=4")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	rs := startRanks(t, ctx, 4, nil, nil, "run", p, "-d", "float", "-b", "1K", "-e", "16K", "-f", "4", "-n", "3")
	procs := rs.wait(t)
	for r, pr := range procs {
		if pr.code != 0 {
			t.Fatalf("rank %d: exit %d\n%s", r, pr.code, pr.stderr)
		}
		if rows := tableRows(pr.stdout); r == 0 && len(rows) != 3 || r > 0 && pr.stdout != "" {
			t.Errorf("rank %d printed:\n%s", r, pr.stdout)
		}
	}
	if !strings.Contains(procs[0].stdout, "4 processes (torchrun)") {
		t.Errorf("rank 0's header does not name torchrun:\n%s", procs[0].stdout)
	}
	for _, row := range tableRows(procs[0].stdout) {
		if row[len(row)-1] != "0" {
			t.Errorf("wrong elements: %v", row)
		}
	}
}

// TestLateRank: a rank that starts late joins within the join timeout.
func TestLateRank(t *testing.T) {
	dir := t.TempDir()
	p := evalPlan(t, dir, "allgather", "world_size=2")
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	late := func(r int) time.Duration {
		if r == 1 {
			return 1500 * time.Millisecond
		}
		return 0
	}
	procs := startRanks(t, ctx, 2, nil, late, "run", p, "-d", "float", "--size", "64K", "-n", "2").wait(t)
	for r, pr := range procs {
		if pr.code != 0 {
			t.Errorf("rank %d: exit %d\n%s", r, pr.code, pr.stderr)
		}
	}
}
