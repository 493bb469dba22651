package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mscclgo/mscclgo/algorithms"
)

// planSet is the installed plans a communicator chooses from, read once
// when it is created: the directories of MSCCLGO_PLAN_PATH, then the
// default set of `mscclgo install` ($MSCCLGO_CACHE_DIR/default, or
// ~/.cache/mscclgo/default), as `mscclgo select` searches them.
type planSet struct {
	sources []algorithms.Source
	dirs    []string
	err     error // why the set could not be read; every call then falls back
}

// loadPlans reads the plan set. A missing default set is no error (there
// are then no plans); an unreadable directory is, and is kept.
func loadPlans() planSet {
	var dirs []string
	if env := os.Getenv("MSCCLGO_PLAN_PATH"); env != "" {
		dirs = append(dirs, filepath.SplitList(env)...)
	}
	def := ""
	if d := os.Getenv("MSCCLGO_CACHE_DIR"); d != "" {
		def = filepath.Join(d, "default")
	} else if home, err := os.UserHomeDir(); err == nil {
		def = filepath.Join(home, ".cache", "mscclgo", "default")
	}
	if def != "" {
		dirs = append(dirs, def)
	}
	ps := planSet{dirs: dirs}
	for _, d := range dirs {
		idx, err := algorithms.ReadIndex(d)
		if errors.Is(err, algorithms.ErrNoIndex) {
			if d == def {
				continue
			}
			idx, err = algorithms.ScanDir(d)
		}
		if err != nil {
			ps.err = fmt.Errorf("plan directory %s: %w", d, err)
			return ps
		}
		ps.sources = append(ps.sources, algorithms.Source{Dir: d, Index: idx})
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
