package devcomm

import (
	"fmt"

	"github.com/mscclgo/mscclgo/gpu"
)

// staging is a communicator's device staging buffer (Comm.Staging): the
// current allocation and the ones it outgrew, which launches enqueued
// before it grew may still read, so they are freed at Close only.
type staging struct {
	p       gpu.DevPtr
	size    uint64
	retired []gpu.DevPtr
}

// minStaging is the smallest staging allocation.
const minStaging = 1 << 16

// Staging returns the communicator's staging buffer, at least n bytes of
// device memory allocated through its driver: where a caller copies a
// call's input on its stream when the plan's placement is not the call's
// (the nccl library). It is the same buffer at every call until a call
// needs more; then a new one of at least twice the size is made, and the
// old one is kept until Close, since work enqueued earlier may still
// read it. A call uses it like any of its buffers: registered with the
// peers at its first use, and free again once the call's launch has
// ended on the stream, so calls on one stream may share it; calls of one
// communicator on several streams at once would share it too, as they
// share their plans' scratch.
func (c *Comm) Staging(n uint64) (gpu.DevPtr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("%s: rank %d: the communicator is closed", c.cfg.Name, c.rank)
	}
	if c.io == nil {
		return 0, fmt.Errorf("%s: rank %d: no driver to allocate a staging buffer", c.cfg.Name, c.rank)
	}
	if n <= c.stage.size && c.stage.p != 0 {
		return c.stage.p, nil
	}
	size := max(n, 2*c.stage.size, minStaging)
	p, err := c.io.Alloc(size)
	if err != nil {
		return 0, fmt.Errorf("%s: rank %d: allocating a staging buffer of %d bytes: %w", c.cfg.Name, c.rank, size, err)
	}
	if c.stage.p != 0 {
		c.stage.retired = append(c.stage.retired, c.stage.p)
	}
	c.stage.p, c.stage.size = p, size
	return p, nil
}

// StagingSize is the size of the staging buffer, 0 before the first
// Staging.
func (c *Comm) StagingSize() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stage.size
}

// freeStaging frees the staging buffers, once no launch may read them.
// The caller holds mu.
func (c *Comm) freeStaging() error {
	var first error
	for _, p := range append(c.stage.retired, c.stage.p) {
		if p == 0 {
			continue
		}
		if err := c.io.Free(p); err != nil && first == nil {
			first = fmt.Errorf("%s: rank %d: freeing the staging buffer at %#x: %w", c.cfg.Name, c.rank, uint64(p), err)
		}
	}
	c.stage = staging{}
	return first
}
