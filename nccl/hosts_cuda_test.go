//go:build cuda

package main

import "testing"

// TestHostsCUDA: the cases of TestHostsLibrary (hostsCases) on the fake
// CUDA driver: four processes on two pretend hosts, two fake devices per
// host (rank r on device r mod 2: ranks of one host on devices of their
// own; the same device number on another host is another GPU), buffers
// from cuMemAlloc, registered by IPC handle with the peer on the host.
func TestHostsCUDA(t *testing.T) {
	dir := cudaLibrary(t)
	env := append(fakeEnv(dir, 2, hostsPlans(t)), "NCCLCHECK_DEVICE=cuda", "MSCCLGO_TRANSPORT=tcp")
	hostsCases(t, env, "gpu")
}
