package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeviceNoSocketPerCall: under strace, a steady-state allreduce of
// the emulated-device library (two ranks as threads, and as processes)
// makes no socket system calls per call: the difference between a run of
// 450 calls and one of 50, per extra call, is far below one (a few
// calls the background watches make with time are allowed), where the
// baseline (MSCCLGO_NCCL_MEET_EVERY_CALL=1: every call meets its peers
// over the bootstrap) makes several, which shows the count sees them.
func TestDeviceNoSocketPerCall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: strace runs of the library")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: the socket system calls per call are not counted")
	}
	dir := artifacts(t)
	bench := filepath.Join(t.TempDir(), "ncclbench")
	out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Iinclude", "-o", bench, "bench/ncclbench.c",
		"-L"+filepath.Join(dir, "emu"), "-l:libnccl.so.2", "-Wl,-rpath,"+filepath.Join(dir, "emu"), "-lpthread", "-ldl").CombinedOutput()
	if err != nil {
		t.Fatalf("building ncclbench: %v\n%s", err, out)
	}
	plans := bundledPlans(t, map[string]planDef{"allreduce_2.json": {"allreduce_packet", map[string]string{"world_size": "2"}}})
	env := append(cleanEnv(), "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH="+plans, "MSCCLGO_CACHE_DIR="+t.TempDir())
	count := func(t *testing.T, env []string, mode string, calls int) int {
		t.Helper()
		log := filepath.Join(t.TempDir(), "strace.txt")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// Go's network I/O is read and write on the socket's descriptor:
		// every I/O call is traced with its descriptor's kind (-yy), and
		// those on sockets are counted.
		cmd := exec.CommandContext(ctx, strace, "-f", "-yy", "-e", "trace=read,write,readv,writev,sendmsg,recvmsg,sendto,recvfrom",
			"-o", log, bench, mode, "2", "128", strconv.Itoa(calls))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "failed") {
			t.Fatalf("strace ncclbench %s 2 128 %d: %v\n%s", mode, calls, err, out)
		}
		text, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(string(text), "\n") {
			if strings.Contains(l, "resumed>") {
				continue
			}
			if strings.Contains(l, "<TCP") || strings.Contains(l, "<UNIX") || strings.Contains(l, "<socket:") {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		mode     string
		baseline bool
	}{{"threads", false}, {"procs", false}, {"threads", true}} {
		t.Run(fmt.Sprintf("%s/meet=%v", c.mode, c.baseline), func(t *testing.T) {
			e := env
			if c.baseline {
				e = append(append([]string{}, env...), "MSCCLGO_NCCL_MEET_EVERY_CALL=1")
			}
			few, many := count(t, e, c.mode, 50), count(t, e, c.mode, 450)
			// 20 warm-up calls in both runs; 400 more in the second.
			per := float64(many-few) / 400
			t.Logf("%s, meet every call %v: %d socket system calls for 70 calls, %d for 470: %.2f per call", c.mode, c.baseline, few, many, per)
			if c.baseline && per < 1 {
				t.Errorf("the baseline makes %.2f socket system calls per call: the count does not see the meeting", per)
			}
			if !c.baseline && per > 0.25 {
				t.Errorf("%.2f socket system calls per steady-state call, want none", per)
			}
		})
	}
}
