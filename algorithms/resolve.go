package algorithms

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mscclgo/mscclgo/internal/infile"
	"github.com/mscclgo/mscclgo/starlib"
)

// Resolve finds the script arg names: a .star file on disk, or else the
// bundled algorithm of that name (with or without .star). It returns the
// source to evaluate it from and its name there; the error names arg.
func Resolve(arg string) (starlib.Source, string, error) {
	st, err := os.Stat(arg)
	if err == nil {
		if st.IsDir() {
			return nil, "", fmt.Errorf("%s is a directory, want a .star file", arg)
		}
		return starlib.DirSource(filepath.Dir(arg)), filepath.Base(arg), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		// A symbolic link loop, a directory without permission: the
		// opener names it.
		if err := infile.Check(arg, "a .star script", starlib.MaxScriptBytes); err != nil {
			return nil, "", err
		}
	}
	if !strings.ContainsAny(arg, `/\`) {
		name := strings.TrimSuffix(arg, ".star") + ".star"
		if _, err := FS.Open(name); err == nil {
			return starlib.FSSource(FS, "algorithms"), name, nil
		}
	}
	return nil, "", fmt.Errorf("%s: no such file, and no bundled algorithm of that name (see docs/algorithms.md)", arg)
}
