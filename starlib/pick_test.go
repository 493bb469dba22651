package starlib

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPickAndPlanPaths evaluates a script of two programs: Pick takes one
// by name or both, and PlanPaths puts them in a directory, refusing an
// out that is not one (ErrNotADirectory).
func TestPickAndPlanPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := "for n in ['a', 'b']:\n    CollectiveProgram(n, AllReduce(2, 1, True), 2)\n"
	if err := os.WriteFile(filepath.Join(dir, "two.star"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Eval(DirSource(dir), "two.star", Options{})
	if err != nil {
		t.Fatal(err)
	}
	one, err := res.Pick("b", "two.star")
	if err != nil || len(one) != 1 || one[0].Name() != "b" {
		t.Fatalf("Pick(b) = %v, %v", one, err)
	}
	if _, err := res.Pick("c", "two.star"); err == nil || !strings.Contains(err.Error(), "it creates: a, b") {
		t.Errorf("Pick(c) = %v", err)
	}
	if _, err := (&Result{}).Pick("", "none.star"); !errors.Is(err, ErrNoPrograms) {
		t.Errorf("Pick of no programs = %v, want ErrNoPrograms", err)
	}
	paths, err := PlanPaths(dir, res.Programs)
	if want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")}; err != nil || !slices.Equal(paths, want) {
		t.Errorf("PlanPaths(dir) = %v, %v; want %v", paths, err, want)
	}
	if _, err := PlanPaths(filepath.Join(dir, "x.json"), res.Programs); !errors.Is(err, ErrNotADirectory) {
		t.Errorf("PlanPaths(file) = %v, want ErrNotADirectory", err)
	}
	if paths, err := PlanPaths(filepath.Join(dir, "x.json"), one); err != nil || !slices.Equal(paths, []string{filepath.Join(dir, "x.json")}) {
		t.Errorf("PlanPaths(file, one program) = %v, %v", paths, err)
	}
}
