// This file holds the real multi-process tests: the test binary runs
// itself as 4 child processes (TestMain switches on
// MSCCLGO_DIST_TEST_CHILD), which find each other through FromEnv and a
// rendezvous directory, as under mpirun; one child is killed with SIGKILL
// in the second test.

package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv selects the child scenario of TestMain.
const childEnv = "MSCCLGO_DIST_TEST_CHILD"

// Child exit codes.
const (
	exitOK       = 0
	exitFailed   = 2 // an unexpected error (on standard error)
	exitLostPeer = 3 // the expected loss error (on standard error)
)

// killVictim is the rank the kill scenario's parent kills.
const killVictim = 2

func TestMain(m *testing.M) {
	if scenario := os.Getenv(childEnv); scenario != "" {
		os.Exit(childMain(scenario))
	}
	os.Exit(m.Run())
}

// childMain is one rank of a multi-process test.
func childMain(scenario string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	w, ok, err := FromEnv(os.Getenv)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(errors.New("FromEnv: no launcher variables"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	b, err := Connect(ctx, w, Options{Timeout: 30 * time.Second})
	if err != nil {
		return fail(err)
	}
	parts, err := b.AllGather(ctx, []byte(fmt.Sprintf("rank %d pid %d", w.Rank, os.Getpid())))
	if err != nil {
		return fail(err)
	}
	for r, p := range parts {
		if !strings.HasPrefix(string(p), fmt.Sprintf("rank %d pid ", r)) {
			return fail(fmt.Errorf("allgather part %d: %q", r, p))
		}
	}
	if err := b.Barrier(ctx); err != nil {
		return fail(err)
	}
	switch scenario {
	case "allgather":
		fmt.Printf("rank %d: %s\n", w.Rank, bytes.Join(parts, []byte("; ")))
		if err := b.Barrier(ctx); err != nil {
			return fail(err)
		}
		b.Close()
		return exitOK
	case "kill":
		fmt.Println("ready")
		if w.Rank == killVictim {
			time.Sleep(hang) // until killed
			return fail(errors.New("the victim was not killed"))
		}
		err := b.Barrier(ctx)
		b.Close()
		var pl *PeerLostError
		if !errors.As(err, &pl) || pl.Rank != killVictim {
			return fail(fmt.Errorf("want rank %d lost, got %v", killVictim, err))
		}
		fmt.Fprintln(os.Stderr, err)
		return exitLostPeer
	}
	return fail(fmt.Errorf("unknown scenario %q", scenario))
}

// child is one running child process.
type child struct {
	rank   int
	cmd    *exec.Cmd
	lines  chan string // its standard output, line by line
	stderr bytes.Buffer
	done   chan error // its exit
}

// startChildren starts n children of scenario.
func startChildren(t *testing.T, n int, scenario string) []*child {
	t.Helper()
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs processes and SIGKILL")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable:", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "MSCCLGO_") && k != "MASTER_ADDR" && k != "MASTER_PORT" {
			env = append(env, kv)
		}
	}
	dir := t.TempDir()
	children := make([]*child, n)
	for r := range n {
		c := &child{rank: r, lines: make(chan string, 16), done: make(chan error, 1)}
		c.cmd = exec.Command(exe, "-test.run=^$")
		c.cmd.Env = append(env, childEnv+"="+scenario,
			EnvRank+"="+strconv.Itoa(r), EnvWorldSize+"="+strconv.Itoa(n),
			EnvLocalRank+"="+strconv.Itoa(r), EnvLocalSize+"="+strconv.Itoa(n),
			EnvRendezvousDir+"="+dir, EnvJobID+"=bootstrap-test")
		c.cmd.Stderr = &c.stderr
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			s := bufio.NewScanner(out)
			for s.Scan() {
				c.lines <- s.Text()
			}
			close(c.lines)
			c.done <- c.cmd.Wait()
		}()
		children[r] = c
	}
	t.Cleanup(func() {
		for _, c := range children {
			c.cmd.Process.Kill()
		}
	})
	return children
}

// waitExit waits for a child's exit, failing the test after hang.
func waitExit(t *testing.T, c *child) error {
	t.Helper()
	for range c.lines {
	}
	select {
	case err := <-c.done:
		return err
	case <-time.After(hang):
		t.Fatalf("rank %d did not exit; stderr:\n%s", c.rank, c.stderr.String())
		return nil
	}
}

func TestMultiProcess(t *testing.T) {
	const n = 4
	children := startChildren(t, n, "allgather")
	outputs := make([]string, n)
	var collectors sync.WaitGroup
	for _, c := range children {
		collectors.Add(1)
		go func() {
			defer collectors.Done()
			var lines []string
			for l := range c.lines {
				lines = append(lines, l)
			}
			outputs[c.rank] = strings.Join(lines, "\n")
		}()
	}
	for _, c := range children {
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("rank %d: %v; stderr:\n%s", c.rank, err, c.stderr.String())
			}
		case <-time.After(hang):
			t.Fatalf("rank %d did not exit", c.rank)
		}
	}
	collectors.Wait()
	for r, out := range outputs {
		if !strings.HasPrefix(out, fmt.Sprintf("rank %d: rank 0 pid ", r)) || !strings.Contains(out, "; rank 3 pid ") {
			t.Errorf("rank %d printed %q", r, out)
		}
	}
}

func TestMultiProcessKill(t *testing.T) {
	const n = 4
	children := startChildren(t, n, "kill")
	for _, c := range children {
		select {
		case l, ok := <-c.lines:
			if !ok || l != "ready" {
				err := waitExit(t, c)
				t.Fatalf("rank %d: printed %q, exit %v; stderr:\n%s", c.rank, l, err, c.stderr.String())
			}
		case <-time.After(hang):
			t.Fatalf("rank %d not ready", c.rank)
		}
	}
	// Every rank is past the first barrier (collective #2); the
	// survivors are in the second one (#3). Kill the victim.
	if err := children[killVictim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		err := waitExit(t, c)
		if c.rank == killVictim {
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitLostPeer {
			t.Errorf("rank %d: exit %v, want %d; stderr:\n%s", c.rank, err, exitLostPeer, c.stderr.String())
			continue
		}
		want := fmt.Sprintf("bootstrap: rank %d: barrier #3: rank %d lost: ", c.rank, killVictim)
		if got := c.stderr.String(); !strings.HasPrefix(got, want) {
			t.Errorf("rank %d: stderr %q, want %s...", c.rank, got, want)
		}
		t.Logf("rank %d: %s", c.rank, strings.TrimSpace(c.stderr.String()))
	}
}
