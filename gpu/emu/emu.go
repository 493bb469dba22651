//go:build cgo

// Package emu is the emulated device of the GPU backend: a gpu.Driver
// whose kernel is the interpreter of csrc/ compiled by g++ (through cgo)
// and run on host threads, a fiber per CUDA thread, with host memory as
// device memory (OpenIPC: memory files, which IpcGet exports to other
// processes of the host through /proc/PID/fd/FD). It is `mscclgo run --backend gpu-emu`: any plan runs
// through the real kernel code without a GPU. Open (or OpenIPC, for a rank
// of a multi-process job) is the Open of a gpu.Config.
package emu

/*
#cgo CXXFLAGS: -std=c++20 -O2 -pthread -Wall -Wextra -I${SRCDIR}/../../csrc
#cgo LDFLAGS: -pthread
#include <stdint.h>
#include <stdlib.h>
uint64_t mg_emu_alloc(uint64_t n, int mode);
void mg_emu_free(uint64_t p, int mode);
void mg_emu_retain(uint64_t p);
void mg_emu_release(uint64_t p);
void mg_emu_htod(uint64_t dst, const void* src, uint64_t n);
void mg_emu_zero(uint64_t dst, uint64_t n);
void mg_emu_dtoh(void* dst, uint64_t src, uint64_t n);
int mg_emu_tsan(void);
uint64_t mg_emu_load(uint64_t addr);
void mg_emu_store(uint64_t addr, uint64_t v);
uint64_t mg_emu_add(uint64_t addr, uint64_t v);
void mg_emu_copy(void* d, uint64_t dst, uint64_t src, uint64_t n, int packets);
void mg_emu_post(void* d, uint64_t addr, uint64_t v);
void mg_emu_fence(void);
void* mg_emu_dev_new(void);
void mg_emu_dev_free(void* d);
void mg_emu_dev_map(void* d, uint64_t p, uint64_t n);
void mg_emu_dev_unmap(void* d, uint64_t p);
int mg_emu_entry(const char* name);
uint64_t mg_emu_launch(void* d, int entry, unsigned grid, unsigned block, unsigned shmem, uint64_t args, int count);
unsigned mg_emu_counts(void* d, uint64_t* host_access, uint64_t* ops, unsigned n);
unsigned mg_emu_traffic(void* d, unsigned blk, uint64_t* out, unsigned n);
unsigned mg_emu_traffic_blocks(void* d);
void mg_emu_store32(uint64_t addr, uint32_t v);
void mg_emu_wait(uint64_t h);
int mg_emu_ipc_get(uint64_t p, uint64_t* n);
uint64_t mg_emu_ipc_open(const char* path, uint64_t n);
int mg_emu_ipc_close(uint64_t p);
uint64_t mg_emu_range(uint64_t p, uint64_t* n);
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
)

// Available reports whether this build has the emulated device.
const Available = true

// MaxThreads bounds grid × block of one emulated launch: every CUDA
// thread is a fiber with a stack of its own.
const MaxThreads = 8192

// DefaultThreads is the block size unless the caller sets one: every
// CUDA thread is emulated (a fiber).
const DefaultThreads = 8

// Open returns a new emulated device. Its memory cannot be exported
// (IpcGet fails): OpenIPC's can.
func Open() (gpu.Driver, error) { return newDriver(false) }

// OpenIPC returns a new emulated device whose every allocation is a
// memory file that IpcGet exports to other processes of the host, as a
// GPU's allocations are (the rank sessions of a multi-process run use
// it). Allocations cost more than Open's (a file and a mapping each).
func OpenIPC() (gpu.Driver, error) { return newDriver(true) }

// GuardEnv names the environment variable that, set to 1 when a device
// is opened, guards its allocations that are not memory files: each is
// a mapping of its own that ends at an inaccessible page, and a freed
// one stays mapped inaccessible. A write past an allocation's end, or
// any access after its free, by the kernel, the proxy or the host side,
// then faults at the access (the crash names it) instead of corrupting
// the heap for a later allocation to trip over. It costs a mapping per
// allocation and address space for every freed one. A fault on a kernel
// thread (a thread Go did not create) ends the process without a Go
// traceback. Set it to hunt a memory error: MSCCLGO_EMU_GUARD=1 go test
// ./gpu/emu.
const GuardEnv = "MSCCLGO_EMU_GUARD"

func newDriver(ipc bool) (*driver, error) {
	dev := C.mg_emu_dev_new()
	if dev == nil {
		return nil, errors.New("gpu-emu: out of memory for the device's probe")
	}
	return &driver{ipc: ipc, guard: os.Getenv(GuardEnv) == "1", dev: dev, entry: -1}, nil
}

type driver struct {
	launch C.uint64_t // the running launch, 0 if none
	ipc    bool       // allocations are memory files (OpenIPC)
	guard  bool       // the others are guarded (GuardEnv)
	// dev is the C side's probe state: host-mapped ranges and the last
	// launch's counts (HostAccesses).
	dev    unsafe.Pointer
	entry  C.int // the kernel entry of UseKernel, -1 before
	closed bool
	// count: launches count the accesses to host-mapped memory
	// (CountHostAccesses); traffic: the data traffic of each op
	// (CountTraffic).
	count, traffic bool
	// closedTraffic holds the last launch's traffic once the device is
	// closed (Traffic).
	closedTraffic [][]gpu.TrafficCount
	// capture holds the kernel stream's work while a capture is on.
	capture *graph
	// streams are the caller's streams (a driver of Streams.Open), cur
	// the one UseStream chose (nil: the driver's own, synchronous), and
	// onStream the launches made there not yet waited for, oldest first
	// (a communicator enqueues a launch while earlier ones run; Wait,
	// from the goroutine that serves them, takes the oldest).
	streams  *Streams
	cur      *stream
	streamMu sync.Mutex // guards onStream and freeLaunches
	onStream []*streamLaunch
	// freeLaunches are launch records waited for, reused.
	freeLaunches []*streamLaunch
}

// graph is a captured sequence of the kernel stream's work.
type graph struct{ steps []func() error }

func (g *graph) Release() error { return nil }

// Counts are one emulated launch's per-block counts.
type Counts struct {
	// HostMapped counts each block's accesses to host-mapped memory
	// (AllocHost), as the kernel's memory primitives report them.
	HostMapped []uint64
	// Ops counts each block's executed ops, pipeline iterations counted.
	Ops []uint64
}

// CountHostAccesses makes the later launches of d, a driver from Open or
// OpenIPC, count each block's accesses to host-mapped memory for
// HostAccesses (a test of every access against the mapped ranges, which
// launches skip by default).
func CountHostAccesses(d gpu.Driver) error {
	dd, ok := d.(*driver)
	if !ok {
		return fmt.Errorf("gpu-emu: %T is not an emulated device", d)
	}
	dd.count = true
	return nil
}

// CountTraffic makes the later launches of d, a driver from Open or
// OpenIPC, count the data traffic of every op of every block for Traffic:
// the bytes loaded and stored and the 32-byte sectors each warp-wide
// access touches (csrc/host/traffic.h). Counted launches run the data
// loops as a GPU does, thread by thread, and are several times slower.
func CountTraffic(d gpu.Driver) error {
	dd, ok := d.(*driver)
	if !ok {
		return fmt.Errorf("gpu-emu: %T is not an emulated device", d)
	}
	dd.traffic = true
	return nil
}

// Traffic returns the data traffic of the last launch of d, a driver from
// Open or OpenIPC after CountTraffic: per block of the grid, per op of the
// block (in the order the kernel runs them, pipeline bodies flattened;
// gpu.PlaceTraffic puts them on the plan's ops). After Close it returns
// the last launch's traffic before the close.
func Traffic(d gpu.Driver) ([][]gpu.TrafficCount, error) {
	dd, ok := d.(*driver)
	if !ok {
		return nil, fmt.Errorf("gpu-emu: %T is not an emulated device", d)
	}
	if !dd.traffic {
		return nil, errors.New("gpu-emu: traffic is not counted (CountTraffic)")
	}
	if dd.closed {
		return dd.closedTraffic, nil
	}
	if dd.launch != 0 {
		return nil, errors.New("gpu-emu: a launch is running")
	}
	out := make([][]gpu.TrafficCount, int(C.mg_emu_traffic_blocks(dd.dev)))
	for b := range out {
		n := C.mg_emu_traffic(dd.dev, C.uint(b), nil, 0)
		if n == 0 {
			continue // a block that ran no op
		}
		w := make([]uint64, 6*int(n))
		C.mg_emu_traffic(dd.dev, C.uint(b), (*C.uint64_t)(unsafe.Pointer(&w[0])), n)
		ops := make([]gpu.TrafficCount, n)
		for i := range ops {
			v := w[6*i:]
			ops[i] = gpu.TrafficCount{Loaded: v[0], Stored: v[1], Polled: v[2], Requests: v[3], Sectors: v[4], MinSectors: v[5]}
		}
		out[b] = ops
	}
	return out, nil
}

// HostAccesses returns the per-block counts of the last launch of d, a
// driver from Open or OpenIPC; the accesses to host-mapped memory only
// after CountHostAccesses.
func HostAccesses(d gpu.Driver) (Counts, error) {
	dd, ok := d.(*driver)
	if !ok {
		return Counts{}, fmt.Errorf("gpu-emu: %T is not an emulated device", d)
	}
	if !dd.count {
		return Counts{}, errors.New("gpu-emu: host accesses are not counted (CountHostAccesses)")
	}
	if dd.launch != 0 {
		return Counts{}, errors.New("gpu-emu: a launch is running")
	}
	const most = 1 << 16
	h, o := make([]uint64, most), make([]uint64, most)
	n := C.mg_emu_counts(dd.dev, (*C.uint64_t)(unsafe.Pointer(&h[0])), (*C.uint64_t)(unsafe.Pointer(&o[0])), most)
	return Counts{HostMapped: h[:n], Ops: o[:n]}, nil
}

// countFlags is what launches count, as mg_emu_launch takes it.
func (d *driver) countFlags() C.int {
	f := C.int(0)
	if d.count {
		f |= 1
	}
	if d.traffic {
		f |= 2
	}
	return f
}

// mode is the kind of allocation as mg_emu_alloc takes it: 1 memory
// files (OpenIPC), 2 guarded (GuardEnv), 0 heap.
func (d *driver) mode() C.int {
	switch {
	case d.ipc:
		return 1
	case d.guard:
		return 2
	}
	return 0
}

func (d *driver) Info() gpu.DeviceInfo {
	return gpu.DeviceInfo{Name: "host emulation (g++-built kernel)", MaxThreadsPerBlock: 1024, MaxSharedPerBlock: 1 << 20,
		DefaultThreads: DefaultThreads, MaxTotalThreads: MaxThreads}
}

func (d *driver) Alloc(n uint64) (gpu.DevPtr, error) {
	p, errno := C.mg_emu_alloc(C.uint64_t(n), d.mode())
	if p == 0 {
		return 0, allocError(n, errno)
	}
	return gpu.DevPtr(p), nil
}

func (d *driver) AllocHost(n uint64) (gpu.HostMem, error) {
	p, err := d.Alloc(n)
	if err != nil {
		return nil, err
	}
	C.mg_emu_dev_map(d.dev, C.uint64_t(p), C.uint64_t(n))
	return &hostMem{d: d, p: p, n: n}, nil
}

// Free gives p back once the caller's streams have run the work
// enqueued on them so far (Streams.freeAfter), at once on a driver that
// has none.
func (d *driver) Free(p gpu.DevPtr) error {
	mode := d.mode()
	if d.streams == nil {
		C.mg_emu_free(C.uint64_t(p), mode)
		return nil
	}
	d.streams.freeAfter(func() { C.mg_emu_free(C.uint64_t(p), mode) })
	return nil
}

// allocError is a failed allocation of n bytes with mg_emu_alloc's errno:
// a shareable allocation is a memory file, so that a process out of file
// descriptors is not out of memory.
func allocError(n uint64, errno error) error {
	if errors.Is(errno, syscall.EMFILE) || errors.Is(errno, syscall.ENFILE) {
		var lim syscall.Rlimit
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		return fmt.Errorf("no file descriptor for a shareable allocation of %d bytes (a memory file): %v (RLIMIT_NOFILE, ulimit -n, is %d)", n, errno, lim.Cur)
	}
	return fmt.Errorf("out of host memory for %d bytes", n)
}

// Retain holds allocation p for a peer rank of this process that took
// its address (gpu.Retainer): its owner's Free gives it back only at the
// last Release.
func (d *driver) Retain(p gpu.DevPtr) { C.mg_emu_retain(C.uint64_t(p)) }

// Release ends one Retain of p.
func (d *driver) Release(p gpu.DevPtr) { C.mg_emu_release(C.uint64_t(p)) }

var _ gpu.Retainer = (*driver)(nil)

func (d *driver) HtoD(dst gpu.DevPtr, src []byte) error {
	if len(src) > 0 {
		C.mg_emu_htod(C.uint64_t(dst), unsafe.Pointer(&src[0]), C.uint64_t(len(src)))
	}
	return nil
}

// HostAddr is b's address: the kernel runs on host memory. Not under
// ThreadSanitizer, which cannot see the Go runtime's mapping of Go memory
// (emu.cc copies through staging there).
func (d *driver) HostAddr(b []byte) (gpu.DevPtr, bool) {
	if len(b) == 0 || C.mg_emu_tsan() != 0 {
		return 0, false
	}
	return gpu.DevPtr(uintptr(unsafe.Pointer(&b[0]))), true
}

var _ gpu.HostMapper = (*driver)(nil)

func (d *driver) DtoH(dst []byte, src gpu.DevPtr) error {
	if len(dst) > 0 {
		C.mg_emu_dtoh(unsafe.Pointer(&dst[0]), C.uint64_t(src), C.uint64_t(len(dst)))
	}
	return nil
}

// Occupancy is unlimited up to MaxThreads emulated threads.
func (d *driver) Occupancy(block, shmem int) (int, error) {
	if block <= 0 {
		return 0, fmt.Errorf("block of %d threads", block)
	}
	return max(MaxThreads/block, 1), nil
}

// UseKernel selects the kernel entry of later launches.
func (d *driver) UseKernel(name string) error {
	cname := cString(name)
	e := C.mg_emu_entry((*C.char)(unsafe.Pointer(&cname[0])))
	if e < 0 {
		return fmt.Errorf("gpu-emu: no kernel entry %q", name)
	}
	d.entry = e
	return nil
}

// stream runs step now, or records it while a capture is on: the
// emulated kernel stream has no queue, since a launch is waited for
// before the session's next work.
func (d *driver) stream(what string, step func() error) error {
	return d.streamOp(what, streamOp{kind: opFunc, f: step})
}

// streamOp is stream for a piece of work held by value.
func (d *driver) streamOp(what string, op streamOp) error {
	if d.capture != nil {
		d.capture.steps = append(d.capture.steps, op.run)
		return nil
	}
	if d.cur != nil {
		return d.cur.pushOp(what, op)
	}
	if d.launch != 0 {
		return fmt.Errorf("gpu-emu: %s while a launch is running", what)
	}
	return op.run()
}

func (d *driver) Launch(grid, block, shmem int, args gpu.DevPtr) error {
	if grid*block > MaxThreads {
		return fmt.Errorf("%d blocks of %d threads: the emulation runs at most %d host threads", grid, block, MaxThreads)
	}
	if d.entry < 0 {
		return errors.New("gpu-emu: launch before UseKernel")
	}
	if d.cur != nil && d.capture == nil {
		return d.launchOnStream(grid, block, shmem, args)
	}
	return d.stream("launch", func() error {
		if d.launch != 0 {
			return errors.New("a launch is already running")
		}
		h := C.mg_emu_launch(d.dev, d.entry, C.uint(grid), C.uint(block), C.uint(shmem), C.uint64_t(args), d.countFlags())
		if h == 0 {
			return fmt.Errorf("could not start %d host threads", grid*block)
		}
		d.launch = h
		return nil
	})
}

// Enqueue copies host memory to the device on the kernel's stream.
func (d *driver) Enqueue(dst gpu.DevPtr, h gpu.HostMem, off, n uint64) error {
	if off+n > h.Len() {
		return fmt.Errorf("gpu-emu: enqueue of %d bytes at %d of %d bytes of host memory", n, off, h.Len())
	}
	src := h.Dev() + gpu.DevPtr(off)
	return d.streamOp("copy", streamOp{kind: opCopy, dst: uint64(dst), src: uint64(src), n: n})
}

// CopyOnStream copies n bytes of device memory from src to dst when the
// caller's stream st reaches the copy.
func (d *driver) CopyOnStream(st gpu.Stream, dst, src gpu.DevPtr, n uint64) error {
	if d.streams == nil {
		return errors.New("gpu-emu: this device was not opened from emu.Streams, so it has no caller's streams")
	}
	s, err := d.streams.get(st)
	if err != nil {
		return err
	}
	return s.pushOp("copy", streamOp{kind: opCopy, dst: uint64(dst), src: uint64(src), n: n})
}

// Zero clears device memory on the kernel's stream.
func (d *driver) Zero(dst gpu.DevPtr, n uint64) error {
	return d.streamOp("memset", streamOp{kind: opZero, dst: uint64(dst), n: n})
}

// BeginCapture records the kernel stream's work instead of running it.
func (d *driver) BeginCapture() error {
	if d.capture != nil {
		return errors.New("gpu-emu: a capture is already on")
	}
	d.capture = &graph{}
	return nil
}

// EndCapture returns the recorded work.
func (d *driver) EndCapture() (gpu.Graph, error) {
	if d.capture == nil {
		return nil, errors.New("gpu-emu: no capture is on")
	}
	g := d.capture
	d.capture = nil
	return g, nil
}

// Replay runs a captured graph's work in order.
func (d *driver) Replay(g gpu.Graph) error {
	gg, ok := g.(*graph)
	if !ok {
		return fmt.Errorf("gpu-emu: %T is not a graph of the emulated device", g)
	}
	if d.capture != nil {
		return errors.New("gpu-emu: replay during a capture")
	}
	for _, step := range gg.steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// Peek reads device memory while the kernel may run: word by word,
// atomically, as the side stream's copy engine would.
func (d *driver) Peek(dst []byte, src gpu.DevPtr) error {
	if len(dst)%8 != 0 || src%8 != 0 {
		return fmt.Errorf("gpu-emu: peek of %d bytes at %#x is not in 8-byte words", len(dst), uint64(src))
	}
	for i := 0; i < len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], uint64(C.mg_emu_load(C.uint64_t(uint64(src)+uint64(i)))))
	}
	return nil
}

// Poke writes a 32-bit word while the kernel may run.
func (d *driver) Poke(dst gpu.DevPtr, v uint32) error {
	C.mg_emu_store32(C.uint64_t(dst), C.uint32_t(v))
	return nil
}

// Post writes a 64-bit word after the earlier copies (which are done
// when Copy returns).
func (d *driver) Post(dst gpu.DevPtr, v uint64) error {
	C.mg_emu_post(d.dev, C.uint64_t(dst), C.uint64_t(v))
	return nil
}

func (d *driver) Wait() error {
	if l := d.takeStreamLaunch(); l != nil {
		return d.waitStreamLaunch(l)
	}
	if d.launch == 0 {
		return errors.New("no launch is running")
	}
	C.mg_emu_wait(d.launch)
	d.launch = 0
	return nil
}

func (d *driver) Copy(dst, src gpu.DevPtr, n uint64, packets bool) error {
	p := C.int(0)
	if packets {
		p = 1
	}
	C.mg_emu_copy(d.dev, C.uint64_t(dst), C.uint64_t(src), C.uint64_t(n), p)
	return nil
}

func (d *driver) Fence() error {
	C.mg_emu_fence()
	return nil
}

// ipcMagic opens every handle of the emulated device.
const ipcMagic = "mgemuipc"

// IpcGet names the allocation's memory file by this process's id and
// its descriptor: a process of the same user on the same host opens it
// through /proc/PID/fd/FD (Linux only).
func (d *driver) IpcGet(p gpu.DevPtr) (gpu.IpcHandle, error) {
	var h gpu.IpcHandle
	if !d.ipc {
		return h, errors.New("ipc: this emulated device was opened without IPC (emu.OpenIPC exports memory)")
	}
	var n C.uint64_t
	fd := C.mg_emu_ipc_get(C.uint64_t(p), &n)
	if fd < 0 {
		return h, fmt.Errorf("ipc: %#x is not the start of an exportable allocation of the emulated device (memory files need Linux)", uint64(p))
	}
	copy(h[:8], ipcMagic)
	binary.LittleEndian.PutUint64(h[8:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(h[16:], uint64(fd))
	binary.LittleEndian.PutUint64(h[24:], uint64(n))
	return h, nil
}

// IpcOpen maps the memory file a handle names.
func (d *driver) IpcOpen(h gpu.IpcHandle) (gpu.DevPtr, error) {
	if string(h[:8]) != ipcMagic {
		return 0, errors.New("ipc: not a handle of the emulated device")
	}
	pid, fd, n := binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint64(h[16:]), binary.LittleEndian.Uint64(h[24:])
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	cpath := cString(path)
	p, err := C.mg_emu_ipc_open((*C.char)(unsafe.Pointer(&cpath[0])), C.uint64_t(n))
	if p == 0 {
		return 0, fmt.Errorf("ipc: mapping %d bytes of %s: %v", n, path, err)
	}
	return gpu.DevPtr(p), nil
}

// IpcClose unmaps a peer's memory.
func (d *driver) IpcClose(p gpu.DevPtr) error {
	if C.mg_emu_ipc_close(C.uint64_t(p)) != 0 {
		return fmt.Errorf("ipc: %#x was not opened by IpcOpen", uint64(p))
	}
	return nil
}

func (d *driver) Close() error {
	if d.closed {
		return nil
	}
	var err error
	for d.launch != 0 || d.streamLaunches() > 0 {
		if werr := d.Wait(); err == nil {
			err = werr
		}
	}
	if d.traffic {
		d.closedTraffic, _ = Traffic(d)
	}
	d.closed = true
	C.mg_emu_dev_free(d.dev)
	d.dev = nil
	return err
}

// hostMem is "host-mapped" memory: on the emulated device all memory is
// host memory; its words are accessed with C++ atomics.
type hostMem struct {
	d *driver
	p gpu.DevPtr
	n uint64
}

func (h *hostMem) Dev() gpu.DevPtr { return h.p }
func (h *hostMem) Len() uint64     { return h.n }
func (h *hostMem) Load(off uint64) uint64 {
	return uint64(C.mg_emu_load(C.uint64_t(uint64(h.p) + off)))
}
func (h *hostMem) Store(off, v uint64) { C.mg_emu_store(C.uint64_t(uint64(h.p)+off), C.uint64_t(v)) }
func (h *hostMem) Add(off, v uint64) uint64 {
	return uint64(C.mg_emu_add(C.uint64_t(uint64(h.p)+off), C.uint64_t(v)))
}
func (h *hostMem) Free() error {
	if h.d.dev != nil {
		C.mg_emu_dev_unmap(h.d.dev, C.uint64_t(h.p))
	}
	C.mg_emu_free(C.uint64_t(h.p), h.d.mode())
	return nil
}
