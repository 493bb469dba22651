// This file holds the verification every program passes before synth
// hands it out: evaluated, checked, run on the CPU backend at several
// sizes (results compared, races and deadlocks detected) and modelled.

package synth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
	"github.com/mscclgo/mscclgo/starlib"
)

// memSource serves one .star text.
type memSource struct {
	name string
	text []byte
}

func (m memSource) ReadFile(name string) ([]byte, error) {
	if path.Clean(name) == m.name {
		return m.text, nil
	}
	return nil, fs.ErrNotExist
}

func (m memSource) Display(name string) string { return name }

// Compiled is one program of a file, compiled and loaded.
type Compiled struct {
	Name string
	Text []byte // the plan JSON
	Plan *plan.Plan
}

// compile evaluates a .star text and returns every program's plan, each
// checked as mscclgo check checks it (an error, or a warning of what the
// MSCCL++ executor cannot run, fails).
func compile(ctx context.Context, name string, text []byte, defines map[string]string) ([]Compiled, error) {
	return compileChecked(ctx, name, text, defines, true)
}

// compileChecked is compile; without check it only loads the plans (the
// format's errors, not the executor's warnings).
func compileChecked(ctx context.Context, name string, text []byte, defines map[string]string, check bool) ([]Compiled, error) {
	res, err := starlib.Eval(memSource{name: name, text: text}, name, starlib.Options{Defines: defines, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	var out []Compiled
	for _, p := range res.Programs {
		data, err := p.Plan()
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", p.Name(), err)
		}
		if check {
			// Load and check in one walk: a problem, error or warning,
			// fails.
			pl, errs := plan.LoadChecked(data)
			if len(errs) > 0 {
				problems := make([]string, len(errs))
				for i, pr := range errs {
					problems[i] = pr.Error()
				}
				return nil, &CheckError{Program: p.Name(), Problems: problems}
			}
			out = append(out, Compiled{Name: p.Name(), Text: data, Plan: pl})
			continue
		}
		pl, err := plan.Load(data)
		if err != nil {
			if isLimit(err.Error()) {
				return nil, &CheckError{Program: p.Name(), Problems: []string{err.Error()}}
			}
			return nil, fmt.Errorf("load %s: %w", p.Name(), err)
		}
		out = append(out, Compiled{Name: p.Name(), Text: data, Plan: pl})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("evaluate: no program")
	}
	return out, nil
}

// CheckError is a plan mscclgo check finds problems in.
type CheckError struct {
	Program  string
	Problems []string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("check %s: %s", e.Program, strings.Join(e.Problems, "; "))
}

// opLimit reports whether the problems are the executor's limits of a
// thread block (ops, channels): the chunk count or the trees' fan-out,
// not the program's logic, are then too large.
func (e *CheckError) opLimit() bool {
	for _, p := range e.Problems {
		if !isLimit(p) {
			return false
		}
	}
	return true
}

func isLimit(p string) bool {
	return strings.Contains(p, "a thread block holds at most")
}

// runChecked runs p on the CPU backend at up to n sizes of its range no
// larger than maxBytes, two launches each, checking every result, with
// race detection at every size whose instance differs in shape from
// those already raced: an instance whose pipelines run once (every op
// once, at offsets that scale with the size) has the same happens-before
// order at every size, so the race detector runs at the first such size
// only; sizes with pipelines of several iterations are raced each.
func runChecked(ctx context.Context, p *plan.Plan, maxBytes uint64, n int) ([]uint64, error) {
	sizes, err := checkSizes(p, maxBytes, n)
	if err != nil {
		return nil, err
	}
	return sizes, runAt(ctx, p, sizes)
}

// checkSizes returns up to n sizes of p's range no larger than maxBytes
// that p runs at (harness.CheckSizes).
func checkSizes(p *plan.Plan, maxBytes uint64, n int) ([]uint64, error) {
	sizes := harness.CheckSizes(p, executor.Float32, maxBytes, n)
	if len(sizes) == 0 {
		return nil, fmt.Errorf("%s: no message size of its range [%d, %d] is valid", p.Name, p.MinMessageSize, p.MaxMessageSize)
	}
	return sizes, nil
}

// runAt is runChecked at the given sizes.
func runAt(ctx context.Context, p *plan.Plan, sizes []uint64) error {
	dt := executor.Float32
	checker := harness.NewChecker()
	// The watchdog's backstop (no thread block progressing for this
	// long) grows with the machine: thousands of thread blocks on two
	// loaded cores stall for seconds between their goroutines' turns.
	be := &patient{Backend: cpu.New(), timeout: time.Second * time.Duration(max(1, len(p.GPUs)/8))}
	for _, s := range sizes {
		_, err := harness.Run(ctx, harness.Config{
			Backend: be, Plan: p, Sizes: []uint64{s}, DType: dt, InPlace: p.Inplace, Iters: 2,
			Options: executor.Options{Race: true}, Checker: checker, Strict: true,
		})
		var se *harness.SizeError
		if errors.As(err, &se) {
			err = se.Err // the message names the size
		}
		if err != nil {
			return fmt.Errorf("%s: run on the CPU backend at %d bytes: %w", p.Name, s, err)
		}
	}
	return nil
}

// patient is a backend whose sessions wait timeout without progress
// before they report a deadlock (cycles of waits are reported at once),
// with race detection on but for a single-pass instance (singlePass)
// after the first.
type patient struct {
	executor.Backend
	timeout time.Duration
	raced   bool // a single-pass instance has been raced
}

func (b *patient) Open(inst *executor.Instance, opts executor.Options) (executor.Session, error) {
	opts.DeadlockTimeout = b.timeout
	if opts.Race && singlePass(inst) {
		opts.Race = !b.raced
		b.raced = true
	}
	return b.Backend.Open(inst, opts)
}

// singlePass reports whether every pipeline of inst runs one iteration:
// its ops, their order and their synchronisation are then the same at
// every size, and only the regions' offsets and sizes scale.
func singlePass(inst *executor.Instance) bool {
	for _, r := range inst.Ranks {
		for _, tb := range r.TBs {
			for _, op := range tb.Ops {
				if op.Iterations > 1 {
					return false
				}
			}
		}
	}
	return true
}
