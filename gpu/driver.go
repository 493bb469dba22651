package gpu

import (
	"fmt"
	"time"
)

// DevPtr is a device address. Host-mapped memory has one too.
type DevPtr uint64

// DeviceInfo describes the device a Driver runs on.
type DeviceInfo struct {
	// Name is the device's name, e.g. "NVIDIA H100 80GB HBM3" or "host
	// emulation".
	Name string
	// SMs is the number of multiprocessors (0: no limit, the emulation).
	SMs int
	// MaxThreadsPerBlock bounds the block size.
	MaxThreadsPerBlock int
	// MaxSharedPerBlock is the most dynamic shared memory one block may
	// use (with the opt-in attribute where the device has one).
	MaxSharedPerBlock int
	// DefaultThreads is the block size when Config.Threads is 0 (0: the
	// plan's num_threads_per_block).
	DefaultThreads int
	// MaxTotalThreads bounds grid × block of one launch (0: no bound);
	// with Config.Threads 0 the block size shrinks to fit.
	MaxTotalThreads int
	// Multicast reports NVLS multicast support
	// (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED).
	Multicast bool
}

// Driver is the device layer under the runtime: memory, copies, the
// interpreter kernel's launch and the proxy's copies. Two implement it:
// gpu/emu runs the g++-built kernel on host threads (every build with
// cgo), gpu/cuda runs the nvcc-built kernel through gorgonia.org/cu (the
// cuda build tag). A Driver is used by one session at a time.
type Driver interface {
	// Info describes the device.
	Info() DeviceInfo
	// Alloc returns n bytes of zeroed device memory, 256-byte aligned.
	Alloc(n uint64) (DevPtr, error)
	// AllocHost returns n bytes of zeroed, pinned host memory mapped
	// into the device's address space.
	AllocHost(n uint64) (HostMem, error)
	// Free releases memory from Alloc.
	Free(p DevPtr) error
	// HtoD copies src to device memory at dst (synchronous).
	HtoD(dst DevPtr, src []byte) error
	// DtoH copies device memory at src into dst (synchronous).
	DtoH(dst []byte, src DevPtr) error
	// Occupancy returns how many blocks of the interpreter kernel with
	// block threads and shmem bytes of dynamic shared memory can be
	// resident on the whole device at once (0: no limit).
	Occupancy(block, shmem int) (int, error)
	// Launch starts the interpreter kernel on grid blocks of block
	// threads with shmem bytes of dynamic shared memory and one argument,
	// the device address of an mg_args record. It returns at once; Wait
	// waits for the kernel to end. One launch at a time.
	Launch(grid, block, shmem int, args DevPtr) error
	// Wait blocks until the launched kernel has ended.
	Wait() error
	// Copy copies n bytes between device addresses on the proxy's
	// stream, in order with the proxy's earlier copies; packets asks for
	// copies in 8-byte words (LL packets polled while they arrive). It
	// may return before the copy is done: Fence waits.
	Copy(dst, src DevPtr, n uint64, packets bool) error
	// Fence waits until every earlier Copy is complete and visible.
	Fence() error
	// IpcGet exports the allocation that starts at p (from Alloc) to
	// other processes on the same host, as cuIpcGetMemHandle does.
	IpcGet(p DevPtr) (IpcHandle, error)
	// IpcOpen maps another process's exported allocation into this
	// device's address space, as cuIpcOpenMemHandle does; the memory
	// stays the exporter's (IpcClose unmaps it, Free must not be used).
	IpcOpen(h IpcHandle) (DevPtr, error)
	// IpcClose unmaps memory from IpcOpen.
	IpcClose(p DevPtr) error
	// Close releases the driver.
	Close() error

	// The streams of a launch (docs/gpu.md §3): the kernel's stream
	// carries the per-launch table updates and the launch, in order; the
	// proxy's stream (Copy, Post) carries the port channels' transfers and
	// the words that report them to the kernel; the watch stream (Peek,
	// Poke) reads and writes device memory while the kernel runs. Nothing
	// the kernel waits for is in host-mapped memory.

	// UseKernel selects the interpreter entry (KernelName) of later
	// Launch and Occupancy calls; a session selects it once, at Open.
	UseKernel(name string) error
	// Enqueue copies n bytes of host-mapped memory h at off to dst on the
	// kernel's stream, after the work enqueued there before it. It
	// returns at once; the copy reads h when it runs (a replayed graph
	// reads it at every replay).
	Enqueue(dst DevPtr, h HostMem, off, n uint64) error
	// Zero clears n bytes at dst on the kernel's stream, like Enqueue.
	Zero(dst DevPtr, n uint64) error
	// Peek copies device memory at src into dst on the watch stream and
	// waits for that copy only (the kernel may be running); 8-byte words.
	Peek(dst []byte, src DevPtr) error
	// Poke writes the 32-bit word v at dst on the watch stream and waits
	// for that write only.
	Poke(dst DevPtr, v uint32) error
	// Post writes the 64-bit word v at dst on the proxy's stream, after
	// every earlier Copy: the word is seen after the data. v is taken at
	// the call; the write may be done after Post returns (Fence waits).
	Post(dst DevPtr, v uint64) error
	// BeginCapture makes the kernel stream's work (Enqueue, Zero, Launch)
	// recorded into a graph instead of run, until EndCapture, which
	// returns the graph for Replay.
	BeginCapture() error
	EndCapture() (Graph, error)
	// Replay runs a captured graph on the kernel's stream; Wait waits
	// for it as for a Launch.
	Replay(g Graph) error
}

// Retainer is a driver whose allocations a rank can hold for a peer of
// its process whose device addresses it took (a same-process peer opens
// no IPC handle): the owner's Free of a held allocation gives it back only
// at the last Release, as a peer's IPC mapping keeps a CUDA allocation's
// memory after the exporter's cuMemFree. A rank whose communicator ends
// (an abort while its peers make steady calls) then frees nothing its
// peers' kernels still write into. The emulated device is one.
type Retainer interface {
	Retain(p DevPtr)
	Release(p DevPtr)
}

// Graph is a captured sequence of the kernel stream's work.
type Graph interface {
	// Release frees the graph.
	Release() error
}

// KernelName is the interpreter entry for element type dtype (MG_F16,
// MG_BF16, MG_F32, MG_I32) and LL packets of packet bytes (16 or 8).
func KernelName(dtype uint32, packet uint64) (string, error) {
	names := [...]string{"f16", "bf16", "f32", "i32"}
	if int(dtype) >= len(names) || (packet != 16 && packet != 8) {
		return "", fmt.Errorf("gpu: no kernel for element type %d with %d-byte packets", dtype, packet)
	}
	return fmt.Sprintf("mscclgo_interp_%s_ll%d", names[dtype], packet), nil
}

// IpcHandle names an exported allocation for IpcOpen in another process
// on the same host: the 64 bytes of a CUipcMemHandle on a GPU, a memory
// file's process, descriptor and size on the emulated device.
type IpcHandle [64]byte

// HostMem is pinned host memory mapped into the device. Its words are
// accessed with atomics, since the kernel reads and writes them while it
// runs. Offsets are in bytes and 8-byte aligned.
type HostMem interface {
	// Dev is the device address of the first byte.
	Dev() DevPtr
	// Len is the size in bytes.
	Len() uint64
	// Load reads the 64-bit word at off (acquire).
	Load(off uint64) uint64
	// Store writes the 64-bit word at off (release).
	Store(off uint64, v uint64)
	// Add adds v to the 64-bit word at off (release) and returns the new
	// value.
	Add(off uint64, v uint64) uint64
	// Free releases the memory.
	Free() error
}

// Config configures a GPU backend.
type Config struct {
	// Name is the backend's --backend name ("gpu", "gpu-emu").
	Name string
	// Open returns the driver of a new session.
	Open func() (Driver, error)
	// Threads is the number of threads per block; 0 takes the device's
	// default (DeviceInfo.DefaultThreads), else the plan's
	// num_threads_per_block.
	Threads int
	// Devices counts the machine's devices and OpenDevice opens the
	// driver of device number d (either nil: every session runs on
	// Open's device). With more than one device, a session of a plan of
	// several ranks places rank r on device r mod N, each rank in a rank
	// session of its own connected in-process (local.go), with peer
	// access between the devices or an error that names the pair.
	Devices    func() (int, error)
	OpenDevice func(device int) (Driver, error)
	// SetupTimeout bounds each step of a rank session's set-up (the
	// all-gathers of handles and outcomes, the room on its device); 0
	// means two minutes.
	SetupTimeout time.Duration
	// Graph captures each session's launch (its per-launch table updates
	// and the kernel) into a graph at its first launch and replays it at
	// the next ones, recapturing when the buffers move.
	Graph bool
	// ReplayTimeout bounds how long a communicator's launch replayed from
	// the caller's CUDA graph may wait with no progress before it is
	// stopped and its report becomes the asynchronous error (devcomm.Comm); 0
	// means ten minutes. Longer than the deadlock timeout of launches
	// made by calls, since no job-wide view tells a hung replay from a
	// peer that has not replayed its graph yet.
	ReplayTimeout time.Duration
	// MeetEveryCall makes a communicator's every call meet its peers
	// over the bootstrap, as before the mailbox (gpu/devcomm): the baseline
	// of make nccl-bench.
	MeetEveryCall bool
	// MaxSessions bounds the plan-instance sessions a communicator keeps
	// open (gpu/devcomm): opening one more first closes the least recently
	// called. 0 means DefaultMaxSessions; at most MaxSessionsLimit.
	MaxSessions int
}

// The bounds of Config.MaxSessions: a communicator keeps 64 plan
// instances open unless told otherwise, at least 1 and at most 4096.
const (
	DefaultMaxSessions = 64
	MaxSessionsLimit   = 4096
)
