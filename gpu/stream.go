package gpu

// stream.go holds what a communicator's launches (comm.go) need of a
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
// on its peers' records of the call (comm.go), so that the call returns
// at once. f must return within a bound of its own.
type Gater interface {
	Gate(f func()) error
}

// Batcher is a StreamDriver that can take several steps of work for its
// stream at once: Batch runs f, which enqueues them (Enqueue, Zero, Gate,
// Launch), and the stream is told of them once, when f has returned,
// instead of at each step (the emulated stream's goroutine is woken once
// per launch).
type Batcher interface {
	Batch(f func() error) error
}
