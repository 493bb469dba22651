//go:build mscclgo_emu && cgo

package main

// device_emu.go: the test build of the library (go build -tags
// mscclgo_emu) launches plans on the emulated device (gpu/emu): device
// pointers are host memory, each device number has its own streams (any
// cudaStream_t value names one, made on first use), and the C symbol
// mscclgoEmuStreamSynchronize waits for a stream's work, as
// cudaStreamSynchronize would; mscclgoEmuStreamBeginCapture,
// mscclgoEmuStreamEndCapture and mscclgoEmuGraphLaunch capture a stream's
// work and replay it, as CUDA graphs do.

// #include <stddef.h>
// #include <stdint.h>
import "C"

import (
	"fmt"
	"runtime/cgo"
	"time"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
	"github.com/mscclgo/mscclgo/gpu/emu"
	"github.com/mscclgo/mscclgo/runconfig"
)

// deviceBackend names the build's device backend in the log.
const deviceBackend = "gpu-emu"

// newDevices returns the emulated device backend.
func newDevices() *devices {
	streams := map[int]streamSyncer{}
	return &devices{devs: map[int]runconfig.Device{}, threads: 2, open: func(dev int) runconfig.Device {
		ss := emu.NewStreams()
		ss.Adopt()
		streams[dev] = ss
		return runconfig.Device{Name: "gpu-emu", Open: ss.OpenIPC}
	}, streams: streams}
}

// emuSyncTimeout bounds mscclgoEmuStreamSynchronize.
const emuSyncTimeout = 5 * time.Minute

//export mscclgoEmuStreamSynchronize
func mscclgoEmuStreamSynchronize(dev C.int, stream unsafe.Pointer) C.int {
	ss := emuStreams(dev)
	if ss == nil {
		return 0
	}
	if err := ss.Synchronize(gpu.Stream(uintptr(stream)), emuSyncTimeout); err != nil {
		setError(fmt.Sprintf("mscclgo: mscclgoEmuStreamSynchronize: %v", err))
		return 1
	}
	return 0
}

// emuStreams returns device dev's streams, nil before the device is used.
func emuStreams(dev C.int) *emu.Streams {
	d := theLibrary.devices
	d.mu.Lock()
	defer d.mu.Unlock()
	ss, _ := d.streams[int(dev)].(*emu.Streams)
	return ss
}

// The emulated device's stand-ins for cuStreamBeginCapture,
// cuStreamEndCapture (with the graph's instantiation) and cuGraphLaunch,
// for the tests of calls captured into graphs. A graph is named by a
// handle; 0 is returned for success, 1 (with ncclGetLastError's text)
// for failure.

//export mscclgoEmuStreamBeginCapture
func mscclgoEmuStreamBeginCapture(dev C.int, stream unsafe.Pointer) C.int {
	return emuResult("mscclgoEmuStreamBeginCapture", func(ss *emu.Streams) error {
		return ss.BeginCapture(gpu.Stream(uintptr(stream)))
	}, dev)
}

//export mscclgoEmuStreamEndCapture
func mscclgoEmuStreamEndCapture(dev C.int, stream unsafe.Pointer, graph *C.uintptr_t) C.int {
	return emuResult("mscclgoEmuStreamEndCapture", func(ss *emu.Streams) error {
		g, err := ss.EndCapture(gpu.Stream(uintptr(stream)))
		if err != nil {
			return err
		}
		*graph = C.uintptr_t(cgo.NewHandle(g))
		return nil
	}, dev)
}

//export mscclgoEmuGraphLaunch
func mscclgoEmuGraphLaunch(dev C.int, graph C.uintptr_t, stream unsafe.Pointer) C.int {
	return emuResult("mscclgoEmuGraphLaunch", func(ss *emu.Streams) error {
		g, ok := cgo.Handle(graph).Value().(*emu.StreamGraph)
		if !ok {
			return fmt.Errorf("%#x is not a graph", uintptr(graph))
		}
		return ss.Replay(g, gpu.Stream(uintptr(stream)))
	}, dev)
}

//export mscclgoEmuGraphDestroy
func mscclgoEmuGraphDestroy(graph C.uintptr_t) {
	cgo.Handle(graph).Delete()
}

func emuResult(fn string, f func(*emu.Streams) error, dev C.int) C.int {
	ss := emuStreams(dev)
	if ss == nil {
		setError(fmt.Sprintf("mscclgo: %s: device %d has no streams yet (no communicator uses it)", fn, int(dev)))
		return 1
	}
	if err := f(ss); err != nil {
		setError(fmt.Sprintf("mscclgo: %s: %v", fn, err))
		return 1
	}
	return 0
}

// The emulated device's stand-ins for cuMemAlloc and cuMemFree: memory
// that the communicator's peers in other processes can map (through the
// emulated IPC handles), as a caller's device buffers. 0 is returned for
// success, 1 (with ncclGetLastError's text) for failure.

//export mscclgoEmuMalloc
func mscclgoEmuMalloc(ptr *C.uintptr_t, size C.size_t) C.int {
	p, err := emu.AllocShared(uint64(size))
	if err != nil {
		setError(fmt.Sprintf("mscclgo: mscclgoEmuMalloc: %v", err))
		return 1
	}
	*ptr = C.uintptr_t(p)
	return 0
}

//export mscclgoEmuFree
func mscclgoEmuFree(ptr C.uintptr_t) {
	emu.FreeShared(gpu.DevPtr(ptr))
}
