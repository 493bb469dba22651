package algorithms

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
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

func TestInstallIsAtomic(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "plans")
	good := []Job{{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "2"}}}
	idx, err := Install(good, InstallOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Plans) != 1 {
		t.Fatalf("index = %+v", idx)
	}
	read, err := ReadIndex(dir)
	if err != nil || len(read.Plans) != 1 || read.Plans[0].WorldSize != 2 {
		t.Fatalf("ReadIndex = %+v, %v", read, err)
	}
	if _, err := os.Stat(filepath.Join(dir, read.Plans[0].File)); err != nil {
		t.Fatal(err)
	}
	// A failing job names itself and leaves the installed set as it was.
	bad := append(good, Job{Algorithm: "allreduce_packet", Params: map[string]string{"world_size": "2", "ranks_per_node": "3"}})
	_, err = Install(bad, InstallOptions{Dir: dir})
	if !errors.Is(err, ErrInstall) {
		t.Fatalf("got %v, want ErrInstall", err)
	}
	again, err := ReadIndex(dir)
	if err != nil || len(again.Plans) != 1 {
		t.Fatalf("after a failed install: %+v, %v", again, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("temporary directories left behind: %v", entries)
	}
}

// TestInstallDefaultSet installs the whole default set, as `mscclgo
// install` does on a fresh clone, and runs every installed plan again
// across its message range.
func TestInstallDefaultSet(t *testing.T) {
	if testing.Short() {
		t.Skip("the full default set takes a while; run without -short")
	}
	t.Parallel()
	jobs, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "default")
	idx, err := Install(jobs, InstallOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != len(idx.Plans)+1 {
		t.Errorf("%d files for %d index entries", len(files), len(idx.Plans))
	}
	for _, e := range idx.Plans {
		plan, err := executor.LoadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatalf("%s: %v", e.File, err)
		}
		for _, size := range executor.CheckSizes(plan, executor.Float32, 1<<20, 3) {
			if err := executor.RunChecked(context.Background(), cpu.New(), plan, size, executor.Float32, plan.Inplace, 1); err != nil {
				t.Errorf("%s at %d bytes (float32): %v", e.File, size, err)
			}
		}
	}
}
