package gpu

// stream.go holds what a communicator's launches (gpu/devcomm) need of a
// driver beyond Driver: work on a stream the caller owns, and the
// allocation a device pointer belongs to.

// Stream is a caller's stream: a CUstream on a GPU (0: the legacy default
// stream), a stream of an emu.Streams on the emulated device.
type Stream uintptr

// StreamDriver is a Driver that launches on its caller's streams.
type StreamDriver interface {
	Driver
	// UseStream sends the kernel stream's later work (Enqueue, Zero,
	// Launch) to the caller's stream st, in order with what the caller
	// enqueued there, and returns at once. Wait then waits for the end of
	// the last Launch only (an event recorded after it), not for the
	// caller's later work on st.
	UseStream(st Stream) error
	// Capturing reports whether st is being captured into a graph
	// (cuStreamIsCapturing): the work enqueued there is then recorded,
	// and runs at each replay of the graph, not now. A Launch on a
	// capturing stream is not waited for (no Wait follows it).
	Capturing(st Stream) (bool, error)
	// AddressRange returns the allocation of device memory that holds p:
	// its start and size (cuMemGetAddressRange). ok is false when the
	// driver does not know it (memory it cannot export).
	AddressRange(p DevPtr) (base DevPtr, size uint64, ok bool, err error)
	// CopyOnStream enqueues a copy of n bytes of device memory from src
	// to dst on the caller's stream st (cuMemcpyAsync), in order with
	// the work enqueued there, and returns at once.
	CopyOnStream(st Stream, dst, src DevPtr, n uint64) error
}

// AllocIDer is a StreamDriver that names each allocation for the life of
// the process (CU_POINTER_ATTRIBUTE_BUFFER_ID), so that an allocation
// made where a freed one was is told from it: a communicator registers it
// anew. With a driver that is not one, a communicator takes an allocation
// at a registered one's address and size for the same one.
type AllocIDer interface {
	// AllocID returns the id of the allocation that holds p.
	AllocID(p DevPtr) (uint64, error)
}

// Gater is a StreamDriver that can hold its stream for the host: Gate
// enqueues f on the stream after the work enqueued so far, and the
// stream's later work (the kernel) starts once f has returned. f may
// use the driver (write device memory, map a peer's allocation), so it
// runs on a thread of the driver's own, not in a stream callback where
// CUDA forbids driver calls. A communicator gates a steady-state launch
// on its peers' records of the call (gpu/devcomm), so that the call returns
// at once. f must return within a bound of its own. (The CUDA driver is a
// Holder instead.)
type Gater interface {
	Gate(f func()) error
}

// Holder is a StreamDriver whose stream can wait for the host without
// host code on the stream (CUDA forbids driver calls in a stream
// callback, so a Gater's f cannot run there). Hold enqueues on the kernel
// stream, after the work enqueued so far: a wait for the hold's release,
// then one copy per HoldCopy, from the images given to Release into
// device memory; the stream's later work (the kernel) starts after them.
// It returns at once. A communicator releases each hold from its gate
// server (gpu/devcomm/gates.go) once it has read the peers' records of the call.
//
// Every hold must be released: the stream waits for it without a bound
// of its own. Closing the driver releases the holds left with their
// images as they were, which the caller must have made harmless (the
// communicator closes the driver only once its launches have ended).
type Holder interface {
	Hold(copies []HoldCopy) (Hold, error)
}

// HoldCopy is one copy a hold makes after its release: N bytes (whole
// 8-byte words, or one 4-byte word) to Dst.
type HoldCopy struct {
	Dst DevPtr
	N   uint64
}

// Hold is one hold of a Holder's stream.
type Hold interface {
	// Release ends the hold: the stream copies images[i] (at most the
	// N bytes of copy i) to the Dst of copy i, then runs on. Holds are
	// released in the order they were made; a hold released early waits
	// (on the device) for the ones before it. Images that do not fit
	// fail the Release, and the hold is released with the images it had.
	Release(images [][]byte) error
}

// gated reports whether a steady-state launch on d can wait on its stream
// for the peers' records (Gater or Holder) instead of in the call.
func gated(d Driver) bool {
	switch d.(type) {
	case Gater, Holder:
		return true
	}
	return false
}

// Batcher is a StreamDriver that can take several steps of work for its
// stream at once: Batch runs f, which enqueues them (Enqueue, Zero, Gate,
// Launch), and the stream is told of them once, when f has returned,
// instead of at each step (the emulated stream's goroutine is woken once
// per launch).
type Batcher interface {
	Batch(f func() error) error
}
