package algorithms

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
	"sort"
	"strings"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
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
	// replaced only when every plan was generated and validated.
	Dir string
	// Progress, if set, is called before each job and once at the end.
	Progress func(done, total int, job string)
	// Context cancels the installation.
	Context context.Context
	// DType is the element type of the validation runs (default float16,
	// the executor_test.py default).
	DType executor.ElemType
	// MaxCheckBytes bounds the message sizes validated on the CPU backend
	// (default 1 MiB).
	MaxCheckBytes uint64
	// Backend runs the validation (default: the CPU backend, with race
	// detection). Any executor backend works: `install --backend gpu`
	// validates every plan on the GPU it will run on.
	Backend executor.Backend
}

// ErrInstall wraps the failure of one job.
var ErrInstall = errors.New("install failed")

// Install generates every job's plan, validates it (the plan loads, and
// runs on the CPU backend with correct results at three message sizes of
// its range, without deadlock or race), then replaces opts.Dir with the
// plans and their index. On failure the error names the job and opts.Dir
// is left untouched.
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
	parent := filepath.Dir(filepath.Clean(opts.Dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(opts.Dir)+".new-")
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			os.RemoveAll(tmp)
		}
	}()
	idx := &Index{Version: IndexVersion}
	files := map[string]string{}
	for i, job := range jobs {
		if opts.Progress != nil {
			opts.Progress(i, len(jobs), job.String())
		}
		if err := opts.Context.Err(); err != nil {
			return nil, err
		}
		entries, err := installJob(job, tmp, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInstall, job, err)
		}
		for _, e := range entries {
			if prev, dup := files[e.File]; dup {
				return nil, fmt.Errorf("%w: %s and %s both produce %s: give them different names", ErrInstall, prev, job, e.File)
			}
			files[e.File] = job.String()
			idx.Plans = append(idx.Plans, e)
		}
	}
	data, err := idx.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, IndexFile), data, 0o644); err != nil {
		return nil, err
	}
	if err := replaceDir(opts.Dir, tmp); err != nil {
		return nil, err
	}
	committed = true
	if opts.Progress != nil {
		opts.Progress(len(jobs), len(jobs), "")
	}
	return idx, nil
}

// replaceDir moves the directory tmp to dir, replacing dir.
func replaceDir(dir, tmp string) error {
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// installJob evaluates one job, validates each of its programs and writes
// their plans into dir.
func installJob(job Job, dir string, opts InstallOptions) ([]Entry, error) {
	file := job.Algorithm + ".star"
	res, err := starlib.Eval(starlib.FSSource(FS, "algorithms"), file, starlib.Options{Defines: job.Params, Context: opts.Context})
	if err != nil {
		return nil, errorDetail(err)
	}
	if len(res.Programs) == 0 {
		return nil, fmt.Errorf("algorithms/%s creates no program", file)
	}
	var entries []Entry
	for _, prog := range res.Programs {
		text, err := prog.Plan()
		if err != nil {
			return nil, errorDetail(err)
		}
		spec := prog.Spec()
		if spec == nil {
			return nil, fmt.Errorf("program %q: bundled algorithms must be created with CollectiveProgram.from_spec(AlgoSpec(...)) so the index knows their shape", prog.Name())
		}
		plan, err := executor.Load(text)
		if err != nil {
			return nil, fmt.Errorf("program %q: the plan does not load: %v", prog.Name(), err)
		}
		if err := Validate(opts.Context, opts.Backend, plan, opts.DType, opts.MaxCheckBytes); err != nil {
			return nil, fmt.Errorf("program %q: %v", prog.Name(), err)
		}
		e := entryOf(plan, spec, job)
		e.File = prog.Name() + ".json"
		if strings.ContainsAny(prog.Name(), `/\`) || prog.Name() == "" {
			return nil, fmt.Errorf("program name %q cannot be a file name", prog.Name())
		}
		if err := os.WriteFile(filepath.Join(dir, e.File), text, 0o644); err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
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
// detection) at three message sizes of its range (at most maxBytes) and
// checks the results.
func Validate(ctx context.Context, backend executor.Backend, plan *executor.Plan, dt executor.ElemType, maxBytes uint64) error {
	if backend == nil {
		backend = cpu.New()
	}
	sizes := executor.CheckSizes(plan, dt, maxBytes, 3)
	if len(sizes) == 0 {
		return fmt.Errorf("no message size is valid for the plan's range [%d, %d] and chunking", plan.MinMessageSize, plan.MaxMessageSize)
	}
	for _, size := range sizes {
		if err := executor.RunChecked(ctx, backend, plan, size, dt, plan.Inplace, 2); err != nil {
			return fmt.Errorf("message size %d: %w", size, err)
		}
	}
	return nil
}
