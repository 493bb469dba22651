//go:build cuda

package cuda

// check_test.go is `make gpu-check`: every plan it finds (the MSCCL++
// reference plans beside the checkout, the project's golden plans, the
// default plan set of package algorithms) run on the device, one plan at
// a time, in float32, float16 and bfloat16 with LL16 and LL8 packets, at
// the plan's own threads per block, against the CPU backend byte for
// byte; one line per plan, then a summary. It runs only when
// MSCCLGO_GPU_CHECK is set: "all", or a number N to run every Nth plan
// (the subset of CI on the fake driver, which runs 4 threads per block:
// each CUDA thread is a host thread there).

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/gputest"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// checkPlan is a plan found for the check and where it came from.
type checkPlan struct {
	name string
	plan *plan.Plan
	err  error // the plan could not be loaded or generated
}

func TestGPUCheck(t *testing.T) {
	mode := os.Getenv("MSCCLGO_GPU_CHECK")
	if mode == "" {
		t.Skip("set MSCCLGO_GPU_CHECK=all (or N: every Nth plan) to run the differential over every plan (make gpu-check)")
	}
	every := 1
	if mode != "all" {
		n, err := strconv.Atoi(mode)
		if err != nil || n < 1 {
			t.Fatalf("MSCCLGO_GPU_CHECK=%q: want all or a positive number", mode)
		}
		every = n
	}
	plans := findPlans(t)
	threads := 0 // the plan's own
	if fake() {
		threads = testThreads()
	}
	b := gpu.New(gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return testNode.Open(0) }, Threads: threads})
	var pass, fail, skip int
	start := time.Now()
	for i, p := range plans {
		if i%every != 0 {
			continue
		}
		line, outcome := checkOne(b, p)
		fmt.Printf("gpu-check %-4s %s: %s\n", outcome, p.name, line)
		switch outcome {
		case "ok":
			pass++
		case "FAIL":
			fail++
			t.Errorf("%s: %s", p.name, line)
		default:
			skip++
		}
	}
	fmt.Printf("gpu-check: %d plans identical to the CPU backend, %d failed, %d skipped (of %d found, every %d run) in %v\n",
		pass, fail, skip, len(plans), every, time.Since(start).Round(time.Millisecond))
}

// checkOne runs one plan in every dtype and packet size and returns its
// line and outcome: ok, FAIL or skip.
func checkOne(b executor.Backend, p checkPlan) (string, string) {
	if p.err != nil {
		return p.err.Error(), "skip"
	}
	var ran, notes []string
	for _, dt := range []executor.ElemType{executor.Float32, executor.Float16, executor.BFloat16} {
		sizes := harness.CheckSizes(p.plan, dt, 1<<16, 1)
		if len(sizes) == 0 {
			notes = append(notes, fmt.Sprintf("%s: no valid size up to 64 KiB", dt.Name()))
			continue
		}
		for _, ll8 := range []bool{false, true} {
			c := gputest.Case{Plan: p.plan, Size: sizes[0], DType: dt, LL8: ll8, InPlace: p.plan.Inplace, Launches: 2,
				Timeout: 5 * time.Second, SkipRacy: true}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			out, err := gputest.Run(ctx, b, c)
			cancel()
			switch {
			case err != nil && strings.Contains(err.Error(), "must all be resident"):
				return fmt.Sprintf("does not fit the device: %v", err), "skip"
			case err != nil:
				return fmt.Sprintf("%s: %v", c, err), "FAIL"
			case out == gputest.Same:
				ran = append(ran, c.String())
			case out == gputest.Deadlock:
				notes = append(notes, c.String()+": deadlocks on both backends")
			case out == gputest.Racy:
				notes = append(notes, c.String()+": racy on the CPU backend, not compared")
			}
		}
	}
	if len(ran) == 0 {
		return "nothing compared: " + strings.Join(notes, "; "), "skip"
	}
	line := fmt.Sprintf("identical in %d runs", len(ran))
	if len(notes) > 0 {
		line += " (" + strings.Join(notes, "; ") + ")"
	}
	return line, "ok"
}

// findPlans returns the reference plans, the project's golden plans and
// the default plan set, by name.
func findPlans(t *testing.T) []checkPlan {
	t.Helper()
	var out []checkPlan
	load := func(name, file string) {
		p, err := executor.LoadFile(file)
		out = append(out, checkPlan{name: name, plan: p, err: err})
	}
	if files, err := filepath.Glob(filepath.Join(sharedGolden, "*.json")); err == nil {
		sort.Strings(files)
		for _, f := range files {
			load("reference/"+filepath.Base(f), f)
		}
	}
	_ = filepath.WalkDir("../../tests", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".plan.json") {
			load("project/"+strings.TrimPrefix(path, "../../tests/"), path)
		}
		return nil
	})
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		t.Fatalf("the default plan set: %v", err)
	}
	for _, job := range jobs {
		res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), job.Algorithm+".star", starlib.Options{Defines: job.Params})
		if err != nil {
			out = append(out, checkPlan{name: "default/" + job.String(), err: err})
			continue
		}
		for i, prog := range res.Programs {
			name := fmt.Sprintf("default/%s#%d", job.String(), i)
			text, err := prog.Plan()
			if err != nil {
				out = append(out, checkPlan{name: name, err: err})
				continue
			}
			p, err := plan.Load(text)
			out = append(out, checkPlan{name: name, plan: p, err: err})
		}
	}
	return out
}
