package planset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is where `mscclgo install` writes the default plan set:
// $MSCCLGO_CACHE_DIR/default, or ~/.cache/mscclgo/default.
func DefaultDir() (string, error) {
	if d := os.Getenv("MSCCLGO_CACHE_DIR"); d != "" {
		return filepath.Join(d, "default"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the plan directory: set MSCCLGO_CACHE_DIR (%w)", err)
	}
	return filepath.Join(home, ".cache", "mscclgo", "default"), nil
}

// SearchPath returns the plan directories to search, in order: first,
// then those of $MSCCLGO_PLAN_PATH, then def, the default set.
func SearchPath(first []string, def string) []string {
	dirs := append([]string(nil), first...)
	if env := os.Getenv("MSCCLGO_PLAN_PATH"); env != "" {
		dirs = append(dirs, filepath.SplitList(env)...)
	}
	return append(dirs, def)
}

// OpenSources reads the index of each directory of dirs (SearchPath's),
// whose default set is def. A user directory without an index has its
// plans scanned; a default set that was never installed is skipped when
// other directories were found, and is ErrNoIndex otherwise.
func OpenSources(dirs []string, def string) ([]Source, error) {
	var sources []Source
	for _, d := range dirs {
		idx, err := ReadIndex(d)
		if errors.Is(err, ErrNoIndex) {
			if d != def {
				idx, err = ScanDir(d)
			} else if len(sources) > 0 {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		sources = append(sources, Source{Dir: d, Index: idx})
	}
	return sources, nil
}
