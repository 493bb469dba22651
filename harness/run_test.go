package harness_test

// Tests of the runner, Run, on the CPU backend: a size sweep, wrong data
// reported as values or (Strict) as the error, the memory budget,
// deadlocks, one rank per session over a loopback bootstrap, and runs
// bound to a counts matrix.

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/bootstrap"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/executor/rankwire"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// portPlan loads a plan of tests/ports.
func portPlan(t *testing.T, file string) *plan.Plan {
	t.Helper()
	p, err := executor.LoadFile(filepath.Join("..", "tests", "ports", file))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// corrupt is a backend whose sessions flip a bit of rank's output element
// at byte off after launches from launch on: an exponent bit of a
// 16-bit float, far outside any tolerance.
type corrupt struct {
	executor.Backend
	rank   int
	off    uint64
	launch int
	// deadlock, if positive, makes launch number deadlock-1 report a
	// deadlock instead.
	deadlock int
}

func (c corrupt) Open(inst *executor.Instance, o executor.Options) (executor.Session, error) {
	s, err := c.Backend.Open(inst, o)
	if err != nil {
		return nil, err
	}
	return &corruptSession{Session: s, c: c}, nil
}

type corruptSession struct {
	executor.Session
	c corrupt
	n int
}

func (s *corruptSession) Launch(ctx context.Context, bufs []executor.RankBuffers) error {
	s.n++
	if s.n == s.c.deadlock {
		return &executor.DeadlockError{}
	}
	if err := s.Session.Launch(ctx, bufs); err != nil {
		return err
	}
	if s.n > s.c.launch && s.c.rank >= 0 {
		bufs[s.c.rank].Output[s.c.off+1] ^= 0x40
	}
	return nil
}

// summary is what the tests compare of a SizeResult.
type summary struct {
	Size             uint64
	Skipped, Checked bool
	Wrong            uint64
	Stopped          bool
	Deadlock         bool
}

func summarize(rs []harness.SizeResult) []summary {
	var out []summary
	for _, r := range rs {
		out = append(out, summary{Size: r.Size, Skipped: r.Skipped != nil, Checked: r.Checked, Wrong: r.Wrong, Stopped: r.Stopped, Deadlock: r.Deadlock != nil})
	}
	return out
}

func TestRun(t *testing.T) {
	t.Parallel()
	allreduce := portPlan(t, "single_node/allreduce.plan.json")
	// 8 ranks, float16: 1000 bytes is no whole number of chunks.
	tests := []struct {
		name    string
		backend executor.Backend
		cfg     harness.Config
		want    []summary
		wantErr string // a *SizeError at this stage ("prepare", "run"), or "budget"
	}{
		{
			name:    "sweep",
			backend: cpu.New(),
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1000, 1 << 14}, Sweep: true, Iters: 2, Warmup: 1},
			want:    []summary{{Size: 1 << 12, Checked: true}, {Size: 1000, Skipped: true}, {Size: 1 << 14, Checked: true}},
		},
		{
			name:    "a size the plan rejects ends a run that is no sweep",
			backend: cpu.New(),
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1000}, Iters: 1},
			want:    []summary{{Size: 1 << 12, Checked: true}},
			wantErr: "prepare",
		},
		{
			name:    "wrong data stops the run",
			backend: corrupt{Backend: cpu.New(), rank: 3, off: 96, launch: 1},
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1 << 13}, Iters: 3},
			want:    []summary{{Size: 1 << 12, Checked: true, Wrong: 2, Stopped: true}},
		},
		{
			name:    "wrong data with keep-going",
			backend: corrupt{Backend: cpu.New(), rank: 3, off: 96, launch: 1},
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1 << 13}, Iters: 3, KeepGoing: true},
			want:    []summary{{Size: 1 << 12, Checked: true, Wrong: 2}, {Size: 1 << 13, Checked: true, Wrong: 2}},
		},
		{
			name:    "a deadlock ends the run",
			backend: corrupt{Backend: cpu.New(), rank: -1, deadlock: 3},
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1 << 13}, Iters: 3, Warmup: 1},
			want:    []summary{{Size: 1 << 12, Checked: true, Deadlock: true}},
		},
		{
			name:    "memory budget",
			backend: cpu.New(),
			cfg:     harness.Config{Sizes: []uint64{1 << 12, 1 << 24}, Sweep: true, Iters: 1, Budget: 64 << 20},
			want:    []summary{{Size: 1 << 12, Checked: true}},
			wantErr: "budget",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Backend, cfg.Plan, cfg.DType, cfg.InPlace = tt.backend, allreduce, executor.Float16, true
			var streamed []harness.SizeResult
			cfg.Done = func(r harness.SizeResult) { streamed = append(streamed, r) }
			got, err := harness.Run(context.Background(), cfg)
			if d := cmp.Diff(tt.want, summarize(got)); d != "" {
				t.Errorf("results (-want +got):\n%s", d)
			}
			if d := cmp.Diff(summarize(got), summarize(streamed)); d != "" {
				t.Errorf("Done saw other results than Run returned (-returned +seen):\n%s", d)
			}
			var se *harness.SizeError
			var be *harness.BudgetError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Run: %v", err)
			case tt.wantErr == "prepare" && !(errors.As(err, &se) && se.Prepare && se.Size == 1000):
				t.Fatalf("Run: %v, want a *SizeError at the preparation of size 1000", err)
			case tt.wantErr == "budget":
				if !errors.As(err, &be) || be.Size != 1<<24 || be.Use.Total() <= be.Budget || be.Budget != 64<<20 {
					t.Fatalf("Run: %v, want a *BudgetError for size %d", err, 1<<24)
				}
			}
			for _, r := range got {
				if r.Skipped == nil && r.Elapsed <= 0 && r.Deadlock == nil {
					t.Errorf("size %d: elapsed %v", r.Size, r.Elapsed)
				}
			}
		})
	}
}

// TestRunWrongReport checks the report of the first launch with wrong
// data: the launch, the rank, the element and the ops that write it.
func TestRunWrongReport(t *testing.T) {
	t.Parallel()
	p := portPlan(t, "single_node/allreduce.plan.json")
	// The plan is an in-place one (out of place, its outputs stay
	// empty); test out of place, the report also names the writers of
	// the input byte the output element shares.
	for _, inPlace := range []bool{true} {
		cfg := harness.Config{
			Backend: corrupt{Backend: cpu.New(), rank: 5, off: 200, launch: 1},
			Plan:    p, Sizes: []uint64{1 << 12}, DType: executor.Float16, InPlace: inPlace, Iters: 3,
		}
		got, err := harness.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep := got[0].FirstWrong
		if rep == nil || rep.Launch != 1 || len(rep.Ranks) != 1 {
			t.Fatalf("in place %v: report %+v, want one rank at launch 1", inPlace, rep)
		}
		rw := rep.Ranks[0]
		if rw.Rank != 5 || rw.Wrong != 1 || len(rw.Elements) != 1 {
			t.Fatalf("in place %v: %+v, want rank 5 with one wrong element", inPlace, rw)
		}
		e := rw.Elements[0]
		if e.Rank != 5 || e.Offset != 200 || e.Want == e.Got || len(e.Writers) == 0 {
			t.Errorf("in place %v: element %+v, want rank 5 offset 200 with its writers", inPlace, e)
		}
		// The writers are the ops Writers finds for the byte.
		want := harness.Writers(got[0].Instance, 5, plan.Output, 200)
		if in, ok := got[0].Layout.OutputInInput(5, 200); ok {
			want = append(want, harness.Writers(got[0].Instance, 5, plan.Input, in)...)
		}
		if d := cmp.Diff(want, e.Writers); d != "" || len(want) == 0 {
			t.Errorf("in place %v: writers (-Writers +report):\n%s", inPlace, d)
		}
	}
}

// connect starts a loopback bootstrap of n ranks.
func connect(t *testing.T, n int) []*bootstrap.Bootstrap {
	t.Helper()
	bs, err := bootstrap.ConnectLocal(context.Background(), n, t.TempDir(), bootstrap.Options{Timeout: 20 * time.Second, CloseTimeout: time.Second})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { bootstrap.CloseAll(bs) })
	return bs
}

// corruptRank flips a bit of its output after every launch.
type corruptRank struct {
	*cpu.RankSession
	off uint64
}

func (s corruptRank) Launch(ctx context.Context) error {
	if err := s.RankSession.Launch(ctx); err != nil {
		return err
	}
	s.Buffers().Output[s.off+1] ^= 0x40
	return nil
}

// TestRunRank runs every rank's share on a rank session of the CPU
// backend: every rank returns the same results, with the wrong data of
// the one rank that has some.
func TestRunRank(t *testing.T) {
	t.Parallel()
	plan := portPlan(t, "single_node/allgather.plan.json")
	n := len(plan.GPUs)
	for _, bad := range []int{-1, 1} {
		bs := connect(t, n)
		results := make([][]harness.SizeResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() {
				cfg := harness.Config{Plan: plan, Sizes: []uint64{1 << 12, 1000, 1 << 13}, Sweep: true, DType: executor.Float32, InPlace: plan.Inplace, Iters: 2, Warmup: 1}
				cfg.Rank = &harness.RankRun{Rank: r, Group: bs[r]}
				cfg.Rank.Open = func(ctx context.Context, i int, inst *executor.Instance, l *executor.BufferLayout) (harness.RankSession, error) {
					rs, err := cpu.OpenRank(ctx, inst, l, executor.Options{DType: executor.Float32}, rankwire.World{Net: bs[r], Host: make([]int, n), Tag: 1000 + uint32(i)*rankwire.TagsPerSession})
					if err != nil || r != bad {
						return rs, err
					}
					return corruptRank{RankSession: rs, off: 40}, nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				results[r], errs[r] = harness.Run(ctx, cfg)
			})
		}
		wg.Wait()
		var wrong uint64
		if bad >= 0 {
			wrong = 2
		}
		want := []summary{{Size: 1 << 12, Checked: true, Wrong: wrong}, {Size: 1000, Skipped: true}, {Size: 1 << 13, Checked: true, Wrong: wrong}}
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("bad rank %d: rank %d: %v", bad, r, errs[r])
			}
			if d := cmp.Diff(want, summarize(results[r])); d != "" {
				t.Errorf("bad rank %d: rank %d (-want +got):\n%s", bad, r, d)
			}
			rep := results[r][0].FirstWrong
			switch {
			case bad < 0 && rep != nil:
				t.Errorf("rank %d: report %+v of a run without wrong data", r, rep)
			case bad >= 0 && (rep == nil || rep.Launch != 0 || len(rep.Ranks) != 1 || rep.Ranks[0].Rank != bad ||
				len(rep.Ranks[0].Elements) != 1 || rep.Ranks[0].Elements[0].Offset != 40 || len(rep.Ranks[0].Elements[0].Writers) == 0):
				t.Errorf("rank %d: report %+v, want rank %d's element at offset 40 with its writers", r, rep, bad)
			}
		}
	}
}

// TestAgree checks that ranks started with different parameters are
// refused alike, naming the first parameter that differs.
func TestAgree(t *testing.T) {
	t.Parallel()
	bs := connect(t, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			p := harness.Params{{"--iters", "10"}, {"--dtype", "float16"}}
			if r == 2 {
				p[1][1] = "float32"
			}
			errs[r] = harness.Agree(context.Background(), bs[r], p)
		})
	}
	wg.Wait()
	for r, err := range errs {
		var pe *harness.ParamsError
		if !errors.As(err, &pe) || *pe != (harness.ParamsError{Name: "--dtype", Value: "float32", Ref: "float16", Rank: 2}) {
			t.Errorf("rank %d: %v, want a *ParamsError for --dtype on rank 2", r, err)
		}
	}
}

// alltoallvPlan evaluates a bundled algorithm.
func alltoallvPlan(t *testing.T, script string, defines map[string]string) *plan.Plan {
	t.Helper()
	res, err := starlib.Eval(starlib.FSSource(algorithms.FS, "algorithms"), script, starlib.Options{Defines: defines})
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

// TestRunCounts runs the bundled alltoallv algorithm bound to a counts
// matrix: clean, with a backend that corrupts an output byte from the
// second launch on, one that deadlocks, and the refusals of a plan that
// is not variable-size, counts of another shape and a memory bound.
func TestRunCounts(t *testing.T) {
	t.Parallel()
	v2 := alltoallvPlan(t, "alltoallv.star", map[string]string{"world_size": "2"})
	fixed := alltoallvPlan(t, "allgather.star", nil)
	counts := executor.MatrixCounts([][]int64{{100, 7}, {3, 0}})
	three := executor.MatrixCounts(executor.UniformMatrix(3, 1))
	for _, tt := range []struct {
		name     string
		p        *plan.Plan
		counts   *executor.Counts
		backend  executor.Backend
		budget   uint64
		wrong    uint64
		deadlock bool
		wantErr  string // "plan", "prepare", "budget"
	}{
		{name: "clean", p: v2, counts: counts, backend: cpu.New()},
		{name: "wrong from launch 2", p: v2, counts: counts, backend: corrupt{Backend: cpu.New(), rank: 1, off: 8, launch: 2}, wrong: 2},
		{name: "deadlock", p: v2, counts: counts, backend: corrupt{Backend: cpu.New(), rank: -1, deadlock: 2}, deadlock: true},
		{name: "not alltoallv", p: fixed, counts: counts, backend: cpu.New(), wantErr: "plan"},
		{name: "counts of 3 ranks", p: v2, counts: three, backend: cpu.New(), wantErr: "prepare"},
		{name: "over the bound", p: v2, counts: counts, backend: cpu.New(), budget: 100, wantErr: "budget"},
	} {
		var opened harness.SizeResult
		got, err := harness.Run(context.Background(), harness.Config{
			Backend: tt.backend, Plan: tt.p, Counts: tt.counts, DType: executor.Float32, Options: executor.Options{Race: true},
			Iters: 3, Warmup: 1, Budget: tt.budget, Opened: func(r harness.SizeResult) { opened = r },
		})
		var se *harness.SizeError
		var be *harness.BudgetError
		switch {
		case tt.wantErr == "plan":
			if err == nil || errors.As(err, &se) || errors.As(err, &be) {
				t.Errorf("%s: error %v, want the plan's", tt.name, err)
			}
			continue
		case tt.wantErr == "prepare":
			if !errors.As(err, &se) || !se.Prepare {
				t.Errorf("%s: error %v, want a *SizeError of the preparation", tt.name, err)
			}
			continue
		case tt.wantErr == "budget":
			if !errors.As(err, &be) || be.Budget != tt.budget || be.Use.Total() <= tt.budget || be.Size != 440 {
				t.Errorf("%s: error %v, want a *BudgetError over %d bytes for 440 bytes", tt.name, err, tt.budget)
			}
			continue
		case err != nil:
			t.Fatalf("%s: %v", tt.name, err)
		}
		// 110 elements of 4 bytes in all.
		if len(got) != 1 || got[0].Size != 440 || opened.Size != 440 || opened.Instance == nil {
			t.Fatalf("%s: %+v, opened with %+v; want one result of 440 bytes", tt.name, got, opened)
		}
		res := got[0]
		mismatch := res.FirstWrong != nil && len(res.FirstWrong.Ranks) == 1 && res.FirstWrong.Ranks[0].Mismatch != nil
		if res.Wrong != tt.wrong || (tt.wrong > 0) != mismatch || (res.Deadlock != nil) != tt.deadlock || res.Race != nil {
			t.Errorf("%s: %+v, want %d wrong bytes, deadlock %v", tt.name, res, tt.wrong, tt.deadlock)
		}
	}
	if got := harness.LargestBlock(counts); got != 100 {
		t.Errorf("LargestBlock: %d, want 100", got)
	}
}

// TestRunStrict checks that a Strict run makes its first problem the
// error, with the launch and rank as the check of a plan names them.
func TestRunStrict(t *testing.T) {
	t.Parallel()
	allreduce := portPlan(t, "single_node/allreduce.plan.json")
	v2 := alltoallvPlan(t, "alltoallv.star", map[string]string{"world_size": "2"})
	counts := executor.MatrixCounts([][]int64{{100, 7}, {3, 0}})
	for _, tt := range []struct {
		name     string
		cfg      harness.Config
		want     string // the error's text ("": none)
		mismatch bool   // the cause is a *VarMismatch
	}{
		{name: "clean", cfg: harness.Config{Backend: cpu.New(), Plan: allreduce, Sizes: []uint64{1 << 12}}},
		{name: "wrong data", cfg: harness.Config{Backend: corrupt{Backend: cpu.New(), rank: 3, off: 96, launch: 1}, Plan: allreduce, Sizes: []uint64{1 << 12}},
			want: "size 4096: launch 1: rank 3 has 1 wrong elements"},
		{name: "deadlock", cfg: harness.Config{Backend: corrupt{Backend: cpu.New(), rank: -1, deadlock: 2}, Plan: allreduce, Sizes: []uint64{1 << 12}},
			want: "size 4096: " + (&executor.DeadlockError{}).Error()},
		{name: "counts clean", cfg: harness.Config{Backend: cpu.New(), Plan: v2, Counts: counts}},
		{name: "counts wrong", cfg: harness.Config{Backend: corrupt{Backend: cpu.New(), rank: 1, off: 8, launch: 1}, Plan: v2, Counts: counts},
			want: "size 440: launch 1: rank 1 output byte 9 in the block from rank 0: got 0x", mismatch: true},
	} {
		cfg := tt.cfg
		cfg.DType, cfg.InPlace, cfg.Iters, cfg.Strict = executor.Float16, true, 3, true
		if cfg.Counts != nil {
			cfg.DType = executor.Float32
		}
		_, err := harness.Run(context.Background(), cfg)
		var se *harness.SizeError
		var vm *harness.VarMismatch
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want == "":
		case err == nil || !errors.As(err, &se) || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want:
			t.Errorf("%s: error %v, want a *SizeError starting %q", tt.name, err, tt.want)
		case errors.As(err, &vm) != tt.mismatch:
			t.Errorf("%s: error %v: *VarMismatch %v, want %v", tt.name, err, !tt.mismatch, tt.mismatch)
		}
	}
}

// TestRunCountsRank runs every rank's share of a run bound to counts on
// a rank session of the CPU backend: every rank returns the same
// result, with the typed mismatch of the one rank that has wrong bytes.
func TestRunCountsRank(t *testing.T) {
	t.Parallel()
	p := alltoallvPlan(t, "alltoallv.star", map[string]string{"world_size": "2"})
	counts := executor.MatrixCounts(executor.UniformMatrix(2, 100))
	for _, bad := range []int{-1, 1} {
		bs := connect(t, 2)
		results := make([][]harness.SizeResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() {
				open := func(ctx context.Context, _ int, inst *executor.Instance, l *executor.BufferLayout) (harness.RankSession, error) {
					rs, err := cpu.OpenRank(ctx, inst, l, executor.Options{DType: executor.Float32}, rankwire.World{Net: bs[r], Host: make([]int, 2), Tag: 1000})
					if err != nil || r != bad {
						return rs, err
					}
					return corruptRank{RankSession: rs, off: 40}, nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				results[r], errs[r] = harness.Run(ctx, harness.Config{
					Plan: p, Counts: counts, DType: executor.Float32, Iters: 2, Warmup: 1,
					Rank: &harness.RankRun{Rank: r, Group: bs[r], Open: open},
				})
			})
		}
		wg.Wait()
		for r := range 2 {
			if errs[r] != nil {
				t.Fatalf("bad rank %d: rank %d: %v", bad, r, errs[r])
			}
			if len(results[r]) != 1 || results[r][0].Size != 1600 {
				t.Fatalf("bad rank %d: rank %d: %+v, want one result of 1600 bytes", bad, r, results[r])
			}
			res := results[r][0]
			rep := res.FirstWrong
			switch {
			case bad < 0 && (rep != nil || res.Wrong != 0):
				t.Errorf("rank %d: %d wrong bytes, report %+v, of a clean run", r, res.Wrong, rep)
			case bad >= 0 && (rep == nil || res.Wrong != 2 || rep.Launch != 0 || len(rep.Ranks) != 1 || rep.Ranks[0].Rank != bad ||
				rep.Ranks[0].Mismatch == nil || rep.Ranks[0].Mismatch.Offset != 41):
				t.Errorf("rank %d: %d wrong bytes, report %+v; want rank %d's byte 41 in both launches", r, res.Wrong, rep, bad)
			}
		}
	}
}
