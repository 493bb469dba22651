//go:build !mscclgo_emu && !cuda

package main

// device_none.go: the default build has no device backend: a call whose
// plan fits goes to the fallback (or to host-memory runs).

// newDevices returns the build's device backend: none.
func newDevices() *devices { return nil }

// deviceBackend names the build's device backend in the log.
const deviceBackend = ""
