package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGPUWithoutDevice checks --backend gpu where the CUDA worker is
// missing, or cannot start the CUDA driver (no device: the worker's CUDA
// library exits as the process starts): a mscclgo: message that says so
// and names the backends that do run.
func TestGPUWithoutDevice(t *testing.T) {
	dir := t.TempDir()
	worker := filepath.Join(dir, "fake-worker")
	// A stand-in for mscclgo-cuda on a machine without a GPU: gorgonia's
	// cu prints this and exits as it initialises.
	writeFile(t, worker, "#!/bin/sh\necho 'Error in initialization, please refer to \"https://docs.nvidia.com/cuda\" for details NoDevice' >&2\nexit 1\n")
	if err := os.Chmod(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "algo.star"), oneProgram)
	runnableHere := runnable()
	if !strings.Contains(runnableHere, "cpu") {
		t.Fatalf("runnable() = %q, want cpu among them", runnableHere)
	}
	for _, tt := range []struct {
		name, worker, stderr string
	}{
		{"no device", worker, "mscclgo: --backend gpu: no CUDA device found: mscclgo-cuda (" + worker + ") could not start the CUDA driver: " +
			"Error in initialization, please refer to \"https://docs.nvidia.com/cuda\" for details NoDevice; the backends that run here: " + runnableHere + "\n"},
		{"no worker", filepath.Join(dir, "absent"), "mscclgo-cuda: not found at " + filepath.Join(dir, "absent") + " ($MSCCLGO_CUDA_WORKER) (`make gpu` builds it in the checkout's bin/, `make install` puts it beside the installed mscclgo; or set MSCCLGO_CUDA_WORKER); the backends that run here: " + runnableHere + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MSCCLGO_CUDA_WORKER", tt.worker)
			code, stdout, stderr := run(t, dir, "run", "$DIR/algo.star", "-s", "4K", "--backend", "gpu")
			if code != ExitError || stdout != "" || !strings.HasPrefix(stderr, "mscclgo: --backend gpu: ") || !strings.HasSuffix(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr\n%s\nwant exit %d and stderr ending\n%s", code, stdout, stderr, ExitError, tt.stderr)
			}
		})
	}
}
