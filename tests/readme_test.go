package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayout checks the README's Layout table against the tree:
// every directory with Go files (the root as main.go) has a row of its
// own, and every row names a path that exists.
func TestReadmeLayout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md: no ## Layout section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	rows := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if rows[p] {
			t.Errorf("README.md: two Layout rows for %s", m[1])
		}
		rows[p] = true
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
			t.Errorf("README.md: the Layout row %s names no path of the tree: %v", m[1], err)
		}
	}
	if len(rows) < 10 {
		t.Fatalf("README.md: found only %d Layout rows: is the pattern broken?", len(rows))
	}
	pkgs := map[string]bool{}
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			pkgs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range pkgs {
		name := p
		if p == "." {
			name = "main.go"
		}
		if !rows[name] {
			t.Errorf("README.md: the Layout table has no row for package %s", name)
		}
	}
}
