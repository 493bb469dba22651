package algorithms

// list.go describes the bundled algorithms for `mscclgo list` and shell
// completion: their names, the parameters they declare and their shapes
// in the default plan set. It only reads FS.

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/mscclgo/mscclgo/starlib"
)

// Info describes one bundled algorithm.
type Info struct {
	// Name is the algorithm's name: its file name without .star, as
	// `mscclgo eval NAME` takes it.
	Name string
	// Summary is the first sentence of the file's header comment, without
	// the leading "NAME:".
	Summary string
	// Params are the parameters the algorithm declares with param(), in
	// declaration order, with their defaults.
	Params []starlib.Param
	// Shapes are the algorithm's "# default-set:" lines: the -D
	// parameters of each of its plans in the default plan set.
	Shapes []Job
}

// Names returns the names of the bundled algorithms (*.star at the root
// of FS, without the extension), sorted.
func Names() ([]string, error) {
	files, err := fs.Glob(FS, "*.star")
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(f, ".star")
	}
	return names, nil
}

// List describes every bundled algorithm, sorted by name. Each algorithm
// is evaluated with its default parameters to learn what it declares.
func List() ([]Info, error) {
	names, err := Names()
	if err != nil {
		return nil, err
	}
	jobs, err := DefaultSet()
	if err != nil {
		return nil, err
	}
	src := starlib.FSSource(FS, "algorithms")
	infos := make([]Info, 0, len(names))
	for _, name := range names {
		file := name + ".star"
		data, err := fs.ReadFile(FS, file)
		if err != nil {
			return nil, err
		}
		res, err := starlib.Eval(src, file, starlib.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join("algorithms", file), err)
		}
		info := Info{Name: name, Summary: summary(name, string(data)), Params: res.Params}
		for _, j := range jobs {
			if j.Algorithm == name {
				info.Shapes = append(info.Shapes, j)
			}
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// summary returns the first sentence of the header comment of a .star
// file (the leading "#" lines up to the first empty comment line), with a
// leading "NAME:" removed.
func summary(name, text string) string {
	var words []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if line == "" {
			break
		}
		words = append(words, strings.Fields(line)...)
	}
	s := strings.Join(words, " ")
	s = strings.TrimSpace(strings.TrimPrefix(s, name+":"))
	// The first sentence: up to a period followed by a space or the end.
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return s
}
