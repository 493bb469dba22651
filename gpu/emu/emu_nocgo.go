//go:build !cgo

package emu

// emu_nocgo.go: a build without cgo has no host build of the kernel.

import (
	"errors"

	"github.com/mscclgo/mscclgo/gpu"
)

// Available reports whether this build has the emulated device.
const Available = false

// Open fails: the emulated device needs cgo and g++.
func Open() (gpu.Driver, error) {
	return nil, errors.New("gpu-emu: not in this build: mscclgo was built without cgo (CGO_ENABLED=0); " +
		"the host build of the kernel needs cgo and g++")
}

// OpenIPC fails as Open does.
func OpenIPC() (gpu.Driver, error) { return Open() }

// CountTraffic fails: there is no emulated device in this build.
func CountTraffic(gpu.Driver) error { _, err := Open(); return err }

// Traffic fails as CountTraffic does.
func Traffic(gpu.Driver) ([][]gpu.TrafficCount, error) { _, err := Open(); return nil, err }
