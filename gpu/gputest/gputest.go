// Package gputest holds the differential harness of the GPU backends: it
// runs a plan on a backend under test and on the CPU reference backend
// with the same inputs and compares every byte of every rank's buffers
// after every launch. The emulated device's tests and the cuda-tagged
// tests share it.
package gputest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/plan"
)

// Case is one differential run.
type Case struct {
	Plan    *plan.Plan
	Size    uint64
	DType   executor.ElemType
	InPlace bool
	LL8     bool
	// Launches per session (LL flags and persistent counters advance).
	Launches int
	// Timeout is the no-progress limit of both backends.
	Timeout time.Duration
	// DeadlockTimeout, when not 0, is the backend under test's limit on
	// a first launch that the CPU backend has already reported
	// deadlocked: its session is reopened with it, since only its report
	// is left to check (a test need not wait out Timeout twice).
	DeadlockTimeout time.Duration
	// SkipRacy runs nothing for a plan whose first launch the CPU
	// backend, with race detection, does not complete cleanly (a race,
	// or a deadlock that may hide one): Run returns Racy. For
	// ThreadSanitizer runs of the kernel, where such a plan is a report.
	SkipRacy bool
	// Reduce is the sessions' reduction (executor.Options.Reduce).
	Reduce executor.ReduceOp
	// Inputs, when not nil, fills rank's input of launch it instead of
	// the reference fill (special values: signed zeros, NaNs, overflow).
	Inputs func(rank, it int, in []byte)
}

func (c Case) String() string {
	ll := "LL16"
	if c.LL8 {
		ll = "LL8"
	}
	red := ""
	if c.Reduce != executor.ReduceSum {
		red = " " + c.Reduce.String()
	}
	return fmt.Sprintf("size %d %s%s %s in-place %v", c.Size, c.DType.Name(), red, ll, c.InPlace)
}

// fill fills the inputs of launch it: c.Inputs, or the reference fill.
func (c Case) fill(l *harness.Layout, bufs []executor.RankBuffers, it int) {
	if c.Inputs == nil {
		l.FillInputs(bufs, it)
		return
	}
	for r := range bufs {
		c.Inputs(r, it, bufs[r].Input)
	}
}

// Outcome says how a differential run ended.
type Outcome int

// The outcomes.
const (
	// Same: both backends completed with identical buffers.
	Same Outcome = iota
	// Deadlock: both backends reported a deadlock.
	Deadlock
	// Racy: the outputs differ and the CPU backend's race detection
	// reports a data race: the plan has no defined result.
	Racy
)

// Run runs c on the backend under test and on the CPU backend and
// returns Same, Deadlock or Racy, or an error describing the first
// difference.
func Run(ctx context.Context, test executor.Backend, c Case) (Outcome, error) {
	l, err := harness.PlanLayout(c.Plan, c.Size, c.DType, c.InPlace)
	if err != nil {
		return 0, err
	}
	inst, err := executor.Instantiate(c.Plan, l.Sizes)
	if err != nil {
		return 0, err
	}
	if c.SkipRacy && !clean(ctx, c, l, inst) {
		return Racy, nil
	}
	opts := executor.Options{DType: c.DType, Reduce: c.Reduce, LL8: c.LL8, DeadlockTimeout: c.Timeout}
	ref, err := cpu.New().Open(inst, opts)
	if err != nil {
		return 0, fmt.Errorf("cpu: %w", err)
	}
	defer ref.Close()
	got, err := test.Open(inst, opts)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", test.Name(), err)
	}
	defer got.Close()
	refBufs, gotBufs := l.Alloc(), l.Alloc()
	n := max(c.Launches, 1)
	for it := 0; it < n; it++ {
		c.fill(l, refBufs, it)
		c.fill(l, gotBufs, it)
		rerr := ref.Launch(ctx, refBufs)
		var rd, gd *executor.DeadlockError
		if it == 0 && c.DeadlockTimeout > 0 && errors.As(rerr, &rd) {
			got.Close()
			short := opts
			short.DeadlockTimeout = c.DeadlockTimeout
			if got, err = test.Open(inst, short); err != nil {
				return 0, fmt.Errorf("%s: %w", test.Name(), err)
			}
			defer got.Close()
		}
		gerr := got.Launch(ctx, gotBufs)
		switch {
		case errors.As(rerr, &rd):
			if !errors.As(gerr, &gd) {
				return 0, fmt.Errorf("launch %d: cpu reports %v\n%s: %v", it, firstLine(rerr), test.Name(), gerr)
			}
			if len(gd.Blocked) == 0 {
				return 0, fmt.Errorf("launch %d: %s reports a deadlock without blocked thread blocks", it, test.Name())
			}
			return Deadlock, nil
		case rerr != nil:
			return 0, fmt.Errorf("launch %d: cpu: %w", it, rerr)
		case gerr != nil:
			return 0, fmt.Errorf("launch %d: %s: %w", it, test.Name(), gerr)
		}
		if diff := compare(refBufs, gotBufs); diff != "" {
			if racy(ctx, c, l, inst) {
				return Racy, nil
			}
			return 0, fmt.Errorf("launch %d: %s differs from cpu: %s", it, test.Name(), diff)
		}
	}
	return Same, nil
}

// raceRun runs the first launch of c on the CPU backend with race
// detection and returns its error.
func raceRun(ctx context.Context, c Case, l *harness.Layout, inst *executor.Instance) error {
	s, err := cpu.New().Open(inst, executor.Options{DType: c.DType, Reduce: c.Reduce, LL8: c.LL8, Race: true, DeadlockTimeout: c.Timeout})
	if err != nil {
		return err
	}
	defer s.Close()
	bufs := l.Alloc()
	c.fill(l, bufs, 0)
	return s.Launch(ctx, bufs)
}

// clean reports whether the first launch of c completes on the CPU
// backend with race detection and no error.
func clean(ctx context.Context, c Case, l *harness.Layout, inst *executor.Instance) bool {
	return raceRun(ctx, c, l, inst) == nil
}

// racy reports whether the CPU backend's race detection finds a race in
// the first launch of c.
func racy(ctx context.Context, c Case, l *harness.Layout, inst *executor.Instance) bool {
	var re *executor.RaceError
	return errors.As(raceRun(ctx, c, l, inst), &re)
}

// compare returns where two buffer sets first differ, or "".
func compare(a, b []executor.RankBuffers) string {
	for r := range a {
		for _, x := range []struct {
			name string
			p, q []byte
		}{{"input", a[r].Input, b[r].Input}, {"output", a[r].Output, b[r].Output}} {
			if bytes.Equal(x.p, x.q) {
				continue
			}
			i := 0
			for i < len(x.p) && i < len(x.q) && x.p[i] == x.q[i] {
				i++
			}
			count := 0
			for j := range min(len(x.p), len(x.q)) {
				if x.p[j] != x.q[j] {
					count++
				}
			}
			return fmt.Sprintf("rank %d %s: %d bytes differ, the first at byte %d (cpu %#02x, got %#02x)",
				r, x.name, count, i, at(x.p, i), at(x.q, i))
		}
	}
	return ""
}

func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

func firstLine(err error) string {
	s := err.Error()
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
