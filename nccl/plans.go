package main

import (
	"errors"
	"fmt"

	"github.com/mscclgo/mscclgo/planset"
)

// planSet is the installed plans a communicator chooses from, read once
// when it is created: the directories of MSCCLGO_PLAN_PATH, then the
// default set of `mscclgo install` ($MSCCLGO_CACHE_DIR/default, or
// ~/.cache/mscclgo/default), as `mscclgo select` searches them.
type planSet struct {
	sources []planset.Source
	dirs    []string
	err     error // why the set could not be read; every call then falls back
}

// loadPlans reads the plan set. A missing default set is no error (there
// are then no plans); an unreadable directory is, and is kept.
func loadPlans() planSet {
	def, err := planset.DefaultDir()
	if err != nil {
		return planSet{err: err}
	}
	ps := planSet{dirs: planset.SearchPath(nil, def)}
	ps.sources, ps.err = planset.OpenSources(ps.dirs, def)
	if errors.Is(ps.err, planset.ErrNoIndex) {
		// Nothing installed and no other directory: no plans, every
		// call falls back.
		ps.err = nil
	}
	return ps
}

// describe is the set as the log shows it.
func (ps planSet) describe() string {
	if ps.err != nil {
		return "unreadable: " + ps.err.Error()
	}
	n := 0
	for _, s := range ps.sources {
		n += len(s.Index.Plans)
	}
	return fmt.Sprintf("of %d plans in %d directories %v", n, len(ps.sources), ps.dirs)
}
