package harness

// run.go is the run loop of `mscclgo run` in one process: for each
// message size, lay out, instantiate, check the launch and the memory
// budget, then fill, launch and check every launch, and return what
// happened as values for the caller to print.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// DefaultShowWrong is how many wrong elements a WrongReport lists per
// rank unless Config.ShowWrong says otherwise.
const DefaultShowWrong = 3

// Config is a run of one plan at one or more message sizes.
type Config struct {
	// Backend runs the plan (Run; RunRank opens rank sessions instead).
	Backend executor.Backend
	Plan    *plan.Plan
	// Sizes are the message sizes, in bytes, in the order they run.
	Sizes []uint64
	// Sweep skips a size the plan rejects (SizeResult.Skipped) instead
	// of ending the run with a *SizeError.
	Sweep   bool
	DType   executor.ElemType
	InPlace bool
	// Iters is the number of filled, timed and checked launches per
	// size; Warmup launches run before them, filled as the first and
	// neither timed nor checked (nccl-tests -w).
	Iters, Warmup int
	Fill          FillMode
	SplitMask     int
	// Options are the sessions' options; DType is replaced by DType.
	Options executor.Options
	// Memory says what the backend allocates besides the buffers
	// (DeviceCopies): a property of the backend, which the
	// caller knows. Run sets Iters, Race and Tables itself.
	Memory MemoryOptions
	// Budget refuses a size whose estimated memory use is above it with
	// a *BudgetError, before anything is allocated for it (0: none).
	Budget uint64
	// KeepGoing runs the sizes after one with wrong data; without it
	// the run stops there (SizeResult.Stopped).
	KeepGoing bool
	// Checker fills and checks from its tables (nil: a new one, kept for
	// the whole run).
	Checker *Checker
	// ShowWrong bounds the wrong elements a WrongReport lists per rank
	// (0: DefaultShowWrong).
	ShowWrong int
	// Done, if set, is called with each size's result as soon as the
	// size has run (or was skipped), before the next one starts.
	Done func(SizeResult)
}

// SizeResult is what happened at one message size.
type SizeResult struct {
	Size uint64
	// Skipped is why a size of a sweep did not run (the plan rejects
	// it); nothing else is set.
	Skipped error
	// Layout and Instance are the size's buffers and resolved plan.
	Layout   *Layout
	Instance *executor.Instance
	// Elapsed is the time of the Iters timed launches together: the
	// device's own time where the session measures it (the kernel
	// alone, without copies), or else the wall-clock time of Launch. In
	// a run of one process per rank, the slowest rank's per launch.
	Elapsed time.Duration
	// Checked: the collective has a defined result, and the outputs
	// were compared with it after every timed launch.
	Checked bool
	// Wrong counts the wrong elements over all ranks and launches.
	Wrong uint64
	// FirstWrong locates the wrong data of the first launch that had
	// any.
	FirstWrong *WrongReport
	// Race is the first launch with a data race (the cpu backend with
	// Options.Race); the launches go on.
	Race *LaunchError
	// Deadlock is the launch that deadlocked; the run ends there.
	Deadlock *LaunchError
	// Failures are, in a run of one process per rank, the ranks whose
	// launch failed; the run ends there.
	Failures []RankFailure
	// Stopped: the run ends after this size, which has wrong data,
	// although sizes remain (Config.KeepGoing runs them).
	Stopped bool
	// NVLS is the session's report of its NVLS branch, if it has one.
	NVLS string
}

// LaunchError is a launch that failed in a way a run reports rather than
// returns.
type LaunchError struct {
	// Launch numbers the launch among the timed ones, or among the
	// warm-up ones when Warmup is set.
	Launch int
	Warmup bool
	Err    error
}

// WrongReport locates the wrong data of one launch.
type WrongReport struct {
	Launch int
	Ranks  []RankWrong
}

// RankWrong is one rank's wrong data in a launch: how many elements, and
// the first ones (Config.ShowWrong) with the ops that write them.
type RankWrong struct {
	Rank     int
	Wrong    uint64
	Elements []WrongElement
}

// SizeError is a message size a run could not run.
type SizeError struct {
	Size uint64
	// Prepare: the plan rejects the size (layout, instantiation or the
	// launch checks), before anything ran.
	Prepare bool
	Err     error
}

func (e *SizeError) Error() string { return fmt.Sprintf("size %d: %v", e.Size, e.Err) }
func (e *SizeError) Unwrap() error { return e.Err }

// BudgetError is a size whose run would need more memory than the
// budget: it ends a sweep, since larger sizes need more.
type BudgetError struct {
	Size   uint64
	Use    MemoryUse
	Budget uint64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("size %d: a run needs about %s (%s), above the memory budget of %s",
		e.Size, executor.FormatBytes(e.Use.Total()), e.Use, executor.FormatBytes(e.Budget))
}

// deviceTimer is a session that times its last launch on the device
// (the GPU backends), excluding its copies of the caller's buffers.
type deviceTimer interface {
	DeviceTime() time.Duration
}

// nvlsReporter is a session that says which NVLS branch it took.
type nvlsReporter interface {
	NVLS() string
}

// Run runs cfg.Plan on cfg.Backend at every size of cfg.Sizes and
// returns the result of each size that ran or was skipped. It stops
// after a deadlock and, without KeepGoing, after a size with wrong data.
// The error is a *SizeError (a size the plan rejects outside a sweep, or
// a launch that failed other than by a deadlock or a race), a
// *BudgetError, or a configuration error.
func Run(ctx context.Context, cfg Config) ([]SizeResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Backend == nil {
		return nil, errors.New("harness: no backend")
	}
	if cfg.Checker == nil {
		cfg.Checker = NewChecker()
	}
	var out []SizeResult
	for i, size := range cfg.Sizes {
		l, inst, skipped, err := cfg.prepareOrSkip(size)
		if err != nil {
			return out, err
		}
		if skipped != nil {
			out = cfg.done(out, *skipped)
			continue
		}
		res, err := cfg.runSize(ctx, l, inst)
		if err != nil {
			return out, &SizeError{Size: size, Err: err}
		}
		res.Stopped = res.Wrong > 0 && !cfg.KeepGoing && i < len(cfg.Sizes)-1
		out = cfg.done(out, res)
		if res.Deadlock != nil || res.Stopped {
			break
		}
	}
	return out, nil
}

// validate checks what every run needs.
func (cfg *Config) validate() error {
	switch {
	case cfg.Plan == nil:
		return errors.New("harness: no plan")
	case cfg.DType == 0:
		return errors.New("harness: no element type")
	case cfg.Iters < 1:
		return fmt.Errorf("harness: %d launches per size: want at least 1", cfg.Iters)
	case cfg.Warmup < 0:
		return fmt.Errorf("harness: %d warm-up launches: want 0 or more", cfg.Warmup)
	}
	cfg.Options.DType = cfg.DType
	if cfg.ShowWrong <= 0 {
		cfg.ShowWrong = DefaultShowWrong
	}
	return nil
}

// done records res and hands it to cfg.Done.
func (cfg *Config) done(out []SizeResult, res SizeResult) []SizeResult {
	if cfg.Done != nil {
		cfg.Done(res)
	}
	return append(out, res)
}

// prepareOrSkip is prepare for one size of the run: a size the plan
// rejects is, in a sweep, skipped (the result to record) and otherwise a
// *SizeError; a size over the budget is always the *BudgetError.
func (cfg *Config) prepareOrSkip(size uint64) (*Layout, *executor.Instance, *SizeResult, error) {
	l, inst, err := cfg.prepare(size)
	if err == nil {
		return l, inst, nil, nil
	}
	var be *BudgetError
	if errors.As(err, &be) {
		return nil, nil, nil, err
	}
	if !cfg.Sweep {
		return nil, nil, nil, &SizeError{Size: size, Prepare: true, Err: err}
	}
	return nil, nil, &SizeResult{Size: size, Skipped: err}, nil
}

// prepare lays out the buffers for size, instantiates the plan, refuses a
// run above the memory budget (a *BudgetError) and makes the checks of a
// launch (executor.CheckLaunch), all before anything is allocated for
// the size.
func (cfg *Config) prepare(size uint64) (*Layout, *executor.Instance, error) {
	l, err := PlanLayout(cfg.Plan, size, cfg.DType, cfg.InPlace)
	if err != nil {
		return nil, nil, err
	}
	l.Fill, l.SplitMask, l.Reduce = cfg.Fill, cfg.SplitMask, cfg.Options.Reduce
	inst, err := executor.Instantiate(cfg.Plan, l.Sizes)
	if err != nil {
		return nil, nil, err
	}
	mo := cfg.Memory
	mo.Iters, mo.Race, mo.Tables = cfg.Iters+cfg.Warmup, cfg.Options.Race, true
	if use := EstimateMemory(inst, l.BufferLayout, mo); cfg.Budget > 0 && use.Total() > cfg.Budget {
		return nil, nil, &BudgetError{Size: size, Use: use, Budget: cfg.Budget}
	}
	if err := executor.CheckLaunch(inst, l.BufferLayout, cfg.Options.LL8); err != nil {
		return nil, nil, err
	}
	return l, inst, nil
}

// runSize runs the launches of one size: fill, launch, check. The inputs
// and the expected results come from the Checker's tables, which are
// built once for the largest size and reused.
func (cfg *Config) runSize(ctx context.Context, l *Layout, inst *executor.Instance) (res SizeResult, err error) {
	res = SizeResult{Size: l.Size, Layout: l, Instance: inst, Checked: l.Checked()}
	sess, err := cfg.Backend.Open(inst, cfg.Options)
	if err != nil {
		return res, err
	}
	if n, ok := sess.(nvlsReporter); ok {
		res.NVLS = n.NVLS()
	}
	defer func() {
		if cerr := sess.Close(); err == nil && res.Deadlock == nil {
			err = cerr
		}
	}()
	slots := make([][]executor.RankBuffers, l.Slots())
	for i := range slots {
		slots[i] = l.Alloc()
	}
	for it := 0; it < cfg.Warmup; it++ {
		bufs := slots[it%len(slots)]
		if err := cfg.fillInputs(l, bufs, 0); err != nil {
			return res, err
		}
		if lerr := sess.Launch(ctx, bufs); lerr != nil {
			var dl *executor.DeadlockError
			var race *executor.RaceError
			switch {
			case errors.As(lerr, &dl):
				res.Deadlock = &LaunchError{Launch: it, Warmup: true, Err: lerr}
				return res, nil
			case !errors.As(lerr, &race):
				return res, fmt.Errorf("warm-up launch %d: %w", it, lerr)
			}
		}
	}
	for it := 0; it < cfg.Iters; it++ {
		bufs := slots[it%len(slots)]
		if err := cfg.fillInputs(l, bufs, it); err != nil {
			return res, err
		}
		start := time.Now()
		lerr := sess.Launch(ctx, bufs)
		if dt, ok := sess.(deviceTimer); ok {
			res.Elapsed += dt.DeviceTime()
		} else {
			res.Elapsed += time.Since(start)
		}
		var dl *executor.DeadlockError
		var race *executor.RaceError
		switch {
		case errors.As(lerr, &dl):
			res.Deadlock = &LaunchError{Launch: it, Err: lerr}
			return res, nil
		case errors.As(lerr, &race):
			if res.Race == nil {
				res.Race = &LaunchError{Launch: it, Err: lerr}
			}
		case lerr != nil:
			return res, lerr
		}
		if !res.Checked {
			continue
		}
		wrong, err := cfg.Checker.Check(l, bufs, it)
		if err != nil {
			return res, err
		}
		var n uint64
		for _, w := range wrong {
			n += w
		}
		if n > 0 && res.FirstWrong == nil {
			if res.FirstWrong, err = cfg.report(l, inst, bufs, it, wrong); err != nil {
				return res, err
			}
		}
		res.Wrong += n
	}
	return res, nil
}

// fillInputs fills the inputs of launch seq: from the Checker's generator
// table when the outputs are checked (the table serves the checks too),
// in place otherwise (no table to keep).
func (cfg *Config) fillInputs(l *Layout, bufs []executor.RankBuffers, seq int) error {
	if l.Checked() {
		return cfg.Checker.FillInputs(l, bufs, seq)
	}
	l.FillInputs(bufs, seq)
	return nil
}

// report locates the wrong data of launch it: for each rank with wrong
// elements, the first ones and the ops that write them.
func (cfg *Config) report(l *Layout, inst *executor.Instance, bufs []executor.RankBuffers, it int, wrong []uint64) (*WrongReport, error) {
	rep := &WrongReport{Launch: it}
	for r, n := range wrong {
		if n == 0 {
			continue
		}
		es, err := cfg.Checker.Wrong(l, bufs, it, r, cfg.ShowWrong)
		if err != nil {
			return nil, err
		}
		rep.Ranks = append(rep.Ranks, RankWrong{Rank: r, Wrong: n, Elements: withWriters(inst, l, es)})
	}
	return rep, nil
}

// withWriters fills in the ops that write each element of es.
func withWriters(inst *executor.Instance, l *Layout, es []WrongElement) []WrongElement {
	for i := range es {
		e := &es[i]
		e.Writers = Writers(inst, e.Rank, plan.Output, e.Offset)
		if in, ok := l.OutputInInput(e.Rank, e.Offset); ok {
			e.Writers = append(e.Writers, Writers(inst, e.Rank, plan.Input, in)...)
		}
	}
	return es
}

// MaxWriters bounds the ops Writers lists.
const MaxWriters = 4

// Writers lists the ops of inst whose destinations cover byte off of
// rank's buffer bt (at most MaxWriters): local destinations of the
// rank's own ops, remote ones of its peers', and switch destinations
// whose group it is in. Each is "rank R tb T" and the op's description.
func Writers(inst *executor.Instance, rank int, bt plan.BufferType, off uint64) []string {
	var out []string
	covers := func(r executor.Region, owner int) bool {
		return owner == rank && r.Buffer == bt && off >= r.Offset && off-r.Offset < r.Size
	}
	var visit func(r int, tb int, op *executor.OpInstance)
	visit = func(r, tb int, op *executor.OpInstance) {
		for i := range op.Body {
			visit(r, tb, &op.Body[i])
		}
		for i, d := range op.Dst {
			hit := false
			switch plan.DstKind(op.Type, i) {
			case plan.SwitchOperand:
				if d.Switch >= 0 && d.Switch < len(inst.Ranks[r].Switches) {
					g := inst.Ranks[r].Switches[d.Switch]
					for _, m := range g.Ranks {
						hit = hit || (m == rank && g.Buffer == bt && off >= d.Offset && off-d.Offset < d.Size)
					}
				}
			case plan.RemoteOperand:
				hit = covers(d, d.Rank)
			default:
				hit = covers(d, r)
			}
			if hit && len(out) < MaxWriters {
				out = append(out, fmt.Sprintf("rank %d tb %d %s", r, tb, op.Describe()))
				return
			}
		}
	}
	for r := range inst.Ranks {
		for _, tb := range inst.Ranks[r].TBs {
			for i := range tb.Ops {
				visit(r, tb.ID, &tb.Ops[i])
			}
		}
	}
	return out
}
