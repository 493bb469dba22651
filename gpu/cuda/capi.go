//go:build cuda

package cuda

// capi.go holds the cgo wrappers of the driver calls gorgonia.org/cu does
// not wrap: mapped pinned host memory (cuMemHostAlloc with
// CU_MEMHOSTALLOC_DEVICEMAP|PORTABLE, cuMemHostGetDevicePointer),
// cuFuncSetAttribute, an allocation's buffer id (cuPointerGetAttribute),
// CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle with lazy peer access,
// cuIpcCloseMemHandle), the stream memory operations
// (cuStreamWaitValue32_v2, cuStreamWriteValue32_v2), stream capture (cuStreamBeginCapture,
// cuStreamIsCapturing, cuThreadExchangeStreamCaptureMode, the graph
// calls), plus Error, the error value of a failed call. Each
// wrapper expects the driver's context to be current on the calling
// thread (driver.do).

/*
#include <cuda.h>
#include <string.h>

// mg_hostalloc is the result of mg_host_alloc.
typedef struct {
	CUresult res;
	const char* call;  // the failed call, NULL on success
	void* host;
	CUdeviceptr dev;
} mg_hostalloc;

// mg_host_alloc allocates n bytes of zeroed, pinned, portable host memory
// mapped into the device's address space.
static mg_hostalloc mg_host_alloc(size_t n) {
	mg_hostalloc r = {CUDA_SUCCESS, NULL, NULL, 0};
	r.res = cuMemHostAlloc(&r.host, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
	if (r.res != CUDA_SUCCESS) {
		r.call = "cuMemHostAlloc";
		r.host = NULL;
		return r;
	}
	memset(r.host, 0, n);
	r.res = cuMemHostGetDevicePointer(&r.dev, r.host, 0);
	if (r.res != CUDA_SUCCESS) {
		r.call = "cuMemHostGetDevicePointer";
		cuMemFreeHost(r.host);
		r.host = NULL;
		r.dev = 0;
	}
	return r;
}

// mg_set_max_dynamic_shared raises the dynamic shared-memory limit of f.
static CUresult mg_set_max_dynamic_shared(void* f, int bytes) {
	return cuFuncSetAttribute((CUfunction)f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

// mg_ipc_get exports the allocation at p into the 64 bytes at h.
static CUresult mg_ipc_get(CUdeviceptr p, void* h) {
	CUipcMemHandle mh;
	CUresult r = cuIpcGetMemHandle(&mh, p);
	if (r == CUDA_SUCCESS) memcpy(h, &mh, sizeof mh);
	return r;
}

// mg_ipc_open maps the allocation the 64 bytes at h name.
static CUresult mg_ipc_open(CUdeviceptr* p, const void* h) {
	CUipcMemHandle mh;
	memcpy(&mh, h, sizeof mh);
	return cuIpcOpenMemHandle(p, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}

static CUresult mg_ipc_close(CUdeviceptr p) { return cuIpcCloseMemHandle(p); }

// mg_buffer_id returns the id of the allocation that holds p, unique for
// the life of the process.
static CUresult mg_buffer_id(unsigned long long* id, CUdeviceptr p) {
	return cuPointerGetAttribute(id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
}

// Graph capture of a stream (relaxed mode) and the graph's executable.
static CUresult mg_begin_capture(void* s) {
	return cuStreamBeginCapture((CUstream)s, CU_STREAM_CAPTURE_MODE_RELAXED);
}

typedef struct {
	CUresult res;
	const char* call;
	CUgraph graph;
	CUgraphExec exec;
} mg_captured;

static mg_captured mg_end_capture(void* s) {
	mg_captured r = {CUDA_SUCCESS, NULL, NULL, NULL};
	r.res = cuStreamEndCapture((CUstream)s, &r.graph);
	if (r.res != CUDA_SUCCESS) {
		r.call = "cuStreamEndCapture";
		return r;
	}
	r.res = cuGraphInstantiateWithFlags(&r.exec, r.graph, 0);
	if (r.res != CUDA_SUCCESS) {
		r.call = "cuGraphInstantiateWithFlags";
		cuGraphDestroy(r.graph);
		r.graph = NULL;
	}
	return r;
}

static CUresult mg_graph_launch(CUgraphExec e, void* s) { return cuGraphLaunch(e, (CUstream)s); }

// mg_capturing sets *on when stream s is capturing (an invalidated
// capture counts: its work is refused, not run).
static CUresult mg_capturing(void* s, int* on) {
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r = cuStreamIsCapturing((CUstream)s, &st);
	*on = st != CU_STREAM_CAPTURE_STATUS_NONE;
	return r;
}

// mg_capture_mode sets the calling thread's capture interaction mode and
// returns the previous one in *mode.
static CUresult mg_capture_mode(int* mode) {
	CUstreamCaptureMode m = (CUstreamCaptureMode)*mode;
	CUresult r = cuThreadExchangeStreamCaptureMode(&m);
	*mode = (int)m;
	return r;
}

static CUresult mg_graph_free(CUgraph g, CUgraphExec e) {
	CUresult r = cuGraphExecDestroy(e);
	CUresult r2 = cuGraphDestroy(g);
	return r != CUDA_SUCCESS ? r : r2;
}

// The V2 stream memory operations (CUDA 11.7 and later; the V1 entries
// are disabled unless the kernel module enables them): a wait until the
// word at addr is at least v (a cyclic comparison), and a write of v.
static CUresult mg_wait_value(void* s, CUdeviceptr addr, unsigned v, unsigned flags) {
	return cuStreamWaitValue32_v2((CUstream)s, addr, v, flags);
}

// mg_wait_value_v1 is the V1 entry, which the gate does not use (tests).
static CUresult mg_wait_value_v1(void* s, CUdeviceptr addr, unsigned v, unsigned flags) {
	return cuStreamWaitValue32((CUstream)s, addr, v, flags);
}

static CUresult mg_write_value(void* s, CUdeviceptr addr, unsigned v) {
	return cuStreamWriteValue32_v2((CUstream)s, addr, v, 0);
}

// mg_device_pointer returns the device address of mapped pinned memory.
static CUresult mg_device_pointer(CUdeviceptr* d, void* p) { return cuMemHostGetDevicePointer(d, p, 0); }

// mg_error_name returns the driver's name of a result code, or NULL.
static const char* mg_error_name(int code) {
	const char* s = NULL;
	if (cuGetErrorName((CUresult)code, &s) != CUDA_SUCCESS) return NULL;
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// attrSharedOptin is CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
// which cu does not name.
const attrSharedOptin = cu.DeviceAttribute(C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

// Error is a failed call of the driver API made by this package's own
// cgo code (the calls made through cu fail with cu's errors, wrapped).
type Error struct {
	// Call is the driver function, e.g. "cuMemHostAlloc".
	Call string
	// Code is the CUresult.
	Code int
}

func (e *Error) Error() string {
	if s := C.mg_error_name(C.int(e.Code)); s != nil {
		return fmt.Sprintf("%s: %s (%d)", e.Call, C.GoString(s), e.Code)
	}
	return fmt.Sprintf("%s: CUresult %d", e.Call, e.Code)
}

// ipcGet exports the allocation that starts at p.
func ipcGet(p uint64) ([64]byte, error) {
	var h [64]byte
	if r := C.mg_ipc_get(C.CUdeviceptr(p), unsafe.Pointer(&h[0])); r != C.CUDA_SUCCESS {
		return h, &Error{Call: "cuIpcGetMemHandle", Code: int(r)}
	}
	return h, nil
}

// ipcOpen maps another process's exported allocation.
func ipcOpen(h [64]byte) (uint64, error) {
	var p C.CUdeviceptr
	if r := C.mg_ipc_open(&p, unsafe.Pointer(&h[0])); r != C.CUDA_SUCCESS {
		return 0, &Error{Call: "cuIpcOpenMemHandle", Code: int(r)}
	}
	return uint64(p), nil
}

// bufferID returns the id of the allocation that holds p.
func bufferID(p uint64) (uint64, error) {
	var id C.ulonglong
	if r := C.mg_buffer_id(&id, C.CUdeviceptr(p)); r != C.CUDA_SUCCESS {
		return 0, &Error{Call: "cuPointerGetAttribute", Code: int(r)}
	}
	return uint64(id), nil
}

// ipcClose unmaps memory from ipcOpen.
func ipcClose(p uint64) error {
	if r := C.mg_ipc_close(C.CUdeviceptr(p)); r != C.CUDA_SUCCESS {
		return &Error{Call: "cuIpcCloseMemHandle", Code: int(r)}
	}
	return nil
}

// waitGEQ enqueues on s a wait until the 32-bit word at addr is at least
// v (cyclic: (int32)(word-v) >= 0).
func waitGEQ(s cu.Stream, addr uint64, v uint32) error {
	return waitValue(s, addr, v, C.CU_STREAM_WAIT_VALUE_GEQ, false)
}

// waitValue enqueues a wait with any flags (CUstreamWaitValue_flags),
// through the V1 entry with v1.
func waitValue(s cu.Stream, addr uint64, v uint32, flags uint32, v1 bool) error {
	if v1 {
		if r := C.mg_wait_value_v1(streamHandle(s), C.CUdeviceptr(addr), C.unsigned(v), C.unsigned(flags)); r != C.CUDA_SUCCESS {
			return &Error{Call: "cuStreamWaitValue32", Code: int(r)}
		}
		return nil
	}
	if r := C.mg_wait_value(streamHandle(s), C.CUdeviceptr(addr), C.unsigned(v), C.unsigned(flags)); r != C.CUDA_SUCCESS {
		return &Error{Call: "cuStreamWaitValue32_v2", Code: int(r)}
	}
	return nil
}

// The CUresults the gate's tests expect of the driver.
const (
	errInvalidValue = C.CUDA_ERROR_INVALID_VALUE
	errNotSupported = C.CUDA_ERROR_NOT_SUPPORTED
	waitNOR         = C.CU_STREAM_WAIT_VALUE_NOR
	waitFlush       = C.CU_STREAM_WAIT_VALUE_FLUSH
	waitGEQFlag     = C.CU_STREAM_WAIT_VALUE_GEQ
)

// writeValue enqueues on s a write of v into the 32-bit word at addr.
func writeValue(s cu.Stream, addr uint64, v uint32) error {
	if r := C.mg_write_value(streamHandle(s), C.CUdeviceptr(addr), C.unsigned(v)); r != C.CUDA_SUCCESS {
		return &Error{Call: "cuStreamWriteValue32_v2", Code: int(r)}
	}
	return nil
}

// devicePointer returns the device address of mapped pinned memory at p.
func devicePointer(p unsafe.Pointer) (uint64, error) {
	var d C.CUdeviceptr
	if r := C.mg_device_pointer(&d, p); r != C.CUDA_SUCCESS {
		return 0, &Error{Call: "cuMemHostGetDevicePointer", Code: int(r)}
	}
	return uint64(d), nil
}

// hostAlloc returns n bytes of zeroed, pinned, device-mapped host memory
// and their device address.
func hostAlloc(n uint64) (unsafe.Pointer, uint64, error) {
	r := C.mg_host_alloc(C.size_t(n))
	if r.res != C.CUDA_SUCCESS {
		return nil, 0, &Error{Call: C.GoString(r.call), Code: int(r.res)}
	}
	return r.host, uint64(r.dev), nil
}

// setMaxDynamicShared sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// of fn.
func setMaxDynamicShared(fn cu.Function, bytes int) error {
	h, err := functionHandle(fn)
	if err != nil {
		return err
	}
	if res := C.mg_set_max_dynamic_shared(h, C.int(bytes)); res != C.CUDA_SUCCESS {
		return &Error{Call: "cuFuncSetAttribute", Code: int(res)}
	}
	return nil
}

// functionHandle returns the CUfunction inside a cu.Function: cu keeps it
// in the struct's only field and has no accessor for it.
func functionHandle(fn cu.Function) (unsafe.Pointer, error) {
	if unsafe.Sizeof(fn) != unsafe.Sizeof(unsafe.Pointer(nil)) {
		return nil, fmt.Errorf("cu.Function is %d bytes, not one CUfunction handle: this cu version is not supported",
			unsafe.Sizeof(fn))
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(&fn)), nil
}

// graph is a captured launch: the graph and its executable.
type graph struct {
	d    *driver
	g    C.CUgraph
	exec C.CUgraphExec
}

// streamHandle returns the CUstream inside a cu.Stream (its only field).
func streamHandle(s cu.Stream) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&s))
}

func beginCapture(s cu.Stream) error {
	if r := C.mg_begin_capture(streamHandle(s)); r != C.CUDA_SUCCESS {
		return &Error{Call: "cuStreamBeginCapture", Code: int(r)}
	}
	return nil
}

func endCapture(s cu.Stream) (*graph, error) {
	r := C.mg_end_capture(streamHandle(s))
	if r.res != C.CUDA_SUCCESS {
		return nil, &Error{Call: C.GoString(r.call), Code: int(r.res)}
	}
	return &graph{g: r.graph, exec: r.exec}, nil
}

// capturing reports whether stream s is capturing.
func capturing(s cu.Stream) (bool, error) {
	var on C.int
	if r := C.mg_capturing(streamHandle(s), &on); r != C.CUDA_SUCCESS {
		return false, &Error{Call: "cuStreamIsCapturing", Code: int(r)}
	}
	return on != 0, nil
}

// captureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED.
const captureRelaxed = C.CU_STREAM_CAPTURE_MODE_RELAXED

// exchangeCaptureMode sets the calling thread's capture interaction mode
// and returns the previous one.
func exchangeCaptureMode(mode int) (int, error) {
	m := C.int(mode)
	if r := C.mg_capture_mode(&m); r != C.CUDA_SUCCESS {
		return mode, &Error{Call: "cuThreadExchangeStreamCaptureMode", Code: int(r)}
	}
	return int(m), nil
}

func graphLaunch(g *graph, s cu.Stream) error {
	if r := C.mg_graph_launch(g.exec, streamHandle(s)); r != C.CUDA_SUCCESS {
		return &Error{Call: "cuGraphLaunch", Code: int(r)}
	}
	return nil
}

// Release destroys the graph and its executable.
func (g *graph) Release() error {
	if g.exec == nil {
		return nil
	}
	err := g.d.do("releasing a graph", func() error {
		if r := C.mg_graph_free(g.g, g.exec); r != C.CUDA_SUCCESS {
			return &Error{Call: "cuGraphExecDestroy", Code: int(r)}
		}
		return nil
	})
	g.g, g.exec = nil, nil
	return err
}
