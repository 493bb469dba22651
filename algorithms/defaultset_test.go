package algorithms

import (
	"path/filepath"
	"testing"
)

func TestDefaultSetCoversEveryAlgorithm(t *testing.T) {
	t.Parallel()
	jobs, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		seen[j.Algorithm] = true
	}
	names, _ := filepathGlob()
	for _, n := range names {
		if !seen[n] {
			t.Errorf("algorithms/%s.star has no %q line", n, defaultSetPrefix)
		}
	}
}

func filepathGlob() ([]string, error) {
	matches, err := filepath.Glob("*.star")
	for i, m := range matches {
		matches[i] = m[:len(m)-len(".star")]
	}
	return matches, err
}
