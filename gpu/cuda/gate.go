//go:build cuda

package cuda

// gate.go makes the driver a gpu.Holder: a communicator's steady-state
// launch waits on its caller's stream for the host's word, with no host
// function on the stream (CUDA forbids driver calls from a stream
// callback) and no wait in the caller's call.
//
// The driver's gate is one pinned, device-mapped allocation: a release
// word, a done word, and gateSlots staging slots, each with room for the
// images of the hold's copies (the launch's abort word, arguments and
// rank table). Hold number k enqueues on the kernel stream
//
//	cuStreamWaitValue32_v2(release >= k)  the stream waits for the host,
//	cuMemcpyHtoDAsync(dst_i, slot.image_i) then copies the slot's images,
//	cuStreamWriteValue32_v2(done = k)     and says the slot may be reused
//
// Release(k) fills slot k mod gateSlots, then publishes the release word:
// the highest k up to which every hold is released, since a wait on a
// greater-or-equal also passes for every earlier number. A slot is reused
// once the done word shows that the copies of the hold that used it
// before have run; a communicator keeps at most 64 launches of a session
// in flight, fewer than gateSlots, so a Release does not wait for that.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/mscclgo/mscclgo/gpu"
)

// gateSlots is the number of staging slots, more than the launches a
// communicator keeps in flight per session (gpu's maxInFlight, 64).
const gateSlots = 128

// Offsets in the gate's memory.
const (
	gateRelease = 0  // uint32: every hold up to it is released
	gateDone    = 8  // uint32: the last hold whose copies have run
	gateSlot0   = 64 // the first slot: abort word (8 bytes), table image
)

// gate is a driver's hold state (d.gateMu).
type gate struct {
	host     unsafe.Pointer  // pinned, device-mapped
	dev      uint64          // its device address
	sizes    []uint64        // the copies' sizes, the same at every hold
	offs     []uint64        // their images' offsets in a slot
	slotLen  uint64          // bytes per slot
	issued   uint32          // the last hold's number
	pub      uint32          // the published release word
	released map[uint32]bool // released holds above pub
}

var _ gpu.Holder = (*driver)(nil)

// hold is one Hold of the driver.
type hold struct {
	d *driver
	k uint32 // 0 once released
}

func (g *gate) word(off uint64) *uint32 { return (*uint32)(unsafe.Add(g.host, off)) }

func (g *gate) slot(k uint32) uint64 {
	return gateSlot0 + uint64(k%gateSlots)*g.slotLen
}

// Hold enqueues a hold on the kernel stream: a wait for its release,
// then the copies of its slot's images, then the write of the done word.
func (d *driver) Hold(copies []gpu.HoldCopy) (gpu.Hold, error) {
	if err := d.open(); err != nil {
		return nil, err
	}
	if len(copies) == 0 {
		return nil, errors.New("cuda: a hold with no copies")
	}
	for _, c := range copies {
		if c.N == 0 || (c.N != 4 && c.N%8 != 0) || c.Dst%4 != 0 {
			return nil, fmt.Errorf("cuda: a hold's copy of %d bytes to %#x: whole 8-byte words or one aligned 4-byte word", c.N, uint64(c.Dst))
		}
	}
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	var h *hold
	err := d.do("holding the stream for the host", func() error {
		g, err := d.gateFor(copies)
		if err != nil {
			return err
		}
		k := g.issued + 1
		st := d.kernelStream()
		if err := waitGEQ(st, g.dev+gateRelease, k); err != nil {
			return err
		}
		// From here the stream waits for k: it is released also when an
		// enqueue below fails (with the slot's images as they are).
		g.issued = k
		at := g.slot(k)
		for i, c := range copies {
			if err = copyHostAsync(st, uint64(c.Dst), unsafe.Add(g.host, at+g.offs[i]), c.N); err != nil {
				break
			}
		}
		if err == nil {
			err = writeValue(st, g.dev+gateDone, k)
		}
		if err != nil {
			_ = d.releaseLocked(k, nil)
			return err
		}
		h = &hold{d: d, k: k}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// gateFor returns the driver's gate, made at the first hold for copies
// of these sizes (d.gateMu held, the context current).
func (d *driver) gateFor(copies []gpu.HoldCopy) (*gate, error) {
	if g := d.gate; g != nil {
		if len(copies) != len(g.sizes) {
			return nil, fmt.Errorf("cuda: a hold of %d copies in a gate made for %d (one session per driver)", len(copies), len(g.sizes))
		}
		for i, c := range copies {
			if c.N != g.sizes[i] {
				return nil, fmt.Errorf("cuda: a hold's copy %d of %d bytes in a gate made for %d (one session per driver)", i, c.N, g.sizes[i])
			}
		}
		return g, nil
	}
	g := &gate{released: map[uint32]bool{}}
	for _, c := range copies {
		g.sizes = append(g.sizes, c.N)
		g.offs = append(g.offs, g.slotLen)
		g.slotLen += (c.N + 7) &^ 7
	}
	size := gateSlot0 + gateSlots*g.slotLen
	p, _, err := hostAlloc(size)
	if err != nil {
		return nil, fmt.Errorf("pinning the gate's %d bytes: %w", size, err)
	}
	if g.dev, err = devicePointer(p); err != nil {
		return nil, errors.Join(fmt.Errorf("the gate's device address: %w", err), freeHost(p))
	}
	g.host = p
	d.gate = g
	return g, nil
}

// Release fills the hold's slot with images and publishes the release
// word.
func (h *hold) Release(images [][]byte) error {
	d := h.d
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	if d.gate == nil || h.k == 0 {
		return errors.New("cuda: release of a hold the driver does not have (released already, or the driver closed)")
	}
	err := d.releaseLocked(h.k, images)
	h.k = 0
	return err
}

// releaseLocked fills hold k's slot with images (nil: as it is) and
// publishes every hold released in order. Images that do not fit, or a
// slot whose previous hold's copies have not run, leave the slot as it
// is, and the error says so. d.gateMu is held.
func (d *driver) releaseLocked(k uint32, images [][]byte) error {
	g := d.gate
	var err error
	if images != nil && len(images) != len(g.sizes) {
		err = fmt.Errorf("cuda: hold %d released with %d images for %d copies", k, len(images), len(g.sizes))
	}
	for i := range images {
		if err == nil && uint64(len(images[i])) > g.sizes[i] {
			err = fmt.Errorf("cuda: hold %d: a %d-byte image for copy %d of %d bytes", k, len(images[i]), i, g.sizes[i])
		}
	}
	if done := atomic.LoadUint32(g.word(gateDone)); err == nil && int32(k-gateSlots-done) > 0 {
		err = fmt.Errorf("cuda: hold %d: the copies of hold %d, which used its staging slot, have not run (the stream is %d holds behind)", k, k-gateSlots, k-done)
	}
	if err == nil {
		at := g.slot(k)
		for i, img := range images {
			copy(unsafe.Slice((*byte)(unsafe.Add(g.host, at+g.offs[i])), len(img)), img)
		}
	}
	g.released[k] = true
	for g.released[g.pub+1] {
		delete(g.released, g.pub+1)
		g.pub++
	}
	atomic.StoreUint32(g.word(gateRelease), g.pub)
	return err
}

// releaseAll releases every hold not released yet, with its slot as it is
// (Close).
func (d *driver) releaseAll() {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	g := d.gate
	if g == nil {
		return
	}
	clear(g.released)
	g.pub = g.issued
	atomic.StoreUint32(g.word(gateRelease), g.pub)
}

// freeGate frees the gate's memory once the copies of every hold have run
// (waited for at most a second after Close released them; else the
// memory stays, since a caller's stream may still read it). The context
// is current.
func (d *driver) freeGate() error {
	d.gateMu.Lock()
	defer d.gateMu.Unlock()
	g := d.gate
	if g == nil {
		return nil
	}
	for i := 0; atomic.LoadUint32(g.word(gateDone)) != g.issued; i++ {
		if i == 1000 {
			return fmt.Errorf("cuda: the copies of holds %d to %d have not run a second after their release: the gate's memory stays", atomic.LoadUint32(g.word(gateDone))+1, g.issued)
		}
		time.Sleep(time.Millisecond)
	}
	d.gate = nil
	return freeHost(g.host)
}

// copyHostAsync enqueues on s a copy of n bytes of pinned host memory at
// src to the device address dst.
func copyHostAsync(s cu.Stream, dst uint64, src unsafe.Pointer, n uint64) error {
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, int64(n), s); err != nil {
		return fmt.Errorf("cuda: a %d-byte copy to %#x: %w", n, dst, err)
	}
	return nil
}

// freeHost frees pinned host memory from hostAlloc.
func freeHost(p unsafe.Pointer) error { return cu.MemFreeHost(p) }
