//go:build cuda && !mscclgo_emu

package main

// device_cuda.go: the cuda-tagged build of the library (make nccl
// NCCL_BACKEND=cuda, after make gpu) launches plans on the CUDA devices
// through gpu/cuda: the caller's cudaStream_t is the CUstream of the
// launch, its buffers are its device pointers. One cuda.Node per process
// shares each device's launch admission among the communicators.

import (
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/cuda"
	"github.com/mscclgo/mscclgo/runconfig"
)

// deviceBackend names the build's device backend in the log.
const deviceBackend = "gpu"

// newDevices returns the CUDA device backend. MSCCLGO_NCCL_THREADS sets
// the threads per block (default: each plan's num_threads_per_block; the
// fake driver's tests take a few, since it runs a host thread per CUDA
// thread).
func newDevices() *devices {
	node := cuda.NewNode()
	return &devices{devs: map[int]runconfig.Device{}, open: func(dev int) runconfig.Device {
		return runconfig.Device{Name: "gpu", Open: func() (gpu.Driver, error) { return node.Open(dev) }}
	}}
}
