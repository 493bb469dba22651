package harness

// run.go is the one runner of the package, Run, and its loop for one
// process: for each message size, lay out, instantiate, check the launch
// and the memory budget, then fill, launch and check every launch, and
// return what happened as values for the caller to print. What a Config
// says picks the rest: Counts binds an alltoallv plan to a counts matrix
// instead of sizes (varrun.go), Rank runs one rank of a job of one
// process per rank (rank.go, varrank.go), Strict makes the first problem
// the error.

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

// Config is a run of one plan: at one or more message sizes, or bound to
// one counts matrix; in one process, or as one rank of many; its
// problems reported as results, or (Strict) as the error.
type Config struct {
	// Backend runs the plan in one process (unused with Rank).
	Backend executor.Backend
	Plan    *plan.Plan
	// Sizes are the message sizes, in bytes, in the order they run.
	Sizes []uint64
	// Counts, instead of Sizes, binds Plan, an alltoallv plan, to this
	// counts matrix (elements of DType): one result, whose Size is the
	// bytes sent in all, its data the bytes of FillVar checked byte by
	// byte (RankWrong.Mismatch). Sweep, InPlace, Fill, SplitMask,
	// Memory, KeepGoing and ShowWrong do not apply.
	Counts *executor.Counts
	// Rank, if set, runs only this process's rank of a job of one
	// process per rank (rank.go): Backend is not used.
	Rank *RankRun
	// Strict makes the first problem of a size the run's error, a
	// *SizeError, instead of a result: a race (the launch's error), a
	// deadlock, wrong data ("launch 1: rank 2 has 3 wrong elements"; with
	// Counts, "launch 1: " and the *VarMismatch), a rank's failure. The
	// launches of a size stop at the first race or wrong data. It is the
	// check of a plan (mscclgo install, synth, tests).
	Strict bool
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
	// Opened, if set, is called once a size's session is open, before
	// its first launch, with the result so far (Size, Layout, Instance).
	Opened func(SizeResult)
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
// the first ones (Config.ShowWrong) with the ops that write them; in a
// run bound to counts, how many bytes, and the first (Mismatch).
type RankWrong struct {
	Rank     int
	Wrong    uint64
	Elements []WrongElement
	Mismatch *VarMismatch
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

// Run runs cfg.Plan as cfg says and returns the result of each size that
// ran or was skipped (one result for a run bound to Counts). It stops
// after a deadlock, a rank's failure and, without KeepGoing, after a
// size with wrong data (in one process). The error is a *SizeError (a
// size the plan rejects outside a sweep, a launch that failed other than
// by a deadlock or a race, a session that would not open, an exchange
// between ranks that failed, a Strict run's first problem), a
// *BudgetError, or an error of the configuration or of the plan.
func Run(ctx context.Context, cfg Config) ([]SizeResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Counts != nil {
		return cfg.runCounts(ctx)
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
		res := SizeResult{Size: size, Layout: l, Instance: inst, Checked: l.Checked()}
		if cfg.Rank != nil {
			res, err = cfg.runRankSize(ctx, i, res)
		} else {
			res, err = cfg.runSize(ctx, res)
		}
		if err != nil {
			return out, &SizeError{Size: size, Err: err}
		}
		res.Stopped = cfg.Rank == nil && res.Wrong > 0 && !cfg.KeepGoing && i < len(cfg.Sizes)-1
		out = cfg.done(out, res)
		if err := cfg.strict(res); err != nil {
			return out, err
		}
		if res.Deadlock != nil || res.Stopped || len(res.Failures) > 0 {
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
	case cfg.Counts != nil && len(cfg.Sizes) > 0:
		return fmt.Errorf("harness: %d message sizes and a counts matrix: a run has one or the other", len(cfg.Sizes))
	case cfg.Rank == nil && cfg.Backend == nil:
		return errors.New("harness: no backend")
	case cfg.Rank != nil && (cfg.Rank.Group == nil || cfg.Rank.Open == nil):
		return errors.New("harness: a rank run needs a group and a way to open the rank's session")
	}
	cfg.Options.DType = cfg.DType
	if cfg.ShowWrong <= 0 {
		cfg.ShowWrong = DefaultShowWrong
	}
	if cfg.Checker == nil {
		cfg.Checker = NewChecker()
	}
	return nil
}

// strict is, in a Strict run, res's first problem as the run's error.
func (cfg *Config) strict(res SizeResult) error {
	if !cfg.Strict {
		return nil
	}
	// at names the launch in a run bound to counts, as its checks do.
	at := func(le *LaunchError) error {
		if cfg.Counts != nil {
			return fmt.Errorf("launch %d: %w", le.Launch, le.Err)
		}
		return le.Err
	}
	var err error
	switch w := res.FirstWrong; {
	case res.Race != nil: // found before its launch's outputs are checked
		err = at(res.Race)
	case res.Deadlock != nil:
		err = at(res.Deadlock)
	case w != nil && w.Ranks[0].Mismatch != nil:
		err = fmt.Errorf("launch %d: %w", w.Launch, w.Ranks[0].Mismatch)
	case w != nil:
		err = fmt.Errorf("launch %d: rank %d has %d wrong elements", w.Launch, w.Ranks[0].Rank, w.Ranks[0].Wrong)
	case len(res.Failures) > 0:
		f := res.Failures[0]
		err = fmt.Errorf("rank %d, launch %d: %s", f.Rank, f.Launch, f.Err)
	default:
		return nil
	}
	return &SizeError{Size: res.Size, Err: err}
}

// opened hands res, a size whose session is open, to cfg.Opened.
func (cfg *Config) opened(res SizeResult) {
	if cfg.Opened != nil {
		cfg.Opened(res)
	}
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

// runSize runs the launches of one size in one process: fill, launch,
// check. The inputs and the expected results come from the Checker's
// tables, which are built once for the largest size and reused.
func (cfg *Config) runSize(ctx context.Context, res SizeResult) (_ SizeResult, err error) {
	l, inst := res.Layout, res.Instance
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
	cfg.opened(res)
	for it := 0; it < cfg.Warmup; it++ {
		bufs := slots[it%len(slots)]
		if err := cfg.fillInputs(l, bufs, 0); err != nil {
			return res, err
		}
		if lerr := sess.Launch(ctx, bufs); lerr != nil {
			switch deadlock, race := classify(lerr); {
			case deadlock:
				res.Deadlock = &LaunchError{Launch: it, Warmup: true, Err: lerr}
				return res, nil
			case !race:
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
		res.Elapsed += took(sess, start)
		switch deadlock, race := classify(lerr); {
		case deadlock:
			res.Deadlock = &LaunchError{Launch: it, Err: lerr}
			return res, nil
		case race:
			if res.Race == nil {
				res.Race = &LaunchError{Launch: it, Err: lerr}
			}
		case lerr != nil:
			return res, lerr
		}
		if res.Checked {
			if err := cfg.check(&res, bufs, it); err != nil {
				return res, err
			}
		}
		if cfg.Strict && (res.Race != nil || res.FirstWrong != nil) {
			break
		}
	}
	return res, nil
}

// classify says whether err, a launch's error, is a deadlock or a race.
func classify(err error) (deadlock, race bool) {
	var dl *executor.DeadlockError
	var re *executor.RaceError
	return errors.As(err, &dl), errors.As(err, &re)
}

// took is the time of sess's launch that started at start: the device's
// own, where the session measures it, or else the wall-clock time.
func took(sess any, start time.Time) time.Duration {
	if dt, ok := sess.(deviceTimer); ok {
		return dt.DeviceTime()
	}
	return time.Since(start)
}

// check compares the outputs of launch it with the expected results and
// adds its wrong elements to res, locating the first launch's.
func (cfg *Config) check(res *SizeResult, bufs []executor.RankBuffers, it int) error {
	wrong, err := cfg.Checker.Check(res.Layout, bufs, it)
	if err != nil {
		return err
	}
	var n uint64
	for _, w := range wrong {
		n += w
	}
	if n > 0 && res.FirstWrong == nil {
		if res.FirstWrong, err = cfg.report(res.Layout, res.Instance, bufs, it, wrong); err != nil {
			return err
		}
	}
	res.Wrong += n
	return nil
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
