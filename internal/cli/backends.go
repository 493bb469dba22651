package cli

// backends.go holds the backends `mscclgo run` can use: the CPU reference
// backend, the emulated GPU (the g++-built kernel, in every cgo build),
// the CUDA backend (only in the cuda-tagged worker binary, see
// backends_cuda.go), and the hand-over of `--backend gpu` from the
// default binary to that worker.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/executor/cpu"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
	"github.com/mscclgo/mscclgo/harness"
	"github.com/mscclgo/mscclgo/runconfig"
)

// runBackend is a backend this binary can run plans on; new opens it
// under the run-time settings of the command's flags (settings.go:
// --threads in one process). device, for the GPU backends, is the driver
// side of a rank session's configuration in a multi-process run
// (runmp.go) on device number device (the settings make the rest). memory
// says what the backend allocates in host memory besides the buffers,
// for the memory estimate of a run (DeviceCopies).
type runBackend struct {
	name   string
	new    func(s runconfig.Settings) executor.Backend
	device func(device int) runconfig.Device
	memory harness.MemoryOptions
}

// workerName is the cuda-tagged binary that runs --backend gpu.
const workerName = "mscclgo-cuda"

// workerEnv marks a process started as the worker, so that a worker
// without the CUDA backend does not hand over again.
const workerEnv = "MSCCLGO_WORKER"

// knownBackends are the --backend names mscclgo knows, built in or not.
var knownBackends = []string{"cpu", "gpu", "gpu-emu"}

// runBackends returns the backends built into this binary, best first:
// the default --backend is the first.
func runBackends() []runBackend {
	bs := cudaBackends()
	bs = append(bs, runBackend{name: "cpu", new: func(runconfig.Settings) executor.Backend { return cpu.New() }})
	if emu.Available {
		// Rank sessions export their memory to same-host peers.
		dev := func(int) runconfig.Device { return runconfig.Device{Name: "gpu-emu", Open: emu.OpenIPC} }
		// The device memory is host memory.
		mem := harness.MemoryOptions{DeviceCopies: true}
		bs = append(bs, runBackend{name: "gpu-emu", device: dev, memory: mem, new: func(s runconfig.Settings) executor.Backend {
			return gpu.New(s.GPUConfig(runconfig.Device{Name: "gpu-emu", Open: emu.Open}))
		}})
	}
	return bs
}

// builtIn reports whether this binary has the named backend.
func builtIn(name string) bool {
	for _, b := range runBackends() {
		if b.name == name {
			return true
		}
	}
	return false
}

// probeTimeout bounds the worker's answer to `version`.
const probeTimeout = 30 * time.Second

// runnable lists the backends built into this binary: "cpu, gpu-emu".
func runnable() string {
	var names []string
	for _, b := range runBackends() {
		names = append(names, b.name)
	}
	return strings.Join(names, ", ")
}

// moduleLine is the go.mod line of this repository: a checkout's root
// has it.
const moduleLine = "module github.com/mscclgo/mscclgo"

// workerPlaces are where findWorker looks for the CUDA worker:
// $MSCCLGO_CUDA_WORKER alone when it is set; else beside this
// executable, in the bin/ of the checkout the working directory is in
// (where `make gpu` builds it, so that a `go install`ed mscclgo finds it
// too), and then on PATH. Each is a
// description and the path ("" when there is none to look at).
func workerPlaces(getenv func(string) string, exe, wd string) [][2]string {
	if p := getenv("MSCCLGO_CUDA_WORKER"); p != "" {
		return [][2]string{{"$MSCCLGO_CUDA_WORKER", p}} // the user's choice, alone
	}
	var places [][2]string
	if exe != "" {
		places = append(places, [2]string{"beside this executable", filepath.Join(filepath.Dir(exe), workerName)})
	}
	for dir := wd; dir != ""; {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), moduleLine+"\n") {
			places = append(places, [2]string{"in the checkout's bin/", filepath.Join(dir, "bin", workerName)})
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return places
}

// findWorker returns the path of the CUDA worker (workerPlaces, then
// PATH), or an error naming every place it looked.
func findWorker() (string, error) {
	exe, _ := os.Executable()
	wd, _ := os.Getwd()
	return findWorkerIn(workerPlaces(os.Getenv, exe, wd))
}

// findWorkerIn is findWorker over places.
func findWorkerIn(places [][2]string) (string, error) {
	var looked []string
	for _, pl := range places {
		if st, err := os.Stat(pl[1]); err == nil && !st.IsDir() {
			return pl[1], nil
		}
		looked = append(looked, fmt.Sprintf("%s (%s)", pl[1], pl[0]))
	}
	if len(places) == 1 && places[0][0] == "$MSCCLGO_CUDA_WORKER" {
		return "", fmt.Errorf("not found at %s", looked[0])
	}
	if p, err := exec.LookPath(workerName); err == nil {
		return p, nil
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("not found in %s", strings.Join(looked, ", "))
}

// handOver runs this command line in the CUDA worker, with the same
// standard streams, and returns its exit status.
func handOver(d *deps) error {
	const notHere = "--backend gpu: not available in this build: the CUDA backend runs in the " + workerName +
		" binary (`make gpu` builds it where the CUDA toolkit is installed)"
	if os.Getenv(workerEnv) != "" {
		return errors.New(notHere + "; this process was started as that worker and has no CUDA backend either")
	}
	path, err := findWorker()
	if err != nil {
		return fmt.Errorf("%s; %s: %v (`make gpu` builds it in the checkout's bin/, `make install` puts it beside the installed mscclgo; or set MSCCLGO_CUDA_WORKER); the backends that run here: %s", notHere, workerName, err, runnable())
	}
	// The worker's CUDA library initialises the driver as the process
	// starts and exits with its own words when there is no device: ask it
	// for its version first, and say so in ours.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	probe := exec.CommandContext(ctx, path, "version")
	probe.Env = append(os.Environ(), workerEnv+"=1")
	if out, err := probe.CombinedOutput(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) && ctx.Err() == nil {
			return fmt.Errorf("--backend gpu: starting %s: %w; the backends that run here: %s", path, err, runnable())
		}
		why := strings.TrimSpace(string(out))
		if ctx.Err() != nil {
			why = fmt.Sprintf("no answer within %v", probeTimeout)
		} else if i := strings.IndexByte(why, '\n'); i >= 0 {
			why = why[:i]
		}
		if why == "" {
			why = err.Error()
		}
		return fmt.Errorf("--backend gpu: no CUDA device found: %s (%s) could not start the CUDA driver: %s; the backends that run here: %s", workerName, path, why, runnable())
	}
	cmd := exec.Command(path, d.args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = d.stdin, d.stdout, d.stderr
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return &reportedError{code: ee.ExitCode()}
	}
	return fmt.Errorf("--backend gpu: starting %s: %w", path, err)
}
