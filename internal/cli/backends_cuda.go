//go:build cuda

package cli

// backends_cuda.go: the cuda-tagged build (the mscclgo-cuda worker) has
// the CUDA backend, first, so that it is the default there; under a
// launcher each rank opens its local rank's device.

import (
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/cuda"
	"github.com/mscclgo/mscclgo/runconfig"
	"gorgonia.org/cu"
)

func cudaBackends() []runBackend {
	// A rank session of a multi-process run takes the device of its
	// local rank (modulo the devices CUDA_VISIBLE_DEVICES leaves). Every
	// session of the process opens its device from one Node, which
	// shares each device's launch admission.
	node := cuda.NewNode()
	dev := func(device int) runconfig.Device {
		open := func() (gpu.Driver, error) {
			if n, err := cu.NumDevices(); err == nil && n > 0 {
				device %= n
			}
			return node.Open(device)
		}
		return runconfig.Device{Name: "gpu", Open: open}
	}
	// In one process (no launcher) rank r runs on device r mod N.
	// The device memory is the GPU's, not counted.
	return []runBackend{{name: "gpu", device: dev, new: func(s runconfig.Settings) executor.Backend {
		d := dev(0)
		d.Devices, d.OpenDevice = cuda.Devices, node.Open
		return gpu.New(s.GPUConfig(d))
	}}}
}
