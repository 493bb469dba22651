package algorithms

// defaultset.go reads the shapes of the default plan set from the
// bundled algorithms' header comments ("# default-set:" lines).

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"sort"
	"strings"
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
