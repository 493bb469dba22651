//go:build cuda

package cuda

// hostmem.go holds hostMem, the gpu.HostMem of the driver: pinned host
// memory from cuMemHostAlloc, mapped into the device's address space. The
// kernel reads and writes its words while it runs, so the host accesses
// them only with sync/atomic (sequentially consistent, which is at least
// the acquire and release the interface asks for).

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
	"gorgonia.org/cu"
)

// hostMem is one mapped pinned allocation.
type hostMem struct {
	d     *driver
	p     unsafe.Pointer // the host address, C memory
	dev   gpu.DevPtr
	n     uint64
	words []uint64 // the allocation as 64-bit words (n is a multiple of 8)

	once sync.Once
}

var _ gpu.HostMem = (*hostMem)(nil)

func newHostMem(d *driver, p unsafe.Pointer, dev uint64, n uint64) *hostMem {
	return &hostMem{d: d, p: p, dev: gpu.DevPtr(dev), n: n, words: unsafe.Slice((*uint64)(p), n/8)}
}

// Dev is the device address of the first byte.
func (h *hostMem) Dev() gpu.DevPtr { return h.dev }

// Len is the size in bytes.
func (h *hostMem) Len() uint64 { return h.n }

// word returns the word at byte offset off; the slice's bounds check
// catches an offset past the end.
func (h *hostMem) word(off uint64) *uint64 { return &h.words[off/8] }

// Load reads the word at off.
func (h *hostMem) Load(off uint64) uint64 { return atomic.LoadUint64(h.word(off)) }

// Store writes the word at off.
func (h *hostMem) Store(off uint64, v uint64) { atomic.StoreUint64(h.word(off), v) }

// Add adds v to the word at off and returns the new value.
func (h *hostMem) Add(off uint64, v uint64) uint64 { return atomic.AddUint64(h.word(off), v) }

// Free releases the memory; a second call fails. The driver must not be
// closed yet (closing may have released the context and the memory with
// it).
func (h *hostMem) Free() error {
	err := fmt.Errorf("cuda: host memory at %#x freed twice", uint64(h.dev))
	h.once.Do(func() {
		if err = h.d.open(); err != nil {
			return
		}
		p := h.p
		h.words, h.p = nil, nil
		err = h.d.do("freeing host memory", func() error { return cu.MemFreeHost(p) })
	})
	return err
}
