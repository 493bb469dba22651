package main

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/plan"
)

// planFiles loads each plan file once, for the calls that run it.
type planFiles struct {
	mu    sync.Mutex
	plans map[string]*plan.Plan
}

// load returns the plan in file, loading it on first use.
func (f *planFiles) load(file string) (*plan.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.plans[file]; p != nil {
		return p, nil
	}
	p, err := executor.LoadFile(file)
	if err != nil {
		if !strings.Contains(err.Error(), file) {
			err = fmt.Errorf("%s: %w", file, err)
		}
		return nil, err
	}
	if f.plans == nil {
		f.plans = map[string]*plan.Plan{}
	}
	f.plans[file] = p
	return p, nil
}

// instantiate loads the plan in file and lays it out for one call: size
// bytes of dt, in place or not. On host memory (host) the plan's size
// range does not bound the size: the plan was chosen by its cost on the
// CPU backend (planset.Request.Host), and its chunking, checked by
// Instantiate, is what makes it correct at a size.
//
// coll and ranks are what the plan set's index lists file for: a plan of
// another collective or rank count is a corrupt install, named as such.
func (f *planFiles) instantiate(file string, coll collective, ranks int, size uint64, dt executor.ElemType, inPlace, host bool) (*executor.Instance, *executor.BufferLayout, error) {
	plan, err := f.load(file)
	if err != nil {
		return nil, nil, err
	}
	if plan.Collective != coll.planName() || len(plan.GPUs) != ranks {
		return nil, nil, errorf(resultInvalidUsage, "corrupt plan set: %s holds a plan of %s on %d ranks (%s), where the set's index lists it for %s on %d: the file was changed after mscclgo install wrote it; install the set again, or remove the file", file, plan.Collective, len(plan.GPUs), plan.Name, coll.planName(), ranks)
	}
	if host && (plan.MinMessageSize > 0 || plan.MaxMessageSize < math.MaxUint64) {
		wide := *plan
		wide.MinMessageSize, wide.MaxMessageSize = 0, math.MaxUint64
		plan = &wide
	}
	layout, err := executor.PlanLayout(plan, size, dt, inPlace)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	inst, err := executor.Instantiate(plan, layout.Sizes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	return inst, layout, nil
}
