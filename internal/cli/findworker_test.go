package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindWorker: the CUDA worker is found by $MSCCLGO_CUDA_WORKER
// (alone when set), beside the executable, or in the bin/ of the checkout that the working
// directory is in (a `go install`ed mscclgo after `make gpu`); when it is
// nowhere, the error names every place looked at.
func TestFindWorker(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), moduleLine+"\n\ngo 1.26\n")
	sub := filepath.Join(root, "algorithms", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "go.mod"), "module example.com/other\n")
	built := filepath.Join(root, "bin", workerName)
	exeDir := t.TempDir()
	beside := filepath.Join(exeDir, workerName)
	env := filepath.Join(t.TempDir(), "my-worker")
	noEnv := func(string) string { return "" }
	withEnv := func(k string) string {
		if k == "MSCCLGO_CUDA_WORKER" {
			return env
		}
		return ""
	}
	exe := filepath.Join(exeDir, "mscclgo")
	find := func(getenv func(string) string, wd string) (string, error) {
		return findWorkerIn(workerPlaces(getenv, exe, wd))
	}
	// $MSCCLGO_CUDA_WORKER names the only place.
	if _, err := find(withEnv, sub); err == nil || err.Error() != "not found at "+env+" ($MSCCLGO_CUDA_WORKER)" {
		t.Errorf("$MSCCLGO_CUDA_WORKER absent: %v", err)
	}
	// Nowhere: every place is named.
	_, err := find(noEnv, sub)
	for _, w := range []string{beside + " (beside this executable)", built + " (in the checkout's bin/)", "PATH"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
	// Outside a checkout, no bin/ is looked at.
	if _, err := find(noEnv, other); err == nil || strings.Contains(err.Error(), "checkout") {
		t.Errorf("outside a checkout: %v", err)
	}
	if err := os.Mkdir(filepath.Dir(built), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, built, "#!/bin/sh\n")
	if got, err := find(noEnv, sub); got != built || err != nil {
		t.Errorf("from %s: %q, %v; want %s", sub, got, err, built)
	}
	writeFile(t, beside, "#!/bin/sh\n")
	if got, err := find(noEnv, sub); got != beside || err != nil {
		t.Errorf("beside the executable: %q, %v; want %s", got, err, beside)
	}
	writeFile(t, env, "#!/bin/sh\n")
	if got, err := find(withEnv, sub); got != env || err != nil {
		t.Errorf("$MSCCLGO_CUDA_WORKER: %q, %v; want %s", got, err, env)
	}
}
