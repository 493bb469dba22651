package install

import (
	"bytes"
	"context"
	"errors"
	"github.com/google/go-cmp/cmp"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/planset"
	"github.com/mscclgo/mscclgo/starlib"
)

func TestInstallIsAtomic(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "plans")
	good := []algorithms.Job{{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}}}
	idx, err := Install(good, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Plans) != 1 {
		t.Fatalf("index = %+v", idx)
	}
	read, err := planset.ReadIndex(dir)
	if err != nil || len(read.Plans) != 1 || read.Plans[0].WorldSize != 2 {
		t.Fatalf("ReadIndex = %+v, %v", read, err)
	}
	if _, err := os.Stat(filepath.Join(dir, read.Plans[0].File)); err != nil {
		t.Fatal(err)
	}
	// A failing job names itself and leaves the installed set as it was.
	bad := append(good, algorithms.Job{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "3"}})
	_, err = Install(bad, Options{Dir: dir})
	if !errors.Is(err, ErrInstall) {
		t.Fatalf("got %v, want ErrInstall", err)
	}
	again, err := planset.ReadIndex(dir)
	if err != nil || len(again.Plans) != 1 {
		t.Fatalf("after a failed install: %+v, %v", again, err)
	}
	// Left: the link, the set it points to, the lock file.
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 3 {
		t.Errorf("temporary directories left behind: %v", entries)
	}
}

// TestInstallDefaultSet installs the whole default set, as `mscclgo
// install` does on a fresh clone, and runs every installed plan again
// across its message range.
func TestInstallDefaultSet(t *testing.T) {
	if testing.Short() {
		t.Skip("the full default set takes a while; run without -short")
	}
	t.Parallel()
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "default")
	idx, err := Install(jobs, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != len(idx.Plans)+1 {
		t.Errorf("%d files for %d index entries", len(files), len(idx.Plans))
	}
	for _, e := range idx.Plans {
		plan, err := executor.LoadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		for _, size := range harness.CheckSizes(plan, executor.Float32, 1<<20, 3) {
			if _, err := harness.Run(context.Background(), harness.Config{Backend: cpu.New(), Plan: plan, Sizes: []uint64{size}, DType: executor.Float32, InPlace: plan.Inplace, Iters: 1, Options: executor.Options{Race: true}, Strict: true}); err != nil {
				t.Errorf("%s at %d bytes (float32): %v", e.File, size, err)
			}
		}
	}
}

// evalPlan evaluates a bundled algorithm and loads its one plan.
func evalPlan(t *testing.T, algo string, params map[string]string) *plan.Plan {
	t.Helper()
	res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), algo+".star", starlib.Options{Defines: params})
	if err != nil {
		t.Fatal(err)
	}
	text, err := res.Programs[0].Plan()
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Load(text)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// validSize reports whether the plan runs at size.
func validSize(p *plan.Plan, size uint64, dt executor.ElemType) bool {
	l, err := executor.PlanLayout(p, size, dt, p.Inplace)
	if err != nil {
		return false
	}
	_, err = executor.Instantiate(p, l.Sizes)
	return err == nil
}

// TestCheckSizes checks the validation sizes: distinct, ascending, valid,
// inside the plan's range (never above max_message_size), the smallest
// valid one first, up to the cap while the range allows three sizes
// there, and as small as the range allows when it starts above the cap.
func TestCheckSizes(t *testing.T) {
	t.Parallel()
	const cap = 1 << 20
	dt := executor.Float16
	tests := []struct {
		name     string
		min, max string
		want     []uint64 // if set, exactly these sizes
		upTo     uint64   // if set, every size is at most this
	}{
		{name: "whole range", min: "0", max: "1048576", want: []uint64{32, 8192, 1 << 20}},
		{name: "range to 4K", min: "0", max: "4096", want: []uint64{32, 512, 4096}},
		{name: "range from 1K", min: "1024", max: "1048576", want: []uint64{1024, 32768, 1 << 20}},
		// Not on the power-of-two ladder: the smallest valid size is the
		// first multiple of the size unit (32 bytes) from min.
		{name: "odd start", min: "1000", max: "1048576", want: []uint64{1024, 32768, 1 << 20}},
		{name: "odd start 2", min: "1030", max: "1048576", want: []uint64{1056, 32768, 1 << 20}},
		// A range starting above the cap: the three smallest valid sizes,
		// not 2, 4 and 8 MiB.
		{name: "above the cap", min: "2097153", max: "18446744073709551615", want: []uint64{2097184, 2097216, 2097248}},
		{name: "narrow, above the cap", min: "2097153", max: "2097200", want: []uint64{2097184}},
		{name: "narrow", min: "1000", max: "1100", want: []uint64{1024, 1056, 1088}},
		{name: "nothing valid", min: "1000", max: "1020", want: []uint64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := evalPlan(t, "allreduce_packet", map[string]string{
				"world_size": "2", "ranks_per_node": "2", "min_message_size": tt.min, "max_message_size": tt.max,
			})
			sizes := harness.CheckSizes(plan, dt, cap, 3)
			for i, s := range sizes {
				if s < plan.MinMessageSize || s > plan.MaxMessageSize {
					t.Errorf("size %d outside the plan's range [%d, %d]", s, plan.MinMessageSize, plan.MaxMessageSize)
				}
				if !validSize(plan, s, dt) {
					t.Errorf("size %d is not valid for the plan", s)
				}
				if i > 0 && s <= sizes[i-1] {
					t.Errorf("sizes %v are not distinct and ascending", sizes)
				}
			}
			if len(sizes) > 0 {
				// No smaller multiple of the size unit (32 bytes for
				// this plan) is valid; size 0 is never validated.
				for s := max(plan.MinMessageSize, 1); s < sizes[0]; s++ {
					if s%32 == 0 && validSize(plan, s, dt) {
						t.Errorf("size %d is valid and smaller than the first size %d", s, sizes[0])
						break
					}
				}
			}
			if tt.want != nil && !slices.Equal(sizes, tt.want) {
				t.Errorf("CheckSizes = %v, want %v", sizes, tt.want)
			}
		})
	}
}

// TestCheckSizesDefaultSet checks the sizes of every plan of the default
// set: three, inside its range, and no larger than the cap unless the
// range starts above it, in which case they stay below twice its start.
func TestCheckSizesDefaultSet(t *testing.T) {
	t.Parallel()
	jobs, err := algorithms.DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	const cap = 1 << 20
	for _, job := range jobs {
		plan := evalPlan(t, job.Algorithm, job.Params)
		if plan.AllToAllV != nil {
			// Sized per call: validated with harness.VarValidationCases.
			continue
		}
		sizes := harness.CheckSizes(plan, executor.Float16, cap, 3)
		if len(sizes) != 3 {
			t.Errorf("%s: sizes %v, want 3", job, sizes)
			continue
		}
		for _, s := range sizes {
			if s < plan.MinMessageSize || s > plan.MaxMessageSize {
				t.Errorf("%s: size %d outside [%d, %d]", job, s, plan.MinMessageSize, plan.MaxMessageSize)
			}
			if plan.MinMessageSize <= cap && s > cap {
				t.Errorf("%s: size %d above the cap for a range starting at %d", job, s, plan.MinMessageSize)
			}
			if plan.MinMessageSize > cap && s >= 2*plan.MinMessageSize {
				t.Errorf("%s: size %d not among the smallest for a range starting at %d", job, s, plan.MinMessageSize)
			}
		}
	}
}

// cacheJob is a small job for the validation cache tests.
var cacheJob = algorithms.Job{Algorithm: "allgather", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}}

// installRecording installs jobs and returns the plans' statuses.
func installRecording(t *testing.T, jobs []algorithms.Job, opts Options) ([]PlanStatus, error) {
	t.Helper()
	var got []PlanStatus
	var events int
	opts.Progress = func(ev Event) {
		events++
		if ev.Total != len(jobs) || ev.Done > ev.Total {
			t.Errorf("event %+v for %d jobs", ev, len(jobs))
		}
		if ev.Finished {
			got = append(got, ev.Plans...)
		}
	}
	_, err := Install(jobs, opts)
	if err == nil && events != 2*len(jobs) {
		t.Errorf("%d progress events for %d jobs, want a start and a finish each", events, len(jobs))
	}
	return got, err
}

func TestInstallValidationCache(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "validated")
	opts := Options{Dir: filepath.Join(tmp, "plans"), CacheDir: cache, Version: "test-1"}
	cached := func(st []PlanStatus) []bool {
		var out []bool
		for _, s := range st {
			out = append(out, s.Cached)
		}
		return out
	}
	step := func(what string, jobs []algorithms.Job, opts Options, want ...bool) {
		t.Helper()
		st, err := installRecording(t, jobs, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(cached(st), want) {
			t.Fatalf("%s: cached = %v, want %v", what, cached(st), want)
		}
	}
	step("first install", []algorithms.Job{cacheJob}, opts, false)
	entries, err := os.ReadDir(cache)
	if err != nil || len(entries) != 1 {
		t.Fatalf("cache directory after one validation: %v, %v", entries, err)
	}
	step("same plan again", []algorithms.Job{cacheJob}, opts, true)

	noCache := opts
	noCache.NoCache = true
	step("--no-cache", []algorithms.Job{cacheJob}, noCache, false)

	// A different plan (another thread count) misses, then hits.
	changed := algorithms.Job{Algorithm: "allgather", Params: map[string]string{"world_size": "2", "ranks_per_node": "2", "num_threads_per_block": "512"}}
	step("changed plan", []algorithms.Job{changed}, opts, false)
	step("changed plan again", []algorithms.Job{changed}, opts, true)
	step("first plan still cached", []algorithms.Job{cacheJob}, opts, true)

	// Another build, element type or size cap validates again.
	other := opts
	other.Version = "test-2"
	step("another version", []algorithms.Job{cacheJob}, other, false)
	other = opts
	other.DType = executor.Float32
	step("another dtype", []algorithms.Job{cacheJob}, other, false)
	other = opts
	other.MaxCheckBytes = 64 << 10
	step("another size cap", []algorithms.Job{cacheJob}, other, false)

	// Without a cache directory nothing is cached.
	none := opts
	none.CacheDir = ""
	step("no cache directory", []algorithms.Job{cacheJob}, none, false)
}

// brokenAlgorithms returns the bundled algorithms with allgather.star
// changed so that no rank sends its chunk: the plan loads and runs, and
// its results are wrong.
func brokenAlgorithms(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(algorithms.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(algorithms.FS, p)
		m[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	src := string(m["allgather.star"].Data)
	put := "ch.put(Rank(p).get_output_buffer()[r:r + 1], mine, tb = tb)"
	if !strings.Contains(src, put) {
		t.Fatalf("allgather.star has no %q to remove", put)
	}
	m["allgather.star"] = &fstest.MapFile{Data: []byte(strings.Replace(src, put, "pass", 1))}
	return m
}

// TestInstallRejectsBrokenPlanWithCache checks that a warm validation
// cache does not let a broken plan through: its bytes differ from the
// validated plan's, so it is validated, fails, and leaves the installed
// set unchanged.
func TestInstallRejectsBrokenPlanWithCache(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	opts := Options{Dir: filepath.Join(tmp, "plans"), CacheDir: filepath.Join(tmp, "validated"), Version: "test"}
	if _, err := Install([]algorithms.Job{cacheJob}, opts); err != nil {
		t.Fatal(err)
	}
	if st, err := installRecording(t, []algorithms.Job{cacheJob}, opts); err != nil || len(st) != 1 || !st[0].Cached {
		t.Fatalf("the good plan is not cached: %+v, %v", st, err)
	}
	before, err := os.ReadFile(filepath.Join(opts.Dir, "allgather_2gpu.json"))
	if err != nil {
		t.Fatal(err)
	}
	broken := opts
	broken.Algorithms = brokenAlgorithms(t)
	_, err = Install([]algorithms.Job{cacheJob}, broken)
	if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "wrong elements") {
		t.Fatalf("broken plan: got %v, want ErrInstall with wrong elements", err)
	}
	after, err := os.ReadFile(filepath.Join(opts.Dir, "allgather_2gpu.json"))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the installed plan changed after a failed install (%v)", err)
	}
	// Still rejected the second time: a failure is never recorded.
	if _, err := Install([]algorithms.Job{cacheJob}, broken); !errors.Is(err, ErrInstall) {
		t.Fatalf("broken plan, again: got %v, want ErrInstall", err)
	}
}

// TestInstallConcurrentFailure checks that with several workers a failing
// job among good ones fails the installation, names the job, and leaves
// no temporary directory.
func TestInstallConcurrentFailure(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "plans")
	jobs := []algorithms.Job{
		cacheJob,
		{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}},
		{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "3"}},
		{Algorithm: "alltoall", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}},
	}
	_, err := Install(jobs, Options{Dir: dir, Workers: 3})
	if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "ranks_per_node=3") {
		t.Fatalf("got %v, want ErrInstall naming the ranks_per_node=3 job", err)
	}
	// Only the lock file, which is never removed, may remain.
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 || entries[0].Name() != ".plans.lock" {
		t.Errorf("left behind: %v", entries)
	}
}

// TestValidationSizesFitMemory: a plan whose validation at the size cap
// would need more than maxValidationBytes is validated at smaller sizes
// of its own range that fit; a small plan keeps the cap's sizes.
func TestValidationSizesFitMemory(t *testing.T) {
	t.Parallel()
	big := evalPlan(t, "allreduce_hier_packet", map[string]string{
		"world_size": "32", "ranks_per_node": "8", "instances": "2", "nblocks": "4",
		"min_message_size": "131072", "max_message_size": "2097152",
	})
	if full := harness.CheckSizes(big, executor.Float16, 1<<20, 3); footprint(big, full[len(full)-1], executor.Float16) <= maxValidationBytes {
		t.Fatalf("the 4x8 LL allreduce at %d bytes fits in %d bytes: the test needs a bigger plan", full[len(full)-1], maxValidationBytes)
	}
	sizes := validationSizes(big, executor.Float16, 1<<20)
	if len(sizes) != 3 {
		t.Fatalf("sizes %v, want 3", sizes)
	}
	for _, s := range sizes {
		if s < big.MinMessageSize || s > big.MaxMessageSize || !validSize(big, s, executor.Float16) {
			t.Errorf("size %d is not a valid size of the plan's range", s)
		}
	}
	if top := sizes[len(sizes)-1]; footprint(big, top, executor.Float16) > maxValidationBytes {
		t.Errorf("top size %d still needs %d bytes", top, footprint(big, top, executor.Float16))
	}
	small := evalPlan(t, "allreduce_packet", map[string]string{"world_size": "2"})
	if diff := cmp.Diff(harness.CheckSizes(small, executor.Float16, 1<<20, 3), validationSizes(small, executor.Float16, 1<<20)); diff != "" {
		t.Errorf("a small plan's sizes changed (-cap +got):\n%s", diff)
	}
}
