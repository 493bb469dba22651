//go:build mscclgo_emu && cgo

package main

// device_emu.go: the test build of the library (go build -tags
// mscclgo_emu) launches plans on the emulated device (gpu/emu): device
// pointers are host memory, each device number has its own streams (any
// cudaStream_t value names one, made on first use), and the C symbol
// mscclgoEmuStreamSynchronize waits for a stream's work, as
// cudaStreamSynchronize would.

import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
)

// deviceBackend names the build's device backend in the log.
const deviceBackend = "gpu-emu"

// newDevices returns the emulated device backend.
func newDevices() *devices {
	streams := map[int]streamSyncer{}
	return &devices{cfgs: map[int]gpu.Config{}, open: func(dev int) gpu.Config {
		ss := emu.NewStreams()
		ss.Adopt()
		streams[dev] = ss
		return gpu.Config{Name: "gpu-emu", Open: ss.OpenIPC, Threads: 2}
	}, streams: streams}
}

// emuSyncTimeout bounds mscclgoEmuStreamSynchronize.
const emuSyncTimeout = 5 * time.Minute

//export mscclgoEmuStreamSynchronize
func mscclgoEmuStreamSynchronize(dev C.int, stream unsafe.Pointer) C.int {
	d := theLibrary.devices
	d.mu.Lock()
	ss := d.streams[int(dev)]
	d.mu.Unlock()
	if ss == nil {
		return 0
	}
	if err := ss.Synchronize(gpu.Stream(uintptr(stream)), emuSyncTimeout); err != nil {
		setError(fmt.Sprintf("mscclgo: mscclgoEmuStreamSynchronize: %v", err))
		return 1
	}
	return 0
}
