//go:build cuda

package cli

// backends_cuda.go: the cuda-tagged build (the mscclgo-cuda worker) has
// the CUDA backend, first, so that it is the default there.

import (
	"github.com/mscclgo/mscclgo/executor"
	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/cuda"
)

func cudaBackends() []runBackend {
	return []runBackend{{"gpu", func(threads int) executor.Backend {
		return gpu.New(gpu.Config{Name: "gpu", Open: func() (gpu.Driver, error) { return cuda.Open(0) }, Threads: threads})
	}}}
}
