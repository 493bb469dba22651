//go:build cuda

package main

// cuda_test.go runs the data checks through the cuda-tagged build of the
// library (make nccl NCCL_BACKEND=cuda) on the fake CUDA driver: make
// gpu-test runs it with build/fakecuda first in LD_LIBRARY_PATH and
// MSCCLGO_FAKE_KERNEL_LIB set, as for the gpu/cuda tests.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	cudaOnce sync.Once
	cudaErr  error
)

// cudaLibrary builds the cuda-tagged library once per test binary and
// returns its directory.
func cudaLibrary(t *testing.T) string {
	t.Helper()
	if os.Getenv("MSCCLGO_FAKE_KERNEL_LIB") == "" {
		t.Fatal("MSCCLGO_FAKE_KERNEL_LIB is not set: run this test with make gpu-test (the fake CUDA driver)")
	}
	dir := filepath.Join(artifacts(t), "cuda")
	cudaOnce.Do(func() {
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, goTool, "build", "-tags", "cuda", "-buildmode=c-shared",
			"-ldflags=-extldflags=-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "libnccl.so.2"), ".").CombinedOutput(); err != nil {
			cudaErr = fmt.Errorf("building the cuda-tagged library: %v\n%s", err, out)
		}
	})
	if cudaErr != nil {
		t.Fatal(cudaErr)
	}
	return dir
}

// fakeEnv is the environment of a run of ncclcheck on the cuda-tagged
// library in dir over the fake driver with devices devices, 4 threads per
// block, no fallback and the plans in plans.
func fakeEnv(dir string, devices int, plans string) []string {
	return []string{"LD_LIBRARY_PATH=" + dir + ":" + os.Getenv("LD_LIBRARY_PATH"), fmt.Sprintf("MSCCLGO_FAKECUDA_DEVICES=%d", devices),
		"MSCCLGO_NCCL_THREADS=4", "MSCCLGO_FAKE_KERNEL_LIB=" + os.Getenv("MSCCLGO_FAKE_KERNEL_LIB"),
		"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}
}

// TestDeviceRunsCUDA: four ranks as threads of ncclCommInitAll on four
// fake devices; each call whose plan fits is launched through gpu/cuda on
// the device's legacy stream (the driver synchronises it before checking
// the result).
func TestDeviceRunsCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	plans := bundledPlans(t, map[string]planDef{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	r := runCheck(t, fakeEnv(dir, 4, plans), "data", "4")
	r.succeeded(t)
	const cases = 7
	if n := strings.Count(r.stdout, " ok\n"); n != 4*cases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*cases, r.stdout, r.stderr)
	}
	for _, l := range []string{
		// The device prefers the in-place allreduce plan (devicePlace).
		"rank 3 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_4gpu on gpu, enqueued",
		"rank 0 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, 16384 bytes): plan reducescatter_4gpu on gpu, enqueued",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
}

// TestDeviceCaptureCUDA: ncclcheck capture on the fake CUDA driver: each
// rank's non-blocking stream is captured in global mode (PyTorch's
// default), so any allocation or synchronous copy the library made on its
// own threads without relaxing its capture mode would invalidate the
// capture; the graph is instantiated and replayed with cuGraphLaunch.
func TestDeviceCaptureCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	plans := bundledPlans(t, map[string]planDef{"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}}})
	env := fakeEnv(dir, 4, plans)
	t.Run("after a call", func(t *testing.T) {
		checkCapture(t, runCheck(t, env, "capture", "4"), 4, "gpu", false)
	})
	// The plan's session is set up while a blocking stream captures: a
	// synchronous copy on the legacy stream there would be an implicit
	// dependency on the capture, which CUDA (and the fake) refuses.
	t.Run("first call captured, blocking streams", func(t *testing.T) {
		checkCapture(t, runCheck(t, env, "capturefirst", "4"), 4, "gpu", true)
	})
}

// TestDeviceProcsCUDA: the data checks with one process per rank, as
// torchrun and mpirun run a job: each process is one rank of
// ncclCommInitRank from a unique id that rank 0 hands over through a
// file, sets device rank mod the fake machine's count (the program's
// stand-in cudaSetDevice) and allocates its buffers with cuMemAlloc; the
// library registers them with the peers through IPC handles (memory files
// of another process on the fake driver) and launches each plan on the
// device's stream.
func TestDeviceProcsCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	for _, tc := range []struct {
		n     int
		cases int // data checks per rank
	}{
		{2, 6}, // the split's halves are single ranks: no split case
		{4, 7}, // six, and one on each half of a split
	} {
		t.Run(fmt.Sprintf("%d processes", tc.n), func(t *testing.T) {
			ws := fmt.Sprint(tc.n)
			plans := bundledPlans(t, map[string]planDef{
				"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": ws}},
				"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": ws, "inplace": "false"}},
				"allgather.json":     {"allgather", map[string]string{"world_size": ws}},
				"reducescatter.json": {"reducescatter", map[string]string{"world_size": ws}},
				"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
			})
			idFile := filepath.Join(t.TempDir(), "id")
			runs := make([]run, tc.n)
			var wg sync.WaitGroup
			for rank := range tc.n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runs[rank] = runCheck(t, append(fakeEnv(dir, tc.n, plans),
						fmt.Sprintf("RANK=%d", rank), "WORLD_SIZE="+ws, "NCCLCHECK_ID_FILE="+idFile), "dataprocs")
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for rank, r := range runs {
				for call, code := range r.results() {
					if code != "0" {
						t.Errorf("%s -> %s, want 0", call, code)
					}
				}
				if n := strings.Count(r.stdout, " ok\n"); n != tc.cases || strings.Contains(r.stdout, "WRONG") {
					t.Errorf("rank %d: %d results right, want %d:\n%s\n%s", rank, n, tc.cases, r.stdout, r.stderr)
				}
				for _, l := range []string{
					fmt.Sprintf("rank %d of %d: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_%dgpu on gpu, enqueued", rank, tc.n, tc.n),
					fmt.Sprintf("rank %d of %d: ncclAllReduce count 1024 ncclFloat32 ncclSum (in-place, 4096 bytes): plan allreduce_packet_%dgpu on gpu, enqueued", rank, tc.n, tc.n),
					fmt.Sprintf("rank %d of %d: ncclAllGather count 1024 ncclFloat32 (in-place, %d bytes): plan allgather_%dgpu on gpu, enqueued", rank, tc.n, 4096*tc.n, tc.n),
					fmt.Sprintf("rank %d of %d: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, %d bytes): plan reducescatter_%dgpu on gpu, enqueued", rank, tc.n, 4096*tc.n, tc.n),
				} {
					if !strings.Contains(r.stderr, l) {
						t.Errorf("rank %d: log lacks %q:\n%s", rank, l, r.stderr)
					}
				}
			}
		})
	}
}

// TestDeviceMixedCUDA: TestMixedPlacementDevice on the fake CUDA driver:
// in one call some ranks are in place and the others out of place; the
// copies to the receive buffer and to the staging buffer (cuMemAlloc'd by
// the library, registered with the peers like a caller's buffer) are
// cuMemcpyAsync on the caller's stream. Ranks as threads on four fake
// devices, and as four processes, one device each.
func TestDeviceMixedCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	env := fakeEnv(dir, 4, mixedPlans(t))
	logs := []string{
		"rank 1 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_4gpu is in-place and the call is not: the input is copied first (a device copy on the caller's stream)",
		"rank 0 of 4: ncclAllGather count 1024 ncclFloat32 (in-place, 16384 bytes): plan allgather_oop_4gpu is out-of-place and the call is not: the input is copied to the staging buffer first (a device copy on the caller's stream)",
	}
	t.Run("threads", func(t *testing.T) {
		r := runCheck(t, env, "mixed", "4")
		r.succeeded(t)
		if n := strings.Count(r.stdout, " ok\n"); n != 4*mixedCases || strings.Contains(r.stdout, "WRONG") {
			t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*mixedCases, r.stdout, r.stderr)
		}
		for _, l := range logs {
			if !strings.Contains(r.stderr, l) {
				t.Errorf("log lacks %q:\n%s", l, r.stderr)
			}
		}
	})
	t.Run("processes", func(t *testing.T) {
		runs := runCheckProcs(t, 4, append(env, "NCCLCHECK_DEVICE=cuda"), "mixedprocs")
		if t.Failed() {
			return
		}
		for rank, r := range runs {
			r.succeeded(t)
			if got := strings.Count(r.stdout, " ok\n"); got != mixedCases || strings.Contains(r.stdout, "WRONG") {
				t.Errorf("rank %d: %d results right, want %d:\n%s\n%s", rank, got, mixedCases, r.stdout, r.stderr)
			}
		}
	})
}
