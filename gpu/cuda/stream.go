//go:build cuda

package cuda

// stream.go makes the driver a gpu.StreamDriver: a communicator's launch
// (gpu/devcomm) goes on its caller's CUstream, and Wait waits for an
// event recorded after the kernel instead of for the stream.

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/mscclgo/mscclgo/gpu"
)

var _ gpu.StreamDriver = (*driver)(nil)

// UseStream sends the later Enqueue, Zero and Launch to the caller's
// stream st (a CUstream of this device's context; 0 the legacy stream).
func (d *driver) UseStream(st gpu.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.launched || d.capturing {
		return errors.New("cuda: UseStream while a launch is running or a capture is on")
	}
	d.ext, d.useExt = callerStream(st), true
	return nil
}

// Capturing reports whether the caller's stream st is being captured
// into a graph (cuStreamIsCapturing).
func (d *driver) Capturing(st gpu.Stream) (bool, error) {
	if err := d.open(); err != nil {
		return false, err
	}
	var on bool
	err := d.do("asking whether a stream is capturing", func() error {
		var err error
		on, err = capturing(callerStream(st))
		return err
	})
	return on, err
}

// CopyOnStream enqueues a device-to-device copy of n bytes on the
// caller's stream st (cuMemcpyAsync: unified addressing tells the
// direction).
func (d *driver) CopyOnStream(st gpu.Stream, dst, src gpu.DevPtr, n uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.do("a copy on the caller's stream", func() error {
		if err := cu.MemcpyAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n), callerStream(st)); err != nil {
			return fmt.Errorf("cuda: %d bytes from %#x to %#x on the caller's stream: %w", n, src, dst, err)
		}
		return nil
	})
}

// callerStream is the caller's CUstream st as a cu.Stream (whose only
// field is the CUstream).
func callerStream(st gpu.Stream) cu.Stream {
	var s cu.Stream
	*(*uintptr)(unsafe.Pointer(&s)) = uintptr(st)
	return s
}

// kernelStream is the stream of the kernel's work: the caller's after
// UseStream, else the driver's own.
func (d *driver) kernelStream() cu.Stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.launchStream()
}

// launchStream is kernelStream with d.mu held.
func (d *driver) launchStream() cu.Stream {
	if d.useExt {
		return d.ext
	}
	return d.launch
}

// recordEnd records the launch's end on a caller's stream, for Wait (d.mu
// held, the context current).
func (d *driver) recordEnd(st cu.Stream) error {
	if !d.useExt {
		return nil
	}
	ev, err := cu.MakeEvent(cu.DisableTiming)
	if err != nil {
		return fmt.Errorf("creating the launch event: %w", err)
	}
	if err := ev.Record(st); err != nil {
		_ = cu.DestroyEvent(&ev)
		return err
	}
	d.ends = append(d.ends, ev)
	return nil
}

// AllocID returns the id of the allocation that holds p
// (CU_POINTER_ATTRIBUTE_BUFFER_ID): gpu.AllocIDer.
func (d *driver) AllocID(p gpu.DevPtr) (uint64, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	var id uint64
	err := d.do("reading an allocation's buffer id", func() error {
		var err error
		id, err = bufferID(uint64(p))
		return err
	})
	return id, err
}

// AddressRange returns the allocation that holds p
// (cuMemGetAddressRange); ok is false for memory CUDA did not allocate.
func (d *driver) AddressRange(p gpu.DevPtr) (gpu.DevPtr, uint64, bool, error) {
	if err := d.open(); err != nil {
		return 0, 0, false, err
	}
	var size int64
	var base cu.DevicePtr
	err := d.do("finding an allocation", func() error {
		var err error
		size, base, err = cu.DevicePtr(p).AddressRange()
		return err
	})
	if err != nil {
		return 0, 0, false, nil
	}
	return gpu.DevPtr(base), uint64(size), true, nil
}
