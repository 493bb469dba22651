//go:build cuda

package cuda

// driver.go holds Open and the driver: a device's primary context, the
// interpreter's module and function, and two non-blocking streams (the
// launch's and the proxy copies'). Every call into the driver API runs
// through do, which locks the OS thread and makes the context current for
// the call's duration.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/mscclgo/mscclgo/gpu"
	"gorgonia.org/cu"
)

// ErrClosed is returned by the calls of a closed driver.
var ErrClosed = errors.New("cuda: driver closed")

// driver is the gpu.Driver of one device.
type driver struct {
	dev    cu.Device
	ctx    cu.CUContext // the device's primary context, retained
	mod    cu.Module
	fn     cu.Function
	launch cu.Stream // the interpreter's launches and their table updates
	copies cu.Stream // the proxy's copies and posted words
	watch  cu.Stream // the watchdog's reads and the abort write
	// sync carries the copies and clears the host waits for (HtoD, DtoH,
	// Alloc's zeroing): not the legacy stream, which would wait for the
	// caller's work there, and which a capture on a blocking stream
	// refuses (an implicit dependency).
	sync   cu.Stream
	info   gpu.DeviceInfo
	image  string // the kernel image loaded (kernels.go)
	shared int    // the dynamic shared memory every entry is allowed

	// The device as the process shares it (node.go).
	ordinal int
	uuid    string
	adm     *gpu.Admission

	mu        sync.Mutex // guards launched, ends, capturing, closed, peek, vmm and mcMaps
	launched  bool       // a launch on the driver's own stream not yet waited for
	capturing bool       // the launch stream records into a graph
	closed    bool
	// peek is pinned host memory for Peek's copies, grown as needed.
	peek    unsafe.Pointer
	peekLen uint64

	// A caller's stream (stream.go): with useExt the kernel stream's work
	// goes to ext, and each launch records an event there; ends are the
	// events of the launches not yet waited for, oldest first (mu): a
	// communicator enqueues a launch while earlier ones run, and Wait
	// takes the oldest.
	ext    cu.Stream
	useExt bool
	ends   []cu.Event

	// NVLS multicast (multicast.go): the driver's calls, memory from
	// AllocBindable and multicast objects mapped here.
	mc     mcAPI
	vmm    map[gpu.DevPtr]vmmAlloc
	mcMaps map[gpu.DevPtr]mcMap

	// The holds of the kernel stream (gate.go), made at the first Hold.
	gateMu sync.Mutex
	gate   *gate
}

var (
	_ gpu.Driver = (*driver)(nil)
	_ gpu.Device = (*driver)(nil)
)

// Open returns the driver of CUDA device number device (an ordinal of the
// devices CUDA_VISIBLE_DEVICES leaves visible). It retains the device's
// primary context, loads the interpreter and creates its streams. Its
// launch admission is its own: sessions that share a device should be
// opened from one Node instead.
func Open(device int) (gpu.Driver, error) { return NewNode().Open(device) }

// open opens device without its Node's part.
func open(device int) (*driver, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if device < 0 || device >= n {
		return nil, fmt.Errorf("cuda: device %d: there are %d CUDA devices", device, n)
	}
	dev, err := cu.GetDevice(device)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", device, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: retaining the primary context: %w", device, err)
	}
	d := &driver{dev: dev, ctx: ctx, ordinal: device, vmm: map[gpu.DevPtr]vmmAlloc{}, mcMaps: map[gpu.DevPtr]mcMap{}}
	if err := d.do(fmt.Sprintf("opening device %d", device), d.setup); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, err
	}
	return d, nil
}

// setup loads the module, sets the kernel's shared-memory limit, reads the
// device's limits and creates the streams; on error it releases what it
// made. The context is current.
func (d *driver) setup() (err error) {
	defer func() {
		if err != nil {
			_ = d.teardown()
		}
	}()
	name, err := d.dev.Name()
	if err != nil {
		return fmt.Errorf("reading the device name: %w", err)
	}
	attrs, err := d.dev.Attributes(cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor, cu.MultiprocessorCount,
		cu.MaxThreadsPerBlock, attrSharedOptin, cu.CanMapHostMemory, cu.UnifiedAddressing)
	if err != nil {
		return fmt.Errorf("reading the device attributes: %w", err)
	}
	major, minor, sms, maxThreads, optin := attrs[0], attrs[1], attrs[2], attrs[3], attrs[4]
	if attrs[5] == 0 || attrs[6] == 0 {
		return fmt.Errorf("%s cannot map host memory into a unified address space, which the proxy FIFOs need", name)
	}
	// A driver older than CUDA 12.1 does not know the attribute: no
	// multicast.
	multicast := false
	if mc, err := d.dev.Attribute(attrMulticast); err == nil && mc != 0 {
		multicast = true
	}
	if d.mod, d.image, err = loadForDevice(major, minor, multicast); err != nil {
		return err
	}
	if d.fn, err = d.mod.Function(kernelName); err != nil {
		return fmt.Errorf("finding %s in %s: %w", kernelName, d.image, err)
	}
	fnThreads, err := d.fn.Attribute(cu.FnMaxThreadsPerBlock)
	if err != nil {
		return fmt.Errorf("reading the kernel's thread limit: %w", err)
	}
	static, err := d.fn.Attribute(cu.SharedSizeBytes)
	if err != nil {
		return fmt.Errorf("reading the kernel's static shared memory: %w", err)
	}
	shared := max(optin-static, 0)
	if err := setMaxDynamicShared(d.fn, shared); err != nil {
		return fmt.Errorf("allowing %d bytes of dynamic shared memory: %w", shared, err)
	}
	d.info = gpu.DeviceInfo{
		Name:               name,
		SMs:                sms,
		MaxThreadsPerBlock: min(maxThreads, fnThreads),
		MaxSharedPerBlock:  shared,
	}
	d.info.Multicast = multicast
	u, err := d.dev.UUID()
	if err != nil {
		return fmt.Errorf("reading the device's UUID: %w", err)
	}
	d.uuid = "GPU-" + u.String()
	if d.launch, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("creating the launch stream: %w", err)
	}
	if d.copies, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("creating the copy stream: %w", err)
	}
	if d.watch, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("creating the watch stream: %w", err)
	}
	if d.sync, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("creating the stream of synchronous copies: %w", err)
	}
	d.shared = shared
	return nil
}

// teardown waits for and destroys the streams and unloads the module,
// returning the first error. The context is current.
func (d *driver) teardown() error {
	var errs []error
	if d.peek != nil {
		if err := cu.MemFreeHost(d.peek); err != nil {
			errs = append(errs, fmt.Errorf("freeing the watch buffer: %w", err))
		}
		d.peek, d.peekLen = nil, 0
	}
	for _, s := range []*cu.Stream{&d.launch, &d.copies, &d.watch, &d.sync} {
		if *s == (cu.Stream{}) {
			continue
		}
		if err := s.Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("synchronizing a stream: %w", err))
		}
		if err := s.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("destroying a stream: %w", err))
		}
	}
	if err := d.freeGate(); err != nil {
		errs = append(errs, err)
	}
	for i := range d.ends {
		if err := d.ends[i].Synchronize(); err != nil {
			errs = append(errs, fmt.Errorf("waiting for a launch: %w", err))
		}
		if err := cu.DestroyEvent(&d.ends[i]); err != nil {
			errs = append(errs, fmt.Errorf("destroying a launch event: %w", err))
		}
	}
	d.ends = nil
	if d.mod != (cu.Module{}) {
		if err := d.mod.Unload(); err != nil {
			errs = append(errs, fmt.Errorf("unloading the module: %w", err))
		}
		d.mod = cu.Module{}
	}
	return errors.Join(errs...)
}

// do runs fn on the calling goroutine's OS thread, locked, with the
// driver's context pushed current, and wraps its error with what.
func (d *driver) do(what string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.PushCurrentCtx(d.ctx); err != nil {
		return fmt.Errorf("cuda: %s: making the context current: %w", what, err)
	}
	// Relaxed capture interaction on this thread while it works for the
	// driver: an allocation or a synchronous copy of ours, made while
	// the caller's thread captures a stream in global mode (PyTorch's
	// default), must neither fail nor invalidate that capture.
	prev, err := exchangeCaptureMode(captureRelaxed)
	if err == nil {
		err = fn()
		if _, merr := exchangeCaptureMode(prev); merr != nil && err == nil {
			err = fmt.Errorf("restoring the thread's capture mode: %w", merr)
		}
	}
	if _, perr := cu.PopCurrentCtx(); perr != nil && err == nil {
		err = fmt.Errorf("restoring the thread's context: %w", perr)
	}
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	return nil
}

// open fails with ErrClosed once the driver is closed.
func (d *driver) open() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return nil
}

// Info describes the device.
func (d *driver) Info() gpu.DeviceInfo { return d.info }

// Alloc returns n bytes of zeroed device memory (cuMemAlloc aligns to at
// least 256 bytes).
func (d *driver) Alloc(n uint64) (gpu.DevPtr, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	if n == 0 || n > 1<<62 {
		return 0, fmt.Errorf("cuda: alloc: bad size %d", n)
	}
	var p cu.DevicePtr
	err := d.do("alloc", func() error {
		var err error
		if p, err = cu.MemAlloc(int64(n)); err != nil {
			return fmt.Errorf("%d bytes: %w", n, err)
		}
		if err := d.clear(p, n); err != nil {
			_ = cu.MemFree(p)
			return fmt.Errorf("zeroing %d bytes: %w", n, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return gpu.DevPtr(p), nil
}

// AllocHost returns n bytes of zeroed, pinned, device-mapped host memory.
func (d *driver) AllocHost(n uint64) (gpu.HostMem, error) {
	if err := d.open(); err != nil {
		return nil, err
	}
	if n == 0 || n > 1<<40 {
		return nil, fmt.Errorf("cuda: host alloc: bad size %d", n)
	}
	n = (n + 7) &^ 7
	var h *hostMem
	err := d.do("host alloc", func() error {
		p, dev, err := hostAlloc(n)
		if err != nil {
			return fmt.Errorf("%d bytes: %w", n, err)
		}
		h = newHostMem(d, p, dev, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// IpcGet exports the allocation at p (cuIpcGetMemHandle).
func (d *driver) IpcGet(p gpu.DevPtr) (gpu.IpcHandle, error) {
	var h gpu.IpcHandle
	if err := d.open(); err != nil {
		return h, err
	}
	err := d.do("exporting device memory", func() error {
		var err error
		h, err = ipcGet(uint64(p))
		return err
	})
	return h, err
}

// IpcOpen maps another process's allocation (cuIpcOpenMemHandle, with
// peer access enabled lazily).
func (d *driver) IpcOpen(h gpu.IpcHandle) (gpu.DevPtr, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	var p uint64
	err := d.do("opening a peer's device memory", func() error {
		var err error
		p, err = ipcOpen(h)
		return err
	})
	return gpu.DevPtr(p), err
}

// IpcClose unmaps memory from IpcOpen (cuIpcCloseMemHandle).
func (d *driver) IpcClose(p gpu.DevPtr) error {
	if err := d.open(); err != nil {
		return err
	}
	return d.do("closing a peer's device memory", func() error { return ipcClose(uint64(p)) })
}

// Free releases memory from Alloc.
func (d *driver) Free(p gpu.DevPtr) error {
	if err := d.open(); err != nil {
		return err
	}
	return d.do("free", func() error {
		if ok, err := d.freeVMM(p); ok {
			return err
		}
		return cu.MemFree(cu.DevicePtr(p))
	})
}

// HtoD copies src to device memory at dst and returns once the data is
// there.
func (d *driver) HtoD(dst gpu.DevPtr, src []byte) error {
	if err := d.open(); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return d.do("copy to the device", func() error {
		if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(unsafe.SliceData(src)), int64(len(src)), d.sync); err != nil {
			return fmt.Errorf("%d bytes: %w", len(src), err)
		}
		if err := d.sync.Synchronize(); err != nil {
			return fmt.Errorf("%d bytes: %w", len(src), err)
		}
		return nil
	})
}

// DtoH copies device memory at src into dst (on the driver's stream of
// synchronous copies, which does not wait for a running kernel).
func (d *driver) DtoH(dst []byte, src gpu.DevPtr) error {
	if err := d.open(); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return d.do("copy from the device", func() error {
		if err := cu.MemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), cu.DevicePtr(src), int64(len(dst)), d.sync); err != nil {
			return fmt.Errorf("%d bytes: %w", len(dst), err)
		}
		if err := d.sync.Synchronize(); err != nil {
			return fmt.Errorf("%d bytes: %w", len(dst), err)
		}
		return nil
	})
}

// clear zeroes n bytes at p on the stream of synchronous copies and waits
// for it (the context current).
func (d *driver) clear(p cu.DevicePtr, n uint64) error {
	if err := cu.MemsetD8Async(p, 0, int64(n), d.sync); err != nil {
		return err
	}
	return d.sync.Synchronize()
}

// Occupancy returns how many blocks of block threads with shmem bytes of
// dynamic shared memory the device holds at once.
func (d *driver) Occupancy(block, shmem int) (int, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	if block <= 0 || block > d.info.MaxThreadsPerBlock {
		return 0, fmt.Errorf("cuda: occupancy: %d threads per block, the kernel allows 1 to %d", block,
			d.info.MaxThreadsPerBlock)
	}
	if shmem < 0 || shmem > d.info.MaxSharedPerBlock {
		return 0, fmt.Errorf("cuda: occupancy: %d bytes of shared memory per block, the device allows %d", shmem,
			d.info.MaxSharedPerBlock)
	}
	var perSM int
	err := d.do("occupancy", func() error {
		var err error
		perSM, err = d.fn.MaxActiveBlocksPerMultiProcessor(block, int64(shmem))
		return err
	})
	if err != nil {
		return 0, err
	}
	if perSM <= 0 {
		return 0, fmt.Errorf("cuda: occupancy: a block of %d threads with %d bytes of shared memory does not fit on "+
			"a multiprocessor of %s", block, shmem, d.info.Name)
	}
	return perSM * d.info.SMs, nil
}

// Launch starts the interpreter on its stream and returns at once.
func (d *driver) Launch(grid, block, shmem int, args gpu.DevPtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.launched {
		return errors.New("cuda: launch: the previous launch was not waited for")
	}
	if grid <= 0 || block <= 0 || shmem < 0 {
		return fmt.Errorf("cuda: launch: bad shape: %d blocks of %d threads, %d bytes of shared memory", grid, block, shmem)
	}
	// Alloc and HtoD finish their legacy-stream work before they return,
	// so the launch needs no synchronisation first.
	recorded := false // the launch went into the caller's graph
	err := d.do("launch", func() error {
		arg := uint64(args)
		st := d.launchStream()
		if d.useExt {
			var err error
			if recorded, err = capturing(st); err != nil {
				return err
			}
		}
		if err := d.fn.Launch(grid, 1, 1, block, 1, 1, shmem, st, []unsafe.Pointer{unsafe.Pointer(&arg)}); err != nil {
			return err
		}
		if recorded {
			return nil
		}
		return d.recordEnd(st)
	})
	if err != nil {
		return fmt.Errorf("%w (%d blocks of %d threads, %d bytes of shared memory)", err, grid, block, shmem)
	}
	if !d.capturing && !d.useExt {
		d.launched = true
	}
	return nil
}

// UseKernel loads the entry name of the module for later launches.
func (d *driver) UseKernel(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return d.do("selecting the kernel "+name, func() error {
		fn, err := d.mod.Function(name)
		if err != nil {
			return fmt.Errorf("finding %s in %s: %w", name, d.image, err)
		}
		if err := setMaxDynamicShared(fn, d.shared); err != nil {
			return fmt.Errorf("allowing %d bytes of dynamic shared memory: %w", d.shared, err)
		}
		d.fn = fn
		return nil
	})
}

// Enqueue copies pinned host memory to the device on the launch stream.
func (d *driver) Enqueue(dst gpu.DevPtr, h gpu.HostMem, off, n uint64) error {
	hm, ok := h.(*hostMem)
	if !ok || hm.d != d {
		return fmt.Errorf("cuda: enqueue from %T, not this driver's host memory", h)
	}
	if off+n > hm.n || off+n < off {
		return fmt.Errorf("cuda: enqueue of %d bytes at %d of %d bytes of host memory", n, off, hm.n)
	}
	if err := d.open(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.do("enqueueing a copy", func() error {
		return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Add(hm.p, off), int64(n), d.kernelStream())
	})
}

// Zero clears device memory on the launch stream.
func (d *driver) Zero(dst gpu.DevPtr, n uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.do("enqueueing a memset", func() error {
		return cu.MemsetD8Async(cu.DevicePtr(dst), 0, int64(n), d.kernelStream())
	})
}

// Peek copies device memory out on the watch stream through pinned
// memory and waits for that stream only.
func (d *driver) Peek(dst []byte, src gpu.DevPtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	n := uint64(len(dst))
	if n == 0 {
		return nil
	}
	return d.do("reading device memory on the watch stream", func() error {
		if d.peekLen < n {
			if d.peek != nil {
				if err := cu.MemFreeHost(d.peek); err != nil {
					return err
				}
				d.peek, d.peekLen = nil, 0
			}
			p, _, err := hostAlloc(n)
			if err != nil {
				return fmt.Errorf("pinning %d bytes: %w", n, err)
			}
			d.peek, d.peekLen = p, n
		}
		if err := cu.MemcpyDtoHAsync(d.peek, cu.DevicePtr(src), int64(n), d.watch); err != nil {
			return err
		}
		if err := d.watch.Synchronize(); err != nil {
			return err
		}
		copy(dst, unsafe.Slice((*byte)(d.peek), n))
		return nil
	})
}

// Poke writes a 32-bit word on the watch stream and waits for it.
func (d *driver) Poke(dst gpu.DevPtr, v uint32) error {
	if err := d.open(); err != nil {
		return err
	}
	return d.do("writing device memory on the watch stream", func() error {
		if err := cu.MemsetD32Async(cu.DevicePtr(dst), uint(v), 1, d.watch); err != nil {
			return err
		}
		return d.watch.Synchronize()
	})
}

// Post writes a 64-bit word on the copy stream, after the copies before
// it: two 32-bit memsets, the low word first (the value is taken now).
// A reader between the two sees the old value, or, when the high word
// changes, a smaller one: the words it guards only grow, so a waiter
// just waits on.
func (d *driver) Post(dst gpu.DevPtr, v uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	if dst%8 != 0 {
		return fmt.Errorf("cuda: post to %#x, not an 8-byte word", uint64(dst))
	}
	return d.do("posting a word on the copy stream", func() error {
		if err := cu.MemsetD32Async(cu.DevicePtr(dst), uint(uint32(v)), 1, d.copies); err != nil {
			return err
		}
		return cu.MemsetD32Async(cu.DevicePtr(dst+4), uint(uint32(v>>32)), 1, d.copies)
	})
}

// BeginCapture starts capturing the launch stream (relaxed mode: the
// other streams go on).
func (d *driver) BeginCapture() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.capturing || d.launched {
		return errors.New("cuda: capture: a capture or a launch is in progress")
	}
	err := d.do("beginning a capture", func() error { return beginCapture(d.launch) })
	if err == nil {
		d.capturing = true
	}
	return err
}

// EndCapture ends the capture and instantiates the graph.
func (d *driver) EndCapture() (gpu.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.capturing {
		return nil, errors.New("cuda: no capture is on")
	}
	d.capturing = false
	var g *graph
	err := d.do("ending a capture", func() error {
		var err error
		g, err = endCapture(d.launch)
		return err
	})
	if err != nil {
		return nil, err
	}
	g.d = d
	return g, nil
}

// Replay launches a captured graph on the launch stream.
func (d *driver) Replay(g gpu.Graph) error {
	gg, ok := g.(*graph)
	if !ok || gg.d != d {
		return fmt.Errorf("cuda: replay of %T, not a graph of this driver", g)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.launched || d.capturing {
		return errors.New("cuda: replay: the previous launch was not waited for")
	}
	if err := d.do("replaying a graph", func() error { return graphLaunch(gg, d.launch) }); err != nil {
		return err
	}
	d.launched = true
	return nil
}

// Wait blocks until the launched kernel has ended and returns its error
// (a kernel fault leaves the context unusable).
func (d *driver) Wait() error {
	if err := d.open(); err != nil {
		return err
	}
	d.mu.Lock()
	if len(d.ends) > 0 {
		// The oldest launch on a caller's stream only, not the caller's
		// later work there.
		ev := d.ends[0]
		d.ends = d.ends[1:]
		d.mu.Unlock()
		return d.do("waiting for the kernel", func() error {
			err := ev.Synchronize()
			if derr := cu.DestroyEvent(&ev); err == nil && derr != nil {
				err = fmt.Errorf("destroying the launch event: %w", derr)
			}
			return err
		})
	}
	d.mu.Unlock()
	err := d.do("waiting for the kernel", d.launch.Synchronize)
	d.mu.Lock()
	d.launched = false
	d.mu.Unlock()
	return err
}

// Copy copies n bytes between device addresses on the copy stream. The
// copy engines write aligned 8-byte words whole, which LL packets need.
func (d *driver) Copy(dst, src gpu.DevPtr, n uint64, packets bool) error {
	if err := d.open(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if packets && (dst%8 != 0 || src%8 != 0 || n%8 != 0) {
		return fmt.Errorf("cuda: packet copy of %d bytes from %#x to %#x is not in 8-byte words", n, src, dst)
	}
	return d.do("proxy copy", func() error {
		if err := cu.MemcpyAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n), d.copies); err != nil {
			return fmt.Errorf("%d bytes from %#x to %#x: %w", n, src, dst, err)
		}
		return nil
	})
}

// Fence waits until every earlier Copy is complete.
func (d *driver) Fence() error {
	if err := d.open(); err != nil {
		return err
	}
	return d.do("proxy fence", d.copies.Synchronize)
}

// Close waits for the streams, releases them, the module and the
// context. Memory still allocated goes with the context when no other
// user retains it.
func (d *driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.releaseAll()
	err := d.do("close", d.teardown)
	if rerr := d.dev.ReleasePrimaryCtx(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("cuda: close: releasing the primary context: %w", rerr))
	}
	return err
}
