package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/planset/install"
)

var (
	defaultSetOnce sync.Once
	defaultSetDir  string
	defaultSetErr  error
)

// defaultSet installs the default plan set (mscclgo install's) once per
// test binary, beside the built artifacts, and returns its directory.
func defaultSet(t *testing.T) string {
	t.Helper()
	dir := artifacts(t)
	defaultSetOnce.Do(func() {
		jobs, err := algorithms.DefaultSet()
		if err != nil {
			defaultSetErr = err
			return
		}
		defaultSetDir = filepath.Join(dir, "default")
		// The validation cache mscclgo install keeps (docs/cli.md): a
		// plan this build validated before is not validated again, which
		// saves the package about 6 s of CPU on a warm run.
		opts := install.Options{Dir: defaultSetDir}
		if cache, err := os.UserCacheDir(); err == nil {
			opts.CacheDir = filepath.Join(cache, "mscclgo", install.ValidationCacheDir)
		}
		_, defaultSetErr = install.Install(jobs, opts)
	})
	if defaultSetErr != nil {
		t.Fatalf("installing the default plan set: %v", defaultSetErr)
	}
	return defaultSetDir
}

// sweepCase is one run of ncclcheck sweep: ranks, and sizes from min to
// max bytes by factor.
type sweepCase struct {
	ranks            int
	min, max, factor uint64
}

// calls is the number of calls each rank of the sweep makes: 4 types × 3
// collectives × the sizes × out of place and in place.
func (c sweepCase) calls() int {
	n := 0
	for b := c.min; b <= c.max; b *= c.factor {
		n++
	}
	return 4 * 3 * n * 2
}

func (c sweepCase) args() []string {
	return []string{"sweep", strconv.Itoa(c.ranks), fmt.Sprint(c.min), fmt.Sprint(c.max), fmt.Sprint(c.factor)}
}

// checkSweep checks a sweep run: every rank made every call, with every
// result right, each call served by a plan on backend (none refused, none
// forwarded: there is no fallback).
func checkSweep(t *testing.T, c sweepCase, r run, backend string) {
	t.Helper()
	r.succeeded(t)
	for rank := range c.ranks {
		if want := fmt.Sprintf("rank %d: SWEEP cases %d wrong 0 failed 0\n", rank, c.calls()); !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if got, want := strings.Count(r.stderr, " on "+backend+", enqueued\n"), c.calls()*c.ranks; got != want {
		t.Errorf("%d calls enqueued on %s, want %d", got, backend, want)
	}
	for _, bad := range []string{": fallback: ", ": refused: ", "CPU backend"} {
		if i := strings.Index(r.stderr, bad); i >= 0 {
			t.Errorf("a call was not served by a plan on %s: %q", backend, lineAround(r.stderr, i))
		}
	}
}

// lineAround is the line of s that holds index i.
func lineAround(s string, i int) string {
	start := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return s[start:]
	}
	return s[start : i+end]
}

// TestSweepDevice runs the nccl-tests-shaped client (ncclcheck sweep: out
// of place then in place, float, half, bfloat16 and int32, allreduce,
// allgather and reducescatter, sizes counted as nccl-tests counts them,
// one buffer pair per rank for the whole sweep) on the emulated-device
// build with the default plan set and no fallback: every call is served
// by a plan and every result is right. A subset of the sizes of
// nccl-tests' default sweep, on both sides of the packet plans' 1 MiB
// limit; make nccl-sweep runs 1 KiB to 64 MiB by 2.
func TestSweepDevice(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	plans := defaultSet(t)
	emuLib := "LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu")
	for _, c := range []sweepCase{{2, 1 << 10, 4 << 20, 64}, {4, 1 << 10, 4 << 20, 64}, {8, 1 << 10, 2 << 20, 2048}} {
		t.Run(fmt.Sprintf("%d ranks", c.ranks), func(t *testing.T) {
			r := runCheck(t, []string{emuLib, "MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, c.args()...)
			checkSweep(t, c, r, "gpu-emu")
		})
	}
}
