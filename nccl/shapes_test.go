package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// shapes_test.go: every call shape on host memory (testdata/shapes.c):
// odd counts padded into the plans' layouts, world sizes and types no
// plan serves on the built-in path, every reduction (AVG and PREMUL_SUM
// against NCCL's definitions), ranks as threads, in groups of one thread
// (ncclCommInitAll, nccl-tests' -g) and as processes, through NCCL's API
// and the custom communicator.

var (
	shapesOnce sync.Once
	shapesErr  error
)

// shapesBinary builds testdata/shapes.c against the library of
// artifacts and returns its path.
func shapesBinary(t *testing.T) string {
	t.Helper()
	dir := artifacts(t)
	bin := filepath.Join(dir, "shapes")
	shapesOnce.Do(func() {
		out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DMSCCLGO_NCCL_NO_CUDA_RUNTIME", "-Iinclude",
			"-o", bin, "testdata/shapes.c", "-L"+filepath.Join(dir, "ours"), "-l:libnccl.so.2",
			"-Wl,-rpath,"+filepath.Join(dir, "ours"), "-lpthread", "-lm", "-ldl").CombinedOutput()
		if err != nil || len(out) > 0 {
			shapesErr = fmt.Errorf("building shapes: %v\n%s", err, out)
		}
	})
	if shapesErr != nil {
		t.Fatal(shapesErr)
	}
	return bin
}

// shapesPlans are plans of the default set's shapes for 2 and 4 ranks.
func shapesPlans(t *testing.T) string {
	t.Helper()
	plans := map[string]planDef{}
	for _, n := range []string{"2", "4"} {
		plans["allreduce_in_"+n+".json"] = planDef{"allreduce_packet", map[string]string{"world_size": n}}
		plans["allreduce_out_"+n+".json"] = planDef{"allreduce_packet", map[string]string{"world_size": n, "inplace": "false"}}
		plans["allgather_in_"+n+".json"] = planDef{"allgather", map[string]string{"world_size": n}}
		plans["allgather_out_"+n+".json"] = planDef{"allgather", map[string]string{"world_size": n, "inplace": "false"}}
		plans["reducescatter_in_"+n+".json"] = planDef{"reducescatter", map[string]string{"world_size": n}}
		plans["reducescatter_out_"+n+".json"] = planDef{"reducescatter", map[string]string{"world_size": n, "inplace": "false"}}
	}
	return bundledPlans(t, plans)
}

// shapesRun is one run of shapes (or one per rank for the process
// modes), with its INFO logs.
type shapesRun struct {
	stdout, stderr string
}

func runShapes(t *testing.T, env []string, mode string, n int, dtypes, ops, counts string) []shapesRun {
	t.Helper()
	return runShapesWant(t, true, env, mode, n, dtypes, ops, counts)
}

// runShapesWant is runShapes for a run whose cases are to succeed (ok)
// or to fail.
func runShapesWant(t *testing.T, ok bool, env []string, mode string, n int, dtypes, ops, counts string) []shapesRun {
	t.Helper()
	bin := shapesBinary(t)
	procs := strings.HasSuffix(mode, "procs")
	ranks := 1
	if procs {
		ranks = n
	}
	idFile := filepath.Join(t.TempDir(), "id")
	runs := make([]shapesRun, ranks)
	var wg sync.WaitGroup
	for rank := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, mode, fmt.Sprint(n), dtypes, ops, counts)
			cmd.Env = append(cleanEnv(), "MSCCLGO_NCCL_DEBUG=INFO", "MSCCLGO_NCCL_TIMEOUT=60s", "MSCCLGO_CACHE_DIR="+t.TempDir(),
				"MSCCLGO_NCCL_FALLBACK=none", "SHAPES_ID_FILE="+idFile)
			if procs {
				cmd.Env = append(cmd.Env, fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", n))
			}
			cmd.Env = append(cmd.Env, env...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			runs[rank] = shapesRun{stdout: stdout.String(), stderr: stderr.String()}
			if (err != nil) == ok {
				t.Errorf("shapes %s %d %s %s %s (rank %d): %v\nstdout:\n%s\nstderr (tail):\n%s", mode, n, dtypes, ops, counts, rank, err,
					stdout.String(), shapesTail(stderr.String(), 3000))
			}
		}()
	}
	wg.Wait()
	return runs
}

func shapesTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// checkShapes checks that every rank of runs ran want cases, none wrong.
func checkShapes(t *testing.T, runs []shapesRun, n, want int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^rank (\d+): (\d+) cases, (\d+) wrong$`)
	seen := 0
	for _, r := range runs {
		for _, m := range re.FindAllStringSubmatch(r.stdout, -1) {
			seen++
			if m[2] != fmt.Sprint(want) || m[3] != "0" {
				t.Errorf("rank %s: %s cases, %s wrong; want %d cases, 0 wrong", m[1], m[2], m[3], want)
			}
		}
	}
	if seen != n {
		t.Errorf("%d ranks reported, want %d", seen, n)
	}
}

// shapeCases is the number of cases shapes runs per rank.
func shapeCases(dtypes, ops, counts string) int {
	return len(strings.Split(counts, ",")) * len(strings.Split(dtypes, ",")) * (1 + 2*len(strings.Split(ops, ",")))
}

const (
	oddCounts   = "0,1,3,17,1000,12345,262151"
	smallCounts = "0,1,3,17,1000"
	planTypes   = "f16,bf16,f32,i32"
	allTypes    = "i8,u8,i32,u32,i64,u64,f16,f32,f64,bf16"
	ncclOps     = "sum,prod,max,min,avg"
)

func logsOf(runs []shapesRun) string {
	var b strings.Builder
	for _, r := range runs {
		b.WriteString(r.stderr)
	}
	return b.String()
}

// TestShapesHost runs every call shape on host memory through NCCL's
// API: ranks as threads in one thread's groups (ncclCommInitAll, every
// call of a case in one group) and one thread per rank, and ranks as
// processes; 2 and 4 ranks on plans (odd counts padded), 3 ranks on the
// built-in path, and the types plans do not compute on the built-in path.
func TestShapesHost(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	plans := shapesPlans(t)
	env := []string{"MSCCLGO_NCCL_HOSTMEM=1", "MSCCLGO_PLAN_PATH=" + plans}
	cases := []struct {
		mode                 string
		n                    int
		dtypes, ops, counts  string
		plan, padded, direct bool // the log must show a plan, a padded one, the built-in path
		env                  []string
	}{
		{"group", 2, planTypes, ncclOps, oddCounts, true, true, false, nil},
		{"threads", 4, planTypes, ncclOps, smallCounts, true, true, false, nil},
		{"group", 3, allTypes, ncclOps, smallCounts, false, false, true, nil},
		{"threads", 2, "i8,u8,u32,i64,u64,f64", ncclOps, "1,17,1000", false, false, true, nil},
		{"procs", 2, planTypes, ncclOps, oddCounts, true, true, false, nil},
		{"procs", 3, allTypes, ncclOps, smallCounts, false, false, true, nil},
		{"procs", 4, "f32,bf16", ncclOps, "17,1000", true, true, false, nil},
		{"procs", 2, "f32,f64", "sum,avg", "3,17", true, true, true, []string{"SHAPES_GROUP=1"}},
		{"procs", 3, "f32", "sum,avg", "3,17", false, false, true, []string{"SHAPES_GROUP=1"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d %s %s %v", c.mode, c.n, c.dtypes, c.counts, c.env), func(t *testing.T) {
			runs := runShapes(t, append(slices.Clone(env), c.env...), c.mode, c.n, c.dtypes, c.ops, c.counts)
			checkShapes(t, runs, c.n, shapeCases(c.dtypes, c.ops, c.counts))
			logs := logsOf(runs)
			if len(c.env) > 0 && !strings.Contains(logs, "at the end of its group") {
				t.Errorf("no call ran at the end of its group")
			}
			for _, w := range []struct {
				want bool
				text string
			}{{c.plan, "on host memory (CPU backend)"}, {c.padded, "padded from"}, {c.direct, "the built-in path on host memory"}} {
				if w.want && !strings.Contains(logs, w.text) {
					t.Errorf("the INFO log lacks %q", w.text)
				}
			}
			if strings.Contains(logs, "refused") || strings.Contains(logs, "fallback:") {
				t.Errorf("a call was refused or forwarded:\n%s", shapesTail(shapesLines(logs, "refused", "fallback:"), 3000))
			}
		})
	}
}

// TestShapesCustom runs every call shape and every reduction, PREMUL_SUM
// with each rank's own scalar included, through mscclgoExecuteHostOp:
// ranks as threads and as processes, registered plans (2 ranks) and none
// (3 ranks: the built-in path); mscclgoSelect names the plan an odd
// count runs and "builtin" where none does. The parts rows make the
// allgathers through mscclgoExecuteHostGather, into a buffer per rank
// (in place: the rank's own part is its input): a hub's run and the
// built-in path gather into a buffer of the library's, a rank's
// multi-process session into the parts.
func TestShapesCustom(t *testing.T) {
	plans := shapesPlans(t)
	parts := []string{"SHAPES_PARTS=1"}
	cases := []struct {
		mode                string
		n                   int
		dtypes, ops, counts string
		sel                 []string
		env                 []string
	}{
		{"custom", 2, planTypes, ncclOps + ",premul", "0,1,3,17,1000,12345", []string{"select allreduce 17 float32 -> 0 allreduce_packet", "select allreduce 17 float64 -> 0 builtin"}, nil},
		{"custom", 3, "f16,f32,i32,f64,i64", ncclOps + ",premul", smallCounts, []string{"select allreduce 17 float32 -> 0 builtin"}, nil},
		{"customprocs", 2, planTypes + ",u8", ncclOps + ",premul", "0,3,17,1000", []string{"select allreduce 17 float32 -> 0 allreduce_packet"}, nil},
		{"custom", 2, planTypes, "sum", "0,1,3,17,1000,12345", nil, parts},
		{"custom", 3, "f32,i64", "sum", smallCounts, nil, parts},
		{"customprocs", 2, planTypes + ",u8", "sum", "0,3,17,1000,12345", nil, parts},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s %d %v", c.mode, c.n, c.env), func(t *testing.T) {
			runs := runShapes(t, append([]string{"SHAPES_PLANS=" + plans}, c.env...), c.mode, c.n, c.dtypes, c.ops, c.counts)
			checkShapes(t, runs, c.n, shapeCases(c.dtypes, c.ops, c.counts))
			for _, s := range c.sel {
				if !strings.Contains(runs[0].stdout, s) {
					t.Errorf("rank 0's output lacks %q:\n%s", s, runs[0].stdout)
				}
			}
		})
	}
}

// shapesLines are the lines of s holding any of words.
func shapesLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(l, w) }) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestShapesDevice runs odd counts on the emulated device (the
// mscclgo_emu build): each call runs its plan on the communicator's
// staging buffer, padded, asynchronously on the caller's stream, every
// reduction the plans compute; in one thread's groups and one thread per
// rank. A world size with no plan is refused without a fallback, saying
// why (the built-in path runs on host memory only).
func TestShapesDevice(t *testing.T) {
	plans := shapesPlans(t)
	emu := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_PLAN_PATH=" + plans}
	for _, c := range []struct {
		mode                string
		n                   int
		dtypes, ops, counts string
	}{
		{"group", 2, planTypes, "sum,prod,max,min", "0,1,3,17,1000,12345"},
		{"threads", 4, "f32,bf16", "sum,max", "3,17,1000"},
	} {
		t.Run(fmt.Sprintf("%s %d", c.mode, c.n), func(t *testing.T) {
			runs := runShapes(t, emu, c.mode, c.n, c.dtypes, c.ops, c.counts)
			checkShapes(t, runs, c.n, shapeCases(c.dtypes, c.ops, c.counts))
			logs := logsOf(runs)
			if !strings.Contains(logs, "on the staging buffer, padded from") || !strings.Contains(logs, "on gpu-emu, enqueued") {
				t.Errorf("the INFO log shows no padded run on the device:\n%s", shapesTail(logs, 3000))
			}
		})
	}
	t.Run("no plan for 3 ranks", func(t *testing.T) {
		runs := runShapesWant(t, false, emu, "group", 3, "f32", "sum", "17")
		for _, want := range []string{"no plan for allgather of 204 bytes on 3 ranks (3 per node), out-of-place: the plan set has allgather plans for 2 ranks (2 per node), 4 ranks (4 per node) only",
			"the built-in path (no plan) runs on host memory only, not on a device"} {
			if !strings.Contains(runs[0].stdout, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, runs[0].stdout)
			}
		}
	})
}
