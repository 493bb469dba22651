//go:build cuda

package main

import (
	"fmt"
	"testing"
)

// TestDeviceSweepCUDA runs the nccl-tests-shaped client (ncclcheck sweep,
// see TestSweepDevice) through the cuda-tagged build of the library on the
// fake CUDA driver, four fake devices, the default plan set and no
// fallback: every call is launched through gpu/cuda and every result is
// right. Sizes on both sides of the packet plans' 1 MiB limit.
func TestDeviceSweepCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	plans := defaultSet(t)
	for _, c := range []sweepCase{{2, 1 << 10, 2 << 20, 2048}, {4, 1 << 10, 2 << 20, 2048}} {
		t.Run(fmt.Sprintf("%d ranks", c.ranks), func(t *testing.T) {
			r := runCheck(t, fakeEnv(dir, 4, plans), c.args()...)
			checkSweep(t, c, r, "gpu")
		})
	}
}
