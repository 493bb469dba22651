package algorithms

// install.go generates, validates and installs a plan set: the default
// set's jobs, the concurrent validation under a memory budget, and the
// installation itself (its on-disk layout and recovery are in planset.go).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/starlib"
)

// Job is one entry of a plan set: a bundled algorithm and the -D
// parameters of one shape.
type Job struct {
	Algorithm string // file name without .star
	Params    map[string]string
}

// String returns "algorithm (k=v k=v)".
func (j Job) String() string {
	keys := make([]string, 0, len(j.Params))
	for k := range j.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(j.Algorithm)
	if len(keys) > 0 {
		b.WriteString(" (")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%s", k, j.Params[k])
		}
		b.WriteByte(')')
	}
	return b.String()
}

// defaultSetPrefix marks the shapes of the default set in an algorithm's
// header comment: "# default-set: world_size=8 ranks_per_node=8".
const defaultSetPrefix = "# default-set:"

// DefaultSet returns the default plan set: one job per "# default-set:"
// line of every bundled algorithm, in file order.
func DefaultSet() ([]Job, error) {
	names, err := fs.Glob(FS, "*.star")
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for _, name := range names {
		data, err := fs.ReadFile(FS, name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(text, defaultSetPrefix) {
				continue
			}
			job := Job{Algorithm: strings.TrimSuffix(name, ".star"), Params: map[string]string{}}
			for _, kv := range strings.Fields(strings.TrimPrefix(text, defaultSetPrefix)) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("algorithms/%s:%d: %q in %s is not name=value", name, line, kv, defaultSetPrefix)
				}
				job.Params[k] = v
			}
			jobs = append(jobs, job)
		}
	}
	return jobs, nil
}

// InstallOptions configure Install.
type InstallOptions struct {
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
	Progress func(InstallEvent)
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
	// libraries they load (default: FS, the bundled algorithms).
	Algorithms fs.FS
}

// InstallEvent reports the progress of Install.
type InstallEvent struct {
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
func Install(jobs []Job, opts InstallOptions) (*Index, error) {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.DType == 0 {
		opts.DType = executor.Float16
	}
	if opts.MaxCheckBytes == 0 {
		opts.MaxCheckBytes = 1 << 20
	}
	if opts.Algorithms == nil {
		opts.Algorithms = FS
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
		if opts.Backend != nil {
			opts.Workers = 1
		}
	}
	opts.Workers = max(1, min(opts.Workers, len(jobs)))
	if opts.Version == "" && opts.CacheDir != "" && opts.Backend == nil {
		opts.Version = ExecutableVersion()
	}
	note := func(format string, args ...any) {
		if opts.Note != nil {
			opts.Note(fmt.Sprintf(format, args...))
		}
	}
	ps, err := newPlanSet(opts.Dir)
	if err != nil {
		return nil, err
	}
	// Refuse a file at the plan directory (--dir /dev/null) before the
	// lock file is created beside it; checked again under the lock.
	if err := ps.checkReplaceable(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ps.parent, 0o755); err != nil {
		return nil, err
	}
	unlock, err := ps.lock(opts.Context, func() {
		note("waiting for another install into %s to finish (it holds %s)", ps.dir, ps.lockPath())
	})
	if err != nil {
		return nil, err
	}
	defer unlock()
	// A failure to clean up is only noted: the leftovers are removed
	// again next time, and the install itself does not need them gone.
	if rec := ps.recoverLocked(); !rec.Empty() {
		note("%s", rec)
	}
	if err := ps.checkReplaceable(); err != nil {
		return nil, err
	}
	id := newID()
	tmp := ps.path("new", id)
	// Mkdir, not MkdirTemp: the set gets the usual permissions (0755 less
	// the umask), not MkdirTemp's 0700.
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	// interrupted removes the partial set now, so that the error can say
	// so, and returns the error for cause.
	interrupted := func(cause error) error {
		committed = true // removed here, not by the deferred cleanup
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("%w: could not remove the partial plan set %s: %v", cause, tmp, err)
		}
		return fmt.Errorf("%w: removed the partial plan set %s", cause, tmp)
	}

	ctx, cancel := context.WithCancel(opts.Context)
	defer cancel()
	in := &installer{
		opts: opts, dir: tmp, ctx: ctx, checker: harness.NewChecker(),
		budget: newBudget(installBudget),
	}
	if opts.Backend == nil && opts.Version != "" {
		in.cache = validationCache{dir: opts.CacheDir}
	}
	results := make([][]Entry, len(jobs))
	var (
		mu       sync.Mutex
		firstErr error
		done     int
	)
	progress := func(ev InstallEvent) {
		if opts.Progress != nil {
			opts.Progress(ev)
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() {
			for i := range next {
				job := jobs[i]
				mu.Lock()
				progress(InstallEvent{Done: done, Total: len(jobs), Job: job.String()})
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
					progress(InstallEvent{Done: done, Total: len(jobs), Job: job.String(), Finished: true, Plans: status})
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
	if opts.Context.Err() != nil {
		return nil, interrupted(context.Cause(opts.Context))
	}
	if firstErr != nil {
		return nil, firstErr
	}

	idx := &Index{Version: IndexVersion}
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
	if opts.Tune != nil {
		tuned, dropped, err := Tune(idx, tmp, *opts.Tune)
		if err != nil {
			return nil, fmt.Errorf("%w: predicting the plans: %v", ErrInstall, err)
		}
		for _, f := range dropped {
			note("%s: predicted fastest at no size on %s: not installed", f, opts.Tune.Hardware.Name)
			if err := os.Remove(filepath.Join(tmp, f)); err != nil {
				return nil, err
			}
		}
		idx = tuned
	}
	data, err := idx.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, IndexFile), data, 0o644); err != nil {
		return nil, err
	}
	// The last point where a cancellation stops the install: publishing
	// is a few renames, not worth leaving half done.
	if opts.Context.Err() != nil {
		return nil, interrupted(context.Cause(opts.Context))
	}
	committed = true // publish removes what it made if it fails
	old, err := ps.publish(tmp, id)
	if err != nil {
		return nil, err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			note("could not remove the previous plan set %s (the next install removes it): %v", old, err)
		}
	}
	return idx, nil
}

// installer is the state Install's workers share.
type installer struct {
	opts    InstallOptions
	dir     string // the temporary directory receiving the plans
	ctx     context.Context
	checker *harness.Checker
	budget  *budget
	cache   validationCache
}

// job evaluates one job, validates each of its programs (or finds it in
// the validation cache) and writes their plans into in.dir.
func (in *installer) job(job Job) ([]Entry, []PlanStatus, error) {
	opts := in.opts
	file := job.Algorithm + ".star"
	res, err := starlib.Eval(starlib.FSSource(opts.Algorithms, "algorithms"), file, starlib.Options{Defines: job.Params, Context: in.ctx})
	if err != nil {
		return nil, nil, errorDetail(err)
	}
	if len(res.Programs) == 0 {
		return nil, nil, fmt.Errorf("algorithms/%s creates no program", file)
	}
	var entries []Entry
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
		plan, err := executor.Load(text)
		if err != nil {
			return nil, nil, fmt.Errorf("program %q: the plan does not load: %v", prog.Name(), err)
		}
		var sizes []uint64
		if plan.AllToAllV == nil {
			sizes = validationSizes(plan, opts.DType, opts.MaxCheckBytes)
		}
		if len(sizes) == 0 && plan.AllToAllV == nil {
			return nil, nil, fmt.Errorf("program %q: %v", prog.Name(), errNoSize(plan))
		}
		st := PlanStatus{Name: prog.Name(), Sizes: sizes}
		key := ""
		if in.cache.dir != "" {
			key = validationKey(opts.Version, text, opts.DType, sizes)
			st.Cached = !opts.NoCache && in.cache.has(key)
		}
		if !st.Cached && plan.AllToAllV != nil {
			// Variable-size plans run on the CPU backend, with the
			// counts of harness.VarValidationCases (sizes in KiB).
			err := harness.ValidateVar(in.ctx, cpu.New(), plan, executor.Options{DType: opts.DType, Race: true}, validationLaunches)
			if err != nil {
				return nil, nil, fmt.Errorf("program %q: %v", prog.Name(), err)
			}
			_ = in.cache.put(key, validationRecord{
				Format: validationFormat, Plan: prog.Name(), Job: job.String(),
				DType: opts.DType.Name(), Version: opts.Version,
			})
		} else if !st.Cached {
			need := footprint(plan, sizes[len(sizes)-1], opts.DType)
			if err := in.budget.acquire(in.ctx, need); err != nil {
				return nil, nil, err
			}
			err := validateAt(in.ctx, opts.Backend, in.checker, plan, sizes, opts.DType)
			in.budget.release(need)
			if err != nil {
				return nil, nil, fmt.Errorf("program %q: %v", prog.Name(), err)
			}
			// The cache only saves time: a failure to record is not an
			// installation failure.
			_ = in.cache.put(key, validationRecord{
				Format: validationFormat, Plan: prog.Name(), Job: job.String(),
				DType: opts.DType.Name(), Sizes: sizes, Version: opts.Version,
			})
		}
		e := entryOf(plan, spec, job)
		e.File = prog.Name() + ".json"
		if err := os.WriteFile(filepath.Join(in.dir, e.File), text, 0o644); err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
		status = append(status, st)
	}
	return entries, status, nil
}

// footprint estimates the bytes a validation of plan at size allocates,
// with the estimate `mscclgo run` checks its memory budget with: every
// rank's buffers and scratch, the checker's tables, the race detector's
// shadow and the per-op tables.
func footprint(plan *executor.Plan, size uint64, dt executor.ElemType) uint64 {
	m, err := harness.Footprint(plan, size, dt, harness.MemoryOptions{Iters: validationLaunches, Race: true, Tables: true})
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

// entryOf builds the index entry of a validated plan.
func entryOf(plan *executor.Plan, spec *starlib.SpecInfo, job Job) Entry {
	e := Entry{
		Name: plan.Name, Algorithm: path.Base(job.Algorithm), Params: job.Params,
		Collective: plan.Collective, WorldSize: spec.WorldSize, RanksPerNode: spec.RanksPerNode,
		Protocol: plan.Protocol, InPlace: plan.Inplace,
		MinMessageSize: plan.MinMessageSize, MaxMessageSize: plan.MaxMessageSize,
		BufferAlignment: plan.BufferAlignment, Tags: spec.Tags,
	}
	if len(plan.GPUs) > 0 {
		e.InputChunks, e.OutputChunks = plan.GPUs[0].InputChunks, plan.GPUs[0].OutputChunks
	}
	for _, g := range plan.GPUs {
		for _, c := range g.Channels {
			e.NVLS = e.NVLS || c.Type == executor.Switch
		}
	}
	return e
}

// Validate runs plan on backend (nil: the CPU backend, with race
// detection) at three message sizes of its range (preferably at most
// maxBytes, see harness.CheckSizes), two launches each, and checks the
// results.
func Validate(ctx context.Context, backend executor.Backend, plan *executor.Plan, dt executor.ElemType, maxBytes uint64) error {
	sizes := harness.CheckSizes(plan, dt, maxBytes, 3)
	if len(sizes) == 0 {
		return errNoSize(plan)
	}
	return validateAt(ctx, backend, harness.NewChecker(), plan, sizes, dt)
}

func errNoSize(plan *executor.Plan) error {
	return fmt.Errorf("no message size is valid for the plan's range [%d, %d] and chunking", plan.MinMessageSize, plan.MaxMessageSize)
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
func validationSizes(plan *executor.Plan, dt executor.ElemType, maxBytes uint64) []uint64 {
	sizes := harness.CheckSizes(plan, dt, maxBytes, 3)
	for len(sizes) > 1 && footprint(plan, sizes[len(sizes)-1], dt) > maxValidationBytes {
		maxBytes = sizes[len(sizes)-1] / 2
		smaller := harness.CheckSizes(plan, dt, maxBytes, 3)
		if len(smaller) == 0 || smaller[len(smaller)-1] >= sizes[len(sizes)-1] {
			break
		}
		sizes = smaller
	}
	return sizes
}

// validateAt runs plan at each size (ascending), two launches each.
func validateAt(ctx context.Context, backend executor.Backend, checker *harness.Checker, plan *executor.Plan, sizes []uint64, dt executor.ElemType) error {
	if backend == nil {
		backend = cpu.New()
	}
	for _, size := range sizes {
		if err := checker.Run(ctx, backend, plan, size, dt, plan.Inplace, validationLaunches); err != nil {
			return fmt.Errorf("message size %d: %w", size, err)
		}
		// A large run leaves its buffers and scratch as garbage: collect
		// it now, while little is live (so the collection is cheap), rather
		// than let the heap grow to twice the next run's size.
		if footprint(plan, size, dt) >= gcAfterBytes {
			runtime.GC()
		}
	}
	return nil
}

// gcAfterBytes is the footprint of a validation run after which
// validateAt collects garbage.
const gcAfterBytes = 32 << 20
