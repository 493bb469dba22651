//go:build cuda

package main

// cuda_test.go runs the data checks through the cuda-tagged build of the
// library (make nccl NCCL_BACKEND=cuda) on the fake CUDA driver: make
// gpu-test runs it with build/fakecuda first in LD_LIBRARY_PATH and
// MSCCLGO_FAKE_KERNEL_LIB set, as for the gpu/cuda tests.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDeviceRunsCUDA: four ranks as threads of ncclCommInitAll on four
// fake devices; each call whose plan fits is launched through gpu/cuda on
// the device's legacy stream (the driver synchronises it before checking
// the result).
func TestDeviceRunsCUDA(t *testing.T) {
	if os.Getenv("MSCCLGO_FAKE_KERNEL_LIB") == "" {
		t.Fatal("MSCCLGO_FAKE_KERNEL_LIB is not set: run this test with make gpu-test (the fake CUDA driver)")
	}
	dir := filepath.Join(artifacts(t), "cuda")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goTool, "build", "-tags", "cuda", "-buildmode=c-shared",
		"-ldflags=-extldflags=-Wl,-soname,libnccl.so.2", "-o", filepath.Join(dir, "libnccl.so.2"), ".").CombinedOutput(); err != nil {
		t.Fatalf("building the cuda-tagged library: %v\n%s", err, out)
	}
	type def = struct {
		algorithm string
		defines   map[string]string
	}
	plans := bundledPlans(t, map[string]def{
		"allreduce_in.json":  {"allreduce_packet", map[string]string{"world_size": "4"}},
		"allreduce_out.json": {"allreduce_packet", map[string]string{"world_size": "4", "inplace": "false"}},
		"allgather.json":     {"allgather", map[string]string{"world_size": "4"}},
		"reducescatter.json": {"reducescatter", map[string]string{"world_size": "4"}},
		"allreduce_2.json":   {"allreduce_packet", map[string]string{"world_size": "2"}},
	})
	r := runCheck(t, []string{"LD_LIBRARY_PATH=" + dir + ":" + os.Getenv("LD_LIBRARY_PATH"), "MSCCLGO_FAKECUDA_DEVICES=4", "MSCCLGO_NCCL_THREADS=4",
		"MSCCLGO_FAKE_KERNEL_LIB=" + os.Getenv("MSCCLGO_FAKE_KERNEL_LIB"),
		"MSCCLGO_NCCL_FALLBACK=none", "MSCCLGO_PLAN_PATH=" + plans}, "data", "4")
	for call, code := range r.results() {
		if code != "0" {
			t.Errorf("%s -> %s, want 0", call, code)
		}
	}
	const cases = 7
	if n := strings.Count(r.stdout, " ok\n"); n != 4*cases || strings.Contains(r.stdout, "WRONG") {
		t.Errorf("%d results right, want %d:\n%s\n%s", n, 4*cases, r.stdout, r.stderr)
	}
	for _, l := range []string{
		"rank 3 of 4: ncclAllReduce count 1024 ncclFloat32 ncclSum (out-of-place, 4096 bytes): plan allreduce_packet_oop_4gpu on gpu, enqueued",
		"rank 0 of 4: ncclReduceScatter count 1024 ncclFloat32 ncclSum (in-place, 16384 bytes): plan reducescatter_4gpu on gpu, enqueued",
	} {
		if !strings.Contains(r.stderr, l) {
			t.Errorf("log lacks %q:\n%s", l, r.stderr)
		}
	}
}
