//go:build cuda

package cli

// backends_cuda.go: the cuda-tagged build (the mscclgo-cuda worker) has
// the CUDA backend, first, so that it is the default there; under a
// launcher each rank opens its local rank's device.

import (
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/cuda"
	"gorgonia.org/cu"
)

func cudaBackends() []runBackend {
	// A rank session of a multi-process run takes the device of its
	// local rank (modulo the devices CUDA_VISIBLE_DEVICES leaves). Every
	// session of the process opens its device from one Node, which
	// shares each device's launch admission.
	node := cuda.NewNode()
	cfg := func(threads, device int) gpu.Config {
		open := func() (gpu.Driver, error) {
			if n, err := cu.NumDevices(); err == nil && n > 0 {
				device %= n
			}
			return node.Open(device)
		}
		return gpu.NewConfig("gpu", open, gpu.Settings{Threads: threads})
	}
	// In one process (no launcher) rank r runs on device r mod N.
	// The device memory is the GPU's, not counted.
	return []runBackend{{name: "gpu", gpuConfig: cfg, new: func(threads int) executor.Backend {
		c := cfg(threads, 0)
		c.Devices, c.OpenDevice = cuda.Devices, node.Open
		return gpu.New(c)
	}}}
}
