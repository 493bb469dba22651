package install

// install.go generates, validates and installs a plan set: the default
// set's jobs, the concurrent validation under a memory budget, and the
// installation itself (its on-disk layout and recovery are in planset.go).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/mscclgo/mscclgo/algorithms"
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/planset"
	"github.com/mscclgo/mscclgo/starlib"
)

// Options configure Install.
type Options struct {
	// Dir is the directory that receives the plans and the index. It is
	// replaced only when every plan was generated and validated, in one
	// atomic step: Dir becomes a symbolic link to a sibling directory
	// .NAME.set-ID holding the set (see planset.go). Dir may be missing,
	// an empty directory, a plan set an earlier Install wrote (a link, or
	// a plain directory with an index.json) or another link; anything else
	// is an error.
	Dir string
	// Note, if set, receives one-line notes: that Install waits for
	// another install into Dir to finish, what it cleaned up after an
	// interrupted install.
	Note func(string)
	// Progress, if set, is called when a job starts and when it has been
	// validated (or found in the validation cache), one call at a time.
	Progress func(Event)
	// Context cancels the installation.
	Context context.Context
	// DType is the element type of the validation runs (default float16,
	// the executor_test.py default).
	DType executor.ElemType
	// MaxCheckBytes is the message size up to which the validation sizes
	// are preferred (default 1 MiB); see harness.CheckSizes.
	MaxCheckBytes uint64
	// Backend runs the validation (default: the CPU backend, with race
	// detection). Any executor backend works: `install --backend gpu`
	// validates every plan on the GPU it will run on.
	Backend executor.Backend
	// CacheDir is the validation cache: a plan whose bytes were validated
	// by this build of mscclgo, with the same element type and sizes, is
	// not validated again. Empty: no cache. Only validation on the CPU
	// backend (Backend nil) is cached.
	CacheDir string
	// NoCache validates every plan even when the cache records it; the
	// results are still recorded.
	NoCache bool
	// Tune, if set, predicts every plan on a hardware profile, records
	// the curves in the index and sets each plan's size range where it
	// is predicted fastest (see Tune); plans fastest nowhere are left
	// out. Nil installs the ranges the plans declare.
	Tune *TuneOptions
	// Version identifies this build in cache keys (default:
	// ExecutableVersion(); if that is empty the cache is not used).
	Version string
	// Workers bounds the jobs validated at once (default GOMAXPROCS, and
	// 1 for a Backend other than the CPU one). Validations also share a
	// memory budget, so that large plans run one at a time.
	Workers int
	// Algorithms holds the algorithm files jobs name (NAME.star) and the
	// libraries they load (default: algorithms.FS, the bundled algorithms).
	Algorithms fs.FS
}

// Event reports the progress of Install.
type Event struct {
	// Done is the number of jobs finished, Total the number of jobs.
	Done, Total int
	// Job is the job that started or finished.
	Job string
	// Finished is false when the job starts, true when all its plans have
	// been validated.
	Finished bool
	// Plans are the finished job's plans.
	Plans []PlanStatus
}

// PlanStatus is the validation of one plan of a finished job.
type PlanStatus struct {
	// Name is the plan's name.
	Name string
	// Sizes are the message sizes it is validated at.
	Sizes []uint64
	// Cached is set when the validation cache recorded the plan as
	// validated, so that it was not run again.
	Cached bool
}

// ErrInstall wraps the failure of one job.
var ErrInstall = errors.New("install failed")

// installBudget bounds the estimated bytes (buffers and scratch of every
// rank) of the validations running at once; a validation larger than the
// budget runs alone.
const installBudget = 160 << 20

// Install generates every job's plan, validates it (the plan loads, and
// runs on the CPU backend with correct results at three message sizes of
// its range, without deadlock or race), then replaces opts.Dir with the
// plans and their index. Jobs run concurrently (opts.Workers); plans the
// validation cache (opts.CacheDir) records as validated are not run
// again. On failure the error names the job and opts.Dir is left
// untouched.
//
// Installs into one directory are serialised by a lock file beside it
// (.NAME.lock); one waits for another. Before it starts, Install cleans up
// after an interrupted install (see RecoverPlanSet). When opts.Context is
// cancelled, Install removes its partial plan set and returns an error
// that wraps context.Cause(opts.Context) and names what it removed.
//
// The steps: take the lock (planSet.lockForInstall), stage an empty
// candidate set beside opts.Dir (planSet.stage), fill it with the
// validated plans (validateJobs) and their index (writeIndex), and only
// then swap it in (planSet.swap).
func Install(jobs []algorithms.Job, opts Options) (*planset.Index, error) {
	opts = opts.withDefaults(len(jobs))
	ps, err := newPlanSet(opts.Dir)
	if err != nil {
		return nil, err
	}
	unlock, err := ps.lockForInstall(opts.Context, opts.note)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cand, err := ps.stage()
	if err != nil {
		return nil, err
	}
	defer cand.discard()

	results, err := validateJobs(jobs, opts, cand.dir)
	if opts.Context.Err() != nil {
		return nil, cand.interrupted(context.Cause(opts.Context))
	}
	if err != nil {
		return nil, err
	}
	idx, err := writeIndex(jobs, results, opts, cand.dir)
	if err != nil {
		return nil, err
	}
	// The last point where a cancellation stops the install: publishing
	// is a few renames, not worth leaving half done.
	if opts.Context.Err() != nil {
		return nil, cand.interrupted(context.Cause(opts.Context))
	}
	if err := ps.swap(cand, opts.note); err != nil {
		return nil, err
	}
	return idx, nil
}

// withDefaults fills in what the caller of Install left zero, for an
// install of njobs jobs.
func (o Options) withDefaults(njobs int) Options {
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.DType == 0 {
		o.DType = executor.Float16
	}
	if o.MaxCheckBytes == 0 {
		o.MaxCheckBytes = 1 << 20
	}
	if o.Algorithms == nil {
		o.Algorithms = algorithms.FS
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
		if o.Backend != nil {
			o.Workers = 1
		}
	}
	o.Workers = max(1, min(o.Workers, njobs))
	if o.Version == "" && o.CacheDir != "" && o.Backend == nil {
		o.Version = ExecutableVersion()
	}
	return o
}

// note passes a formatted note to o.Note, if set.
func (o Options) note(format string, args ...any) {
	if o.Note != nil {
		o.Note(fmt.Sprintf(format, args...))
	}
}

// validateJobs generates and validates every job's plans on o.Workers
// workers, writing the plans into dir, and returns each job's index
// entries, in job order. The first job to fail stops the others; its
// error, wrapping ErrInstall, names it.
func validateJobs(jobs []algorithms.Job, o Options, dir string) ([][]planset.Entry, error) {
	ctx, cancel := context.WithCancel(o.Context)
	defer cancel()
	in := &installer{
		opts: o, dir: dir, ctx: ctx, checker: harness.NewChecker(),
		budget: newBudget(installBudget),
	}
	if o.Backend == nil && o.Version != "" {
		in.cache = validationCache{dir: o.CacheDir}
	}
	results := make([][]planset.Entry, len(jobs))
	var (
		mu       sync.Mutex
		firstErr error
		done     int
	)
	progress := func(ev Event) {
		if o.Progress != nil {
			o.Progress(ev)
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			for i := range next {
				job := jobs[i]
				mu.Lock()
				progress(Event{Done: done, Total: len(jobs), Job: job.String()})
				mu.Unlock()
				entries, status, err := in.job(job)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("%w: %s: %v", ErrInstall, job, err)
						cancel()
					}
				} else {
					results[i] = entries
					done++
					progress(Event{Done: done, Total: len(jobs), Job: job.String(), Finished: true, Plans: status})
				}
				mu.Unlock()
			}
		})
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return results, firstErr
}

// writeIndex completes the candidate set in dir: the index of the
// validated plans (results, per job), which refuses two jobs writing the
// same plan file, tuned when o.Tune is set (removing the plans fastest
// nowhere), written to dir's IndexFile.
func writeIndex(jobs []algorithms.Job, results [][]planset.Entry, o Options, dir string) (*planset.Index, error) {
	idx := &planset.Index{Version: planset.IndexVersion}
	files := map[string]string{}
	for i, entries := range results {
		for _, e := range entries {
			if prev, dup := files[e.File]; dup {
				return nil, fmt.Errorf("%w: %s and %s both produce %s: give them different names", ErrInstall, prev, jobs[i], e.File)
			}
			files[e.File] = jobs[i].String()
			idx.Plans = append(idx.Plans, e)
		}
	}
	if o.Tune != nil {
		tuned, dropped, err := Tune(idx, dir, *o.Tune)
		if err != nil {
			return nil, fmt.Errorf("%w: predicting the plans: %v", ErrInstall, err)
		}
		for _, f := range dropped {
			o.note("%s: predicted fastest at no size on %s: not installed", f, o.Tune.Hardware.Name)
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				return nil, err
			}
		}
		idx = tuned
	}
	data, err := idx.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, planset.IndexFile), data, 0o644); err != nil {
		return nil, err
	}
	return idx, nil
}

// installer is the state validateJobs's workers share.
type installer struct {
	opts    Options
	dir     string // the temporary directory receiving the plans
	ctx     context.Context
	checker *harness.Checker
	budget  *budget
	cache   validationCache
}

// job evaluates one job, validates each of its programs (or finds it in
// the validation cache) and writes their plans into in.dir.
func (in *installer) job(job algorithms.Job) ([]planset.Entry, []PlanStatus, error) {
	opts := in.opts
	file := job.Algorithm + ".star"
	res, err := starlib.Eval(starlib.FSSource(opts.Algorithms, "algorithms"), file, starlib.Options{Defines: job.Params, Context: in.ctx})
	if err != nil {
		return nil, nil, errorDetail(err)
	}
	if len(res.Programs) == 0 {
		return nil, nil, fmt.Errorf("algorithms/%s creates no program", file)
	}
	var entries []planset.Entry
	var status []PlanStatus
	for _, prog := range res.Programs {
		text, err := prog.Plan()
		if err != nil {
			return nil, nil, errorDetail(err)
		}
		spec := prog.Spec()
		if spec == nil {
			return nil, nil, fmt.Errorf("program %q: bundled algorithms must be created with CollectiveProgram.from_spec(AlgoSpec(...)) so the index knows their shape", prog.Name())
		}
		if strings.ContainsAny(prog.Name(), `/\`) || prog.Name() == "" {
			return nil, nil, fmt.Errorf("program name %q cannot be a file name", prog.Name())
		}
		p, err := plan.Load(text)
		if err != nil {
			return nil, nil, fmt.Errorf("program %q: the plan does not load: %v", prog.Name(), err)
		}
		st, err := in.validate(job, prog.Name(), p, text)
		if err != nil {
			return nil, nil, err
		}
		e := entryOf(p, spec, job)
		e.File = prog.Name() + ".json"
		if err := os.WriteFile(filepath.Join(in.dir, e.File), text, 0o644); err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
		status = append(status, st)
	}
	return entries, status, nil
}

// validate runs one plan of job, compiled to text (or finds it in the
// validation cache): at its validation sizes, within the memory budget,
// or, for a variable-size plan, at harness.VarValidationCases. It
// records a successful run in the cache.
func (in *installer) validate(job algorithms.Job, name string, p *plan.Plan, text []byte) (PlanStatus, error) {
	opts := in.opts
	var sizes []uint64
	if p.AllToAllV == nil {
		sizes = validationSizes(p, opts.DType, opts.MaxCheckBytes)
	}
	if len(sizes) == 0 && p.AllToAllV == nil {
		return PlanStatus{}, fmt.Errorf("program %q: %v", name, errNoSize(p))
	}
	st := PlanStatus{Name: name, Sizes: sizes}
	key := ""
	if in.cache.dir != "" {
		key = validationKey(opts.Version, text, opts.DType, sizes)
		st.Cached = !opts.NoCache && in.cache.has(key)
	}
	if !st.Cached && p.AllToAllV != nil {
		// Variable-size plans run on the CPU backend, with the
		// counts of harness.VarValidationCases (sizes in KiB).
		err := harness.ValidateVar(in.ctx, cpu.New(), p, executor.Options{DType: opts.DType, Race: true}, validationLaunches)
		if err != nil {
			return PlanStatus{}, fmt.Errorf("program %q: %v", name, err)
		}
		_ = in.cache.put(key, validationRecord{
			Format: validationFormat, Plan: name, Job: job.String(),
			DType: opts.DType.Name(), Version: opts.Version,
		})
	} else if !st.Cached {
		need := footprint(p, sizes[len(sizes)-1], opts.DType)
		if err := in.budget.acquire(in.ctx, need); err != nil {
			return PlanStatus{}, err
		}
		err := validateAt(in.ctx, opts.Backend, in.checker, p, sizes, opts.DType)
		in.budget.release(need)
		if err != nil {
			return PlanStatus{}, fmt.Errorf("program %q: %v", name, err)
		}
		// The cache only saves time: a failure to record is not an
		// installation failure.
		_ = in.cache.put(key, validationRecord{
			Format: validationFormat, Plan: name, Job: job.String(),
			DType: opts.DType.Name(), Sizes: sizes, Version: opts.Version,
		})
	}
	return st, nil
}

// footprint estimates the bytes a validation of plan at size allocates,
// with the estimate `mscclgo run` checks its memory budget with: every
// rank's buffers and scratch, the checker's tables, the race detector's
// shadow and the per-op tables.
func footprint(p *plan.Plan, size uint64, dt executor.ElemType) uint64 {
	m, err := harness.Footprint(p, size, dt, harness.MemoryOptions{Iters: validationLaunches, Race: true, Tables: true})
	if err != nil {
		return 0
	}
	return m.Total()
}

// budget is a counting semaphore over bytes. A request larger than the
// whole budget waits until nothing else holds any, then runs alone.
type budget struct {
	mu    sync.Mutex
	cond  sync.Cond
	total uint64
	held  uint64
}

func newBudget(total uint64) *budget {
	b := &budget{total: total}
	b.cond.L = &b.mu
	return b
}

func (b *budget) clamp(n uint64) uint64 { return min(max(n, 1), b.total) }

// acquire waits until n bytes are free, or ctx is done.
func (b *budget) acquire(ctx context.Context, n uint64) error {
	n = b.clamp(n)
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.held+n > b.total {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	b.held += n
	return nil
}

func (b *budget) release(n uint64) {
	n = b.clamp(n)
	b.mu.Lock()
	b.held -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

func errorDetail(err error) error {
	var se *starlib.Error
	if errors.As(err, &se) {
		return errors.New(strings.TrimSpace(se.Detail()))
	}
	return err
}

// entryOf builds the index entry of a validated plan of job.
func entryOf(p *plan.Plan, spec *starlib.SpecInfo, job algorithms.Job) planset.Entry {
	e := planset.NewEntry(p, spec.WorldSize, spec.RanksPerNode)
	e.Algorithm, e.Params, e.Tags = path.Base(job.Algorithm), job.Params, spec.Tags
	return e
}

// Validate runs plan on backend (nil: the CPU backend, with race
// detection) at three message sizes of its range (preferably at most
// maxBytes, see harness.CheckSizes), two launches each, and checks the
// results.
func Validate(ctx context.Context, backend executor.Backend, p *plan.Plan, dt executor.ElemType, maxBytes uint64) error {
	sizes := harness.CheckSizes(p, dt, maxBytes, 3)
	if len(sizes) == 0 {
		return errNoSize(p)
	}
	return validateAt(ctx, backend, harness.NewChecker(), p, sizes, dt)
}

func errNoSize(p *plan.Plan) error {
	return fmt.Errorf("no message size is valid for the plan's range [%d, %d] and chunking", p.MinMessageSize, p.MaxMessageSize)
}

// maxValidationBytes bounds the estimated memory of one validation run:
// a plan whose run at the top validation size would need more is
// validated at the largest sizes of its range below that which fit. The
// sizes stay inside the plan's own range, and the code a run goes through
// does not change with the size; only the memory does (a 32-rank LL plan
// needs 10 MiB of scratch per rank at 1 MiB).
const maxValidationBytes = 320 << 20

// validationSizes returns the sizes plan is validated at: three inside
// its range up to maxBytes (harness.CheckSizes), with maxBytes halved
// while the largest would need more than maxValidationBytes.
func validationSizes(p *plan.Plan, dt executor.ElemType, maxBytes uint64) []uint64 {
	sizes := harness.CheckSizes(p, dt, maxBytes, 3)
	for len(sizes) > 1 && footprint(p, sizes[len(sizes)-1], dt) > maxValidationBytes {
		maxBytes = sizes[len(sizes)-1] / 2
		smaller := harness.CheckSizes(p, dt, maxBytes, 3)
		if len(smaller) == 0 || smaller[len(smaller)-1] >= sizes[len(sizes)-1] {
			break
		}
		sizes = smaller
	}
	return sizes
}

// validateAt runs plan at each size (ascending), two launches each.
func validateAt(ctx context.Context, backend executor.Backend, checker *harness.Checker, p *plan.Plan, sizes []uint64, dt executor.ElemType) error {
	if backend == nil {
		backend = cpu.New()
	}
	for _, size := range sizes {
		_, err := harness.Run(ctx, harness.Config{
			Backend: backend, Plan: p, Sizes: []uint64{size}, DType: dt, InPlace: p.Inplace, Iters: validationLaunches,
			Options: executor.Options{Race: true}, Checker: checker, Strict: true,
		})
		if err != nil {
			return fmt.Errorf("message size %d: %w", size, sizeCause(err))
		}
		// A large run leaves its buffers and scratch as garbage: collect
		// it now, while little is live (so the collection is cheap), rather
		// than let the heap grow to twice the next run's size.
		if footprint(p, size, dt) >= gcAfterBytes {
			runtime.GC()
		}
	}
	return nil
}

// sizeCause is err, an error of a run at one message size, without the
// size a *harness.SizeError names (the caller names it).
func sizeCause(err error) error {
	var se *harness.SizeError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// gcAfterBytes is the footprint of a validation run after which
// validateAt collects garbage.
const gcAfterBytes = 32 << 20
