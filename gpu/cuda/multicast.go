//go:build cuda

package cuda

// multicast.go holds NVLS multicast (gpu.Multicaster): memory a multicast
// object can bind, allocated with the virtual memory management API
// (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess for this
// device and every device with peer access to it), and the multicast
// object's calls. Those (cuMulticastCreate, cuMulticastAddDevice,
// cuMulticastBindMem, cuMulticastUnbind, cuMulticastGetGranularity) came
// with CUDA 12.1: older headers lack them, so they are declared here with
// the driver's documented prototypes and looked up at run time with
// cuGetProcAddress; a driver without them has no multicast.

/*
#include <cuda.h>
#include <stdint.h>

// mg_mc_prop is CUmulticastObjectProp (CUDA 12.1).
typedef struct {
	unsigned int numDevices;
	size_t size;
	unsigned long long handleTypes;
	unsigned long long flags;
} mg_mc_prop;

typedef CUresult (*mg_mc_create_fn)(unsigned long long* mc, const mg_mc_prop* prop);
typedef CUresult (*mg_mc_add_fn)(unsigned long long mc, CUdevice dev);
typedef CUresult (*mg_mc_bind_fn)(unsigned long long mc, size_t mc_off, unsigned long long mem, size_t mem_off,
                                  size_t size, unsigned long long flags);
typedef CUresult (*mg_mc_unbind_fn)(unsigned long long mc, CUdevice dev, size_t mc_off, size_t size);
typedef CUresult (*mg_mc_gran_fn)(size_t* g, const mg_mc_prop* prop, int option);

// mg_mc_api holds the multicast calls, NULL where the driver lacks one.
typedef struct {
	void* create;
	void* add;
	void* bind;
	void* unbind;
	void* gran;
} mg_mc_api;

static CUresult mg_proc(const char* name, void** fn) {
#if CUDA_VERSION >= 12000
	return cuGetProcAddress(name, fn, 12010, CU_GET_PROC_ADDRESS_DEFAULT, NULL);
#else
	return cuGetProcAddress(name, fn, 12010, CU_GET_PROC_ADDRESS_DEFAULT);
#endif
}

// mg_mc_lookup fills a and returns the first call the driver lacks, or
// NULL.
static const char* mg_mc_lookup(mg_mc_api* a) {
	static const char* names[] = {"cuMulticastCreate", "cuMulticastAddDevice", "cuMulticastBindMem",
	                              "cuMulticastUnbind", "cuMulticastGetGranularity"};
	void** slots[] = {&a->create, &a->add, &a->bind, &a->unbind, &a->gran};
	for (int i = 0; i < 5; i++) {
		*slots[i] = NULL;
		if (mg_proc(names[i], slots[i]) != CUDA_SUCCESS || *slots[i] == NULL) return names[i];
	}
	return NULL;
}

// mg_mc_create creates a multicast object of devices devices and at
// least *size bytes, rounded up to the minimum granularity (*gran).
static CUresult mg_mc_create(const mg_mc_api* a, unsigned devices, size_t* size, size_t* gran, unsigned long long* mc) {
	mg_mc_prop p = {devices, *size, 0, 0};
	CUresult r = ((mg_mc_gran_fn)a->gran)(gran, &p, 0);
	if (r != CUDA_SUCCESS) return r;
	if (*gran == 0) return CUDA_ERROR_INVALID_VALUE;
	p.size = (*size + *gran - 1) / *gran * *gran;
	*size = p.size;
	return ((mg_mc_create_fn)a->create)(mc, &p);
}

static CUresult mg_mc_add(const mg_mc_api* a, unsigned long long mc, int dev) {
	return ((mg_mc_add_fn)a->add)(mc, (CUdevice)dev);
}

static CUresult mg_mc_bind(const mg_mc_api* a, unsigned long long mc, unsigned long long mem, size_t size) {
	return ((mg_mc_bind_fn)a->bind)(mc, 0, mem, 0, size, 0);
}

static CUresult mg_mc_unbind(const mg_mc_api* a, unsigned long long mc, int dev, size_t size) {
	return ((mg_mc_unbind_fn)a->unbind)(mc, (CUdevice)dev, 0, size);
}

// mg_mc_granularity is the minimum multicast granularity for one device.
static CUresult mg_mc_granularity(const mg_mc_api* a, size_t* g) {
	mg_mc_prop p = {1, 1, 0, 0};
	return ((mg_mc_gran_fn)a->gran)(g, &p, 0);
}

// mg_vmm_granularity is the allocation granularity of device dev.
static CUresult mg_vmm_granularity(int dev, size_t* g) {
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return cuMemGetAllocationGranularity(g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

// mg_map maps size bytes of handle h at a new range, readable and
// writable by the ndevs devices of devs; *call names a failed call.
static CUresult mg_map(unsigned long long h, size_t size, size_t align, const int* devs, int ndevs, CUdeviceptr* va,
                       const char** call) {
	CUresult r = cuMemAddressReserve(va, size, align, 0, 0);
	if (r != CUDA_SUCCESS) {
		*call = "cuMemAddressReserve";
		return r;
	}
	r = cuMemMap(*va, size, 0, h, 0);
	if (r != CUDA_SUCCESS) {
		*call = "cuMemMap";
		cuMemAddressFree(*va, size);
		return r;
	}
	CUmemAccessDesc d[64];
	if (ndevs > 64) ndevs = 64;
	for (int i = 0; i < ndevs; i++) {
		d[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		d[i].location.id = devs[i];
		d[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
	r = cuMemSetAccess(*va, size, d, (size_t)ndevs);
	if (r != CUDA_SUCCESS) {
		*call = "cuMemSetAccess";
		cuMemUnmap(*va, size);
		cuMemAddressFree(*va, size);
	}
	return r;
}

// mg_vmm_alloc creates size bytes (a multiple of the granularity) on
// device devs[0] and maps them for the ndevs devices of devs.
static CUresult mg_vmm_alloc(size_t size, size_t align, const int* devs, int ndevs, unsigned long long* h,
                             CUdeviceptr* va, const char** call) {
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = devs[0];
	CUresult r = cuMemCreate(h, size, &p, 0);
	if (r != CUDA_SUCCESS) {
		*call = "cuMemCreate";
		return r;
	}
	r = mg_map(*h, size, align, devs, ndevs, va, call);
	if (r != CUDA_SUCCESS) cuMemRelease(*h);
	return r;
}

// mg_unmap unmaps and frees a range from mg_map.
static CUresult mg_unmap(CUdeviceptr va, size_t size) {
	CUresult r = cuMemUnmap(va, size);
	CUresult f = cuMemAddressFree(va, size);
	return r != CUDA_SUCCESS ? r : f;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/mscclgo/mscclgo/gpu"
	"gorgonia.org/cu"
)

var _ gpu.Multicaster = (*driver)(nil)

// loadForDevice loads the interpreter for a device of compute capability
// major.minor: on a device with multicast the compute_90 PTX first, the
// only image with the multimem path (the driver compiles it), else, or
// when the driver does not take it, loadModule's choice.
func loadForDevice(major, minor int, multicast bool) (cu.Module, string, error) {
	if multicast && major >= 9 {
		if data, err := fs.ReadFile(kernelFS, path.Join("kernels", imagePTX)); err == nil && len(data) > 0 {
			if mod, err := cu.LoadData(string(data)); err == nil {
				return mod, imagePTX, nil
			}
		}
	}
	return loadModule(major, minor)
}

// Multimem reports whether the loaded kernel image has the multimem path
// (the compute_90 PTX, built with it).
func (d *driver) Multimem() bool { return d.image == imagePTX }

// mcAPI is the driver's multicast calls, looked up once per driver.
type mcAPI struct {
	once sync.Once
	api  C.mg_mc_api
	err  error
}

// vmmAlloc is memory from AllocBindable.
type vmmAlloc struct {
	h    C.ulonglong
	size uint64
}

// mcMap is a multicast object mapped into this device's address space.
type mcMap struct {
	size uint64
}

// cuErr is the Error of call's result r.
func cuErr(call string, r C.CUresult) error { return &Error{Call: call, Code: int(r)} }

// multicast returns the multicast calls or why there are none. The
// table is returned by value: a pointer into the driver, which holds Go
// pointers, may not be passed to C.
func (d *driver) multicast() (C.mg_mc_api, error) {
	d.mc.once.Do(func() {
		if !d.info.Multicast {
			d.mc.err = fmt.Errorf("cuda: %s has no NVLS multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)", d.info.Name)
			return
		}
		if missing := C.mg_mc_lookup(&d.mc.api); missing != nil {
			d.mc.err = fmt.Errorf("cuda: the driver has no %s (cuGetProcAddress): no NVLS multicast", C.GoString(missing))
		}
	})
	return d.mc.api, d.mc.err
}

// accessors returns this device and every device with peer access to
// its memory: the devices that may access memory allocated here.
func (d *driver) accessors() ([]C.int, error) {
	devs := []C.int{C.int(d.ordinal)}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("counting devices: %w", err)
	}
	for o := range n {
		if o == d.ordinal {
			continue
		}
		peer, err := cu.GetDevice(o)
		if err != nil {
			return nil, err
		}
		can, err := peer.CanAccessPeer(d.dev)
		if err != nil {
			return nil, fmt.Errorf("cuDeviceCanAccessPeer(%d, %d): %w", o, d.ordinal, err)
		}
		if can != 0 {
			devs = append(devs, C.int(o))
		}
	}
	return devs, nil
}

// bindGranularity is what bindable memory and its bindings are rounded
// to: the larger of the allocation and the multicast granularity.
func (d *driver) bindGranularity(api C.mg_mc_api) (uint64, error) {
	var ag, mg C.size_t
	if r := C.mg_vmm_granularity(C.int(d.ordinal), &ag); r != C.CUDA_SUCCESS {
		return 0, cuErr("cuMemGetAllocationGranularity", r)
	}
	if r := C.mg_mc_granularity(&api, &mg); r != C.CUDA_SUCCESS {
		return 0, cuErr("cuMulticastGetGranularity", r)
	}
	g := max(uint64(ag), uint64(mg))
	if g == 0 {
		return 0, errors.New("the driver reports a granularity of 0")
	}
	return g, nil
}

// AllocBindable returns n bytes of zeroed device memory, rounded up to the
// granularity, that a multicast object can bind: cuMemCreate on this
// device, mapped for it and every device with peer access to it. Free
// releases it.
func (d *driver) AllocBindable(n uint64) (gpu.DevPtr, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	api, err := d.multicast()
	if err != nil {
		return 0, err
	}
	if n == 0 || n > 1<<62 {
		return 0, fmt.Errorf("cuda: bindable alloc: bad size %d", n)
	}
	var va C.CUdeviceptr
	var a vmmAlloc
	err = d.do("allocating multicast-bindable memory", func() error {
		g, err := d.bindGranularity(api)
		if err != nil {
			return err
		}
		devs, err := d.accessors()
		if err != nil {
			return err
		}
		a.size = (n + g - 1) / g * g
		var call *C.char
		if r := C.mg_vmm_alloc(C.size_t(a.size), C.size_t(g), &devs[0], C.int(len(devs)), &a.h, &va, &call); r != C.CUDA_SUCCESS {
			return fmt.Errorf("%d bytes: %w", a.size, cuErr(C.GoString(call), r))
		}
		if err := d.clear(cu.DevicePtr(va), a.size); err != nil {
			_ = C.mg_unmap(va, C.size_t(a.size))
			_ = C.cuMemRelease(a.h)
			return fmt.Errorf("zeroing %d bytes: %w", a.size, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.vmm[gpu.DevPtr(va)] = a
	d.mu.Unlock()
	return gpu.DevPtr(va), nil
}

// freeVMM releases memory from AllocBindable; ok is false when p is not
// such memory. The context is current.
func (d *driver) freeVMM(p gpu.DevPtr) (ok bool, err error) {
	d.mu.Lock()
	a, ok := d.vmm[p]
	delete(d.vmm, p)
	d.mu.Unlock()
	if !ok {
		return false, nil
	}
	if r := C.mg_unmap(C.CUdeviceptr(p), C.size_t(a.size)); r != C.CUDA_SUCCESS {
		return true, cuErr("cuMemUnmap", r)
	}
	if r := C.cuMemRelease(a.h); r != C.CUDA_SUCCESS {
		return true, cuErr("cuMemRelease", r)
	}
	return true, nil
}

// MulticastCreate creates a multicast object for devices devices and at
// least size bytes per device (cuMulticastCreate); it returns the object
// and its size, rounded up to the multicast granularity.
func (d *driver) MulticastCreate(devices int, size uint64) (uint64, uint64, error) {
	if err := d.open(); err != nil {
		return 0, 0, err
	}
	api, err := d.multicast()
	if err != nil {
		return 0, 0, err
	}
	var mc C.ulonglong
	sz, g := C.size_t(size), C.size_t(0)
	err = d.do("creating a multicast object", func() error {
		if r := C.mg_mc_create(&api, C.uint(devices), &sz, &g, &mc); r != C.CUDA_SUCCESS {
			return fmt.Errorf("%d devices, %d bytes: %w", devices, size, cuErr("cuMulticastCreate", r))
		}
		return nil
	})
	return uint64(mc), uint64(sz), err
}

// MulticastAddDevice adds this device to the multicast object h
// (cuMulticastAddDevice).
func (d *driver) MulticastAddDevice(h uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	api, err := d.multicast()
	if err != nil {
		return err
	}
	return d.do("adding a device to a multicast object", func() error {
		if r := C.mg_mc_add(&api, C.ulonglong(h), C.int(d.ordinal)); r != C.CUDA_SUCCESS {
			return fmt.Errorf("device %d: %w", d.ordinal, cuErr("cuMulticastAddDevice", r))
		}
		return nil
	})
}

// MulticastBind binds the first size bytes of p's allocation (from
// AllocBindable) to h for this device (cuMulticastBindMem) and maps h
// into this device's address space (cuMemAddressReserve, cuMemMap,
// cuMemSetAccess): the multicast address.
func (d *driver) MulticastBind(h uint64, p gpu.DevPtr, size uint64) (gpu.DevPtr, error) {
	if err := d.open(); err != nil {
		return 0, err
	}
	api, err := d.multicast()
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	a, ok := d.vmm[p]
	d.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("cuda: multicast bind: %#x is not memory from AllocBindable", uint64(p))
	}
	if size > a.size {
		return 0, fmt.Errorf("cuda: multicast bind of %d bytes of a %d-byte allocation", size, a.size)
	}
	var va C.CUdeviceptr
	err = d.do("binding memory to a multicast object", func() error {
		if r := C.mg_mc_bind(&api, C.ulonglong(h), a.h, C.size_t(size)); r != C.CUDA_SUCCESS {
			return fmt.Errorf("device %d, %d bytes: %w", d.ordinal, size, cuErr("cuMulticastBindMem", r))
		}
		g, err := d.bindGranularity(api)
		if err != nil {
			return err
		}
		dev := C.int(d.ordinal)
		var call *C.char
		if r := C.mg_map(C.ulonglong(h), C.size_t(size), C.size_t(g), &dev, 1, &va, &call); r != C.CUDA_SUCCESS {
			_ = C.mg_mc_unbind(&api, C.ulonglong(h), dev, C.size_t(size))
			return fmt.Errorf("mapping the multicast object: %w", cuErr(C.GoString(call), r))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.mcMaps[gpu.DevPtr(va)] = mcMap{size: size}
	d.mu.Unlock()
	return gpu.DevPtr(va), nil
}

// MulticastUnbind unmaps mc (from MulticastBind) and unbinds this
// device's memory from h (cuMulticastUnbind).
func (d *driver) MulticastUnbind(h uint64, mc gpu.DevPtr, size uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	api, err := d.multicast()
	if err != nil {
		return err
	}
	d.mu.Lock()
	_, ok := d.mcMaps[mc]
	delete(d.mcMaps, mc)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: multicast unbind: %#x is no multicast mapping", uint64(mc))
	}
	return d.do("unbinding a multicast object", func() error {
		var errs []error
		if r := C.mg_unmap(C.CUdeviceptr(mc), C.size_t(size)); r != C.CUDA_SUCCESS {
			errs = append(errs, cuErr("cuMemUnmap", r))
		}
		if r := C.mg_mc_unbind(&api, C.ulonglong(h), C.int(d.ordinal), C.size_t(size)); r != C.CUDA_SUCCESS {
			errs = append(errs, fmt.Errorf("device %d: %w", d.ordinal, cuErr("cuMulticastUnbind", r)))
		}
		return errors.Join(errs...)
	})
}

// MulticastRelease releases the multicast object h (cuMemRelease).
func (d *driver) MulticastRelease(h uint64) error {
	if err := d.open(); err != nil {
		return err
	}
	return d.do("releasing a multicast object", func() error {
		if r := C.cuMemRelease(C.ulonglong(h)); r != C.CUDA_SUCCESS {
			return cuErr("cuMemRelease", r)
		}
		return nil
	})
}
