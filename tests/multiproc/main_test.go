// Package multiproc runs `mscclgo run` as one real process per rank:
// under a real mpirun, with torchrun's variables and no MPI, with ranks on
// two logical hosts (port channels over TCP between them) and, where the
// machine allows it, in two network namespaces with their own addresses;
// and with faults: a rank killed mid-run, a wrong world size, a rank that
// starts late, a deadlock across processes.
//
// The test binary doubles as the mscclgo binary: started with
// MSCCLGO_MULTIPROC_MAIN=1 it runs the command line instead of the tests.
package multiproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/internal/cli"
	"github.com/mscclgo/mscclgo/internal/testnote"
)

const mainEnv = "MSCCLGO_MULTIPROC_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(cli.Run(os.Args, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(testnote.Run(m, "tests/multiproc"))
}

// hangBound turns a hang into a failure; no case needs a fraction of it.
const hangBound = 3 * time.Minute

// proc is one finished rank process.
type proc struct {
	code           int
	stdout, stderr string
	cpu            time.Duration // user and system time of the process
}

// launcherless are the variables of a launcher that must not leak into a
// rank started by hand (the test itself may run under mpirun).
var launcherless = []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"MSCCLGO_RANK", "MSCCLGO_WORLD_SIZE", "MSCCLGO_LOCAL_RANK", "MSCCLGO_LOCAL_SIZE", "MSCCLGO_MASTER", "MSCCLGO_HOST"}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, l := range launcherless {
			if k == l {
				drop = true
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, mainEnv+"=1")
}

// rankCmd returns mscclgo with args as a process with the extra
// environment env, not started.
func rankCmd(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Args[0] = "mscclgo"
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// startRanks starts n ranks by hand with torchrun's variables (a free
// port for MASTER_PORT) plus extra(r); start(r) may delay or alter each.
type rankSet struct {
	cmds []*exec.Cmd
	outs []*bytes.Buffer
	errs []*bytes.Buffer
}

func startRanks(t testing.TB, ctx context.Context, n int, extra func(r int) []string, delay func(r int) time.Duration, args ...string) *rankSet {
	t.Helper()
	port := freePort(t)
	rs := &rankSet{}
	var mu sync.Mutex
	for r := range n {
		env := []string{fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", n), fmt.Sprintf("LOCAL_RANK=%d", r),
			fmt.Sprintf("LOCAL_WORLD_SIZE=%d", n), "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port)}
		if extra != nil {
			env = append(env, extra(r)...)
		}
		cmd := rankCmd(ctx, t.TempDir(), env, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		rs.cmds, rs.outs, rs.errs = append(rs.cmds, cmd), append(rs.outs, &o), append(rs.errs, &e)
		start := func() {
			mu.Lock()
			defer mu.Unlock()
			if err := cmd.Start(); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
		if delay != nil && delay(r) > 0 {
			time.AfterFunc(delay(r), start)
		} else {
			start()
		}
	}
	return rs
}

// wait waits for every rank and returns how each ended.
func (rs *rankSet) wait(t testing.TB) []proc {
	t.Helper()
	out := make([]proc, len(rs.cmds))
	deadline := time.Now().Add(hangBound)
	for r, cmd := range rs.cmds {
		for cmd.Process == nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		out[r] = proc{code: code, stdout: rs.outs[r].String(), stderr: rs.errs[r].String()}
		if ps := cmd.ProcessState; ps != nil {
			out[r].cpu = ps.UserTime() + ps.SystemTime()
		}
	}
	return out
}

// plansDir is the project's reference ports.
const plansDir = "../ports"

// plan returns the path of a port's plan.
func plan(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(plansDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// evalPlan compiles a bundled algorithm into dir with the test binary.
func evalPlan(t testing.TB, dir, algo string, defs ...string) string {
	t.Helper()
	out := filepath.Join(dir, algo+".json")
	args := []string{"eval", algo, "-o", out}
	for _, d := range defs {
		args = append(args, "-D", d)
	}
	cmd := rankCmd(context.Background(), dir, nil, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mscclgo %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// wrongColumn returns the #wrong values of a run table and its sizes.
func tableRows(stdout string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(stdout, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// singleProcess runs mscclgo with args (a run command line) in one
// process and returns its output.
func singleProcess(t *testing.T, dir string, args []string) string {
	t.Helper()
	out, err := rankCmd(context.Background(), dir, nil, append(args, "--one-process")...).CombinedOutput()
	if err != nil {
		t.Fatalf("single process: %v\n%s", err, out)
	}
	return string(out)
}

// sameTable checks that the table of a run of one process per rank lists
// the sizes of the single-process run, each with no wrong element ("-"
// for a plan without a result, as in the single-process run).
func sameTable(t *testing.T, got, single string) {
	t.Helper()
	g, w := tableRows(got), tableRows(single)
	if len(g) == 0 || len(g) != len(w) {
		t.Fatalf("the ranks printed %d sizes, the single-process run %d:\n%s\n--- single process:\n%s", len(g), len(w), got, single)
	}
	for i, row := range g {
		want := w[i][len(w[i])-1]
		if row[0] != w[i][0] || row[len(row)-1] != want || (want != "0" && want != "-") {
			t.Errorf("size row %d: %v, single process %v: want the same size and 0 wrong", i, row, w[i])
		}
	}
}

// waitLaunching waits (at most a minute) until rank 0 has started
// launching (its table header), and a little more, so that a fault
// injected next lands in the middle of the run.
func (rs *rankSet) waitLaunching(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(rs.outs[0].String(), "(elements)") {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 never started:\n%s", rs.errs[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
}

// killNamed kills rank k mid-run and checks that every other rank ends
// with an error naming it, and none crashed.
func (rs *rankSet) killNamed(t *testing.T, k int) {
	t.Helper()
	if err := rs.cmds[k].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("rank %d", k)
	for r, pr := range rs.wait(t) {
		if r == k {
			continue
		}
		t.Logf("rank %d: exit %d: %s", r, pr.code, strings.TrimSpace(pr.stderr))
		if pr.code == 0 || !strings.Contains(pr.stderr, name) {
			t.Errorf("rank %d: exit %d, want an error naming %s:\n%s", r, pr.code, name, pr.stderr)
		}
		if strings.Contains(pr.stderr, "goroutine ") {
			t.Errorf("rank %d crashed:\n%s", r, pr.stderr)
		}
	}
}
