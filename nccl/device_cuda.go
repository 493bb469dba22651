//go:build cuda && !mscclgo_emu

package main

// device_cuda.go: the cuda-tagged build of the library (make nccl
// NCCL_BACKEND=cuda, after make gpu) launches plans on the CUDA devices
// through gpu/cuda: the caller's cudaStream_t is the CUstream of the
// launch, its buffers are its device pointers. One cuda.Node per process
// shares each device's launch admission among the communicators.

import (
	"os"

	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/cuda"
)

// deviceBackend names the build's device backend in the log.
const deviceBackend = "gpu"

// newDevices returns the CUDA device backend. MSCCLGO_NCCL_THREADS sets
// the threads per block (default: each plan's num_threads_per_block; the
// fake driver's tests take a few, since it runs a host thread per CUDA
// thread).
func newDevices() *devices {
	node := cuda.NewNode()
	settings := gpu.SettingsFromEnv(os.Getenv)
	return &devices{cfgs: map[int]gpu.Config{}, open: func(dev int) gpu.Config {
		return gpu.NewConfig("gpu", func() (gpu.Driver, error) { return node.Open(dev) }, settings)
	}}
}
