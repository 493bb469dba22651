// fakecuda.c is a fake libcuda.so.1 for the cuda-tagged tests of gpu/cuda
// on machines without a GPU: the driver API calls that gorgonia.org/cu's
// init and the gpu/cuda driver make, over host memory. Device memory is
// host memory (aligned, zeroed), so a device address is a host address.
// cuModuleLoadData ignores the image and loads the g++-built interpreter
// (csrc/host/kernel.cc) named by $MSCCLGO_FAKE_KERNEL_LIB; cuLaunchKernel
// starts it on host threads and a stream's synchronize joins them. Other
// stream work (async copies, memsets) runs at once, after the stream's
// pending kernel, in 8-byte (memsets: 4-byte) atomic words where aligned,
// so that a kernel polling LL packets never sees a torn word. A stream
// wait on a memory word (cuStreamWaitValue32_v2) whose condition does not
// hold queues it and the stream's later work, which a worker thread runs
// in order once it holds, so the caller returns at once as from a GPU's
// stream; synchronisations wait for the queue (section "stream memory
// operations", which also gives the rules of those calls). Stream
// capture records a stream's copies, memsets and launches into a graph
// instead of running them, and cuGraphLaunch replays them in order. Calls that need a
// context fail with CUDA_ERROR_INVALID_CONTEXT when none is current on the
// calling thread, which checks the driver's context handling.
//
// Stream capture follows CUDA's rules (the section "stream capture
// rules" below): a capture's mode and thread, each thread's capture
// interaction mode (cuThreadExchangeStreamCaptureMode), the potentially
// unsafe calls that a capture prohibits and that then invalidate it, a
// capturing stream's synchronisation, captured events, and the legacy
// stream's implicit dependency on captures of blocking streams.
//
// cuMemAlloc backs every allocation with a memory file (memfd), so that
// cuIpcGetMemHandle can export it: the handle names the file by the
// exporting process's id and descriptor, and cuIpcOpenMemHandle in a
// process of the same user maps /proc/PID/fd/FD (Linux). Each allocation
// (own or opened) has an id, never reused, for cuPointerGetAttribute's
// CU_POINTER_ATTRIBUTE_BUFFER_ID.
//
// It refuses what the real driver refuses and our code could do by
// mistake: a stream memory operation on an address the device does not
// map, with flags the device does not support, or through the disabled
// V1 entries; cuMemHostGetDevicePointer of memory not allocated with
// CU_MEMHOSTALLOC_DEVICEMAP; cuIpcOpenMemHandle of a handle the calling process exported
// (CUDA_ERROR_INVALID_CONTEXT, as a real driver answers); a launch whose
// blocks could not all be resident beside the kernels still running on
// the device (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES with a line on stderr: a
// GPU would queue the blocks, and spinning kernels then never end); a
// cooperative launch larger than the device
// (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE); peer access between devices
// that have none, enabled twice, or with a device's own context.
//
// The machine it fakes comes from the environment, read at each call:
//   MSCCLGO_FAKECUDA_DEVICES  number of devices (default 1, at most 16)
//   MSCCLGO_FAKECUDA_SMS      multiprocessors per device (default 132)
//   MSCCLGO_FAKECUDA_NOPEER   pairs without peer access, e.g. 0-1,2-3
//   MSCCLGO_FAKECUDA_MULTICAST  1: CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED
//   MSCCLGO_FAKECUDA_MACHINE  names the machine in the device UUIDs
//                             (processes with the same name share devices)
//   MSCCLGO_FAKECUDA_LOG      a file that gets a line per multicast call
//
// Virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap,
// cuMemSetAccess) and NVLS multicast objects (cuMulticastCreate and the
// calls after it, found through cuGetProcAddress) are faked too: see the
// last section.
//
// Build: cc -shared -fPIC -o libcuda.so.1 fakecuda.c -ldl (Makefile
// `fakecuda`); use through LD_LIBRARY_PATH.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The fake device.
enum {
  FAKE_SMS = 132,
  FAKE_MAX_THREADS = 1024,
  FAKE_SHARED_OPTIN = 232448,
  FAKE_SHARED_DEFAULT = 49152,
  FAKE_MAX_DEVICES = 16,
  // A multiprocessor's capacity in residency units: a block of a shape
  // that fits k to a multiprocessor takes RES_UNIT/k of them.
  RES_UNIT = 1 << 20,
  // CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (CUDA 12.1; not in 11.8's
  // cuda.h).
  ATTR_MULTICAST = 132,
};

struct CUctx_st {
  int refs;
  unsigned peers;  // bit d: peer access to device d's memory enabled
};

struct CUgraph_st;

// A stream remembers its launch not yet joined and the residency it
// holds on its device, and the graph it is capturing into (NULL when its
// work runs) with that capture's state (capture_mu).
struct CUstream_st {
  void* pending;
  void (*wait)(void*);
  int dev;
  long long units;
  int home;        // the device of the context it was created in
  unsigned flags;  // cuStreamCreate's: CU_STREAM_NON_BLOCKING or 0
  struct CUgraph_st* capture;
  int cap_status;        // CU_STREAM_CAPTURE_STATUS_ACTIVE or _INVALIDATED
  int cap_mode;          // the CUstreamCaptureMode it began with
  pthread_t cap_thread;  // the thread that began it
  unsigned long long cap_id;
  struct CUstream_st* cap_next;  // the list of capturing streams
  // started counts the kernels started on the stream, joined those whose
  // end was waited for (in order): an event is the count at its record.
  unsigned long long started, joined;
  // The stream's queue (stream memory operations): once a wait
  // (cuStreamWaitValue32_v2) cannot pass, it and the work after it are
  // queued and a worker thread runs them in order; q_busy while it runs.
  // q_err is the first failure of queued work, returned by the next
  // synchronisation.
  pthread_mutex_t q_mu;
  struct qnode* q_head;
  struct qnode* q_tail;
  int q_busy;
  CUresult q_err;
};

// An event is the number of kernels started on its stream when it was
// recorded (NULL stream: never recorded, or last recorded in a capture:
// captured is then 1).
struct CUevent_st {
  CUstream s;
  unsigned long long at;
  int captured;
  int queued;  // its record waits in its stream's queue
};

// A captured or queued node: a copy (reads src when it runs), a memset
// of 8- or 32-bit values, a kernel launch on device dev, a stream memory
// operation (wait until the 32-bit word at dst meets value under the
// condition in n; write value to it), or an event's record (queued only).
enum { NODE_COPY, NODE_SET8, NODE_SET32, NODE_KERNEL, NODE_WAIT32, NODE_WRITE32, NODE_EVENT };
struct node {
  int kind;
  uintptr_t dst;
  const void* src;
  size_t n;
  unsigned value;
  struct CUfunc_st* fn;
  unsigned grid, block, shmem;
  void* arg;
  int dev;
  struct CUevent_st* ev;
};

// A queued node.
struct qnode {
  struct node nd;
  struct qnode* next;
};

// A graph (and its instantiation: the same nodes) is the list of its
// nodes in capture order.
struct CUgraph_st {
  struct node* nodes;
  size_t n, cap;
};
struct CUgraphExec_st {
  struct CUgraph_st g;
};

typedef void* (*host_launch_fn)(unsigned grid, unsigned block, unsigned shmem, const void* args);
typedef void (*host_wait_fn)(void* handle);

struct CUmod_st {
  void* lib;
};

struct CUfunc_st {
  host_launch_fn launch;
  host_wait_fn wait;
  int max_dynamic_shared;
};

static struct CUctx_st primary[FAKE_MAX_DEVICES];

// ctx_dev is the device of a primary context.
static int ctx_dev(CUcontext c) { return (int)(c - primary); }
static struct CUstream_st legacy[FAKE_MAX_DEVICES];  // each device's NULL stream

// Residency units in use per device (launches not yet joined).
static long long resident[FAKE_MAX_DEVICES];
static pthread_mutex_t resident_mu = PTHREAD_MUTEX_INITIALIZER;

static int env_int(const char* name, int def, int lo, int hi) {
  const char* v = getenv(name);
  if (v == NULL || *v == 0) return def;
  char* end;
  long n = strtol(v, &end, 10);
  if (*end != 0 || n < lo || n > hi) return def;
  return (int)n;
}

static int num_devices(void) { return env_int("MSCCLGO_FAKECUDA_DEVICES", 1, 1, FAKE_MAX_DEVICES); }
static int num_sms(void) { return env_int("MSCCLGO_FAKECUDA_SMS", FAKE_SMS, 1, 1024); }
static int valid_dev(CUdevice d) { return d >= 0 && d < num_devices(); }

// can_peer reports whether device a may access device b's memory: every
// pair of distinct devices but those MSCCLGO_FAKECUDA_NOPEER names.
static int can_peer(int a, int b) {
  if (a == b) return 0;
  const char* v = getenv("MSCCLGO_FAKECUDA_NOPEER");
  while (v != NULL && *v != 0) {
    char* end;
    long x = strtol(v, &end, 10);
    if (*end != '-') break;
    long y = strtol(end + 1, &end, 10);
    if ((x == a && y == b) || (x == b && y == a)) return 0;
    if (*end != ',') break;
    v = end + 1;
  }
  return 1;
}

// The calling thread's context stack.
enum { STACK = 16 };
static _Thread_local CUcontext stack[STACK];
static _Thread_local int depth;

#define NEED_CTX()                                \
  do {                                            \
    if (depth == 0 || stack[depth - 1] == NULL) { \
      return CUDA_ERROR_INVALID_CONTEXT;          \
    }                                             \
  } while (0)

// stream_of is s, or for NULL (CU_STREAM_LEGACY) the current context's
// device's legacy stream (every caller has checked that a context is
// current).
static CUstream stream_of(CUstream s) {
  return s == NULL || s == CU_STREAM_LEGACY ? &legacy[ctx_dev(stack[depth - 1])] : s;
}

static int is_legacy(CUstream s) { return s >= legacy && s < legacy + FAKE_MAX_DEVICES; }

// stream_dev is the device of s's context.
static int stream_dev(CUstream s) { return is_legacy(s) ? (int)(s - legacy) : s->home; }

// ---- stream capture rules -----------------------------------------------------
//
// As CUDA's documentation gives them (cuStreamBeginCapture,
// cuThreadExchangeStreamCaptureMode, cuStreamIsCapturing):
//   - A capture has a mode (GLOBAL, THREAD_LOCAL, RELAXED) and the thread
//     that began it; a non-RELAXED one must end on that thread.
//   - Each thread has an interaction mode (default GLOBAL). A potentially
//     unsafe call (allocation, freeing, synchronous copies and memsets,
//     context synchronisation, IPC, module loading) is prohibited to a
//     thread in GLOBAL mode while it has a non-RELAXED capture of its own
//     or another thread has a GLOBAL one; in THREAD_LOCAL mode while it
//     has a non-RELAXED capture of its own; never in RELAXED mode. A
//     prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
//     invalidates the captures that prohibit it.
//   - Synchronising with or querying a capturing stream fails the same
//     way and invalidates its capture, whatever the mode; so does the
//     synchronisation or query of an event last recorded in a capture
//     (CUDA_ERROR_CAPTURED_EVENT, without invalidating).
//   - The legacy stream synchronises with every blocking stream of its
//     context: while one captures, legacy-stream work (synchronous copies
//     and memsets, work submitted to stream 0) fails with
//     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates that capture,
//     whatever the mode.
//   - Work submitted to an invalidated capture fails with
//     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; its cuStreamEndCapture
//     returns that with a NULL graph.
// A capture stays in the list of capturing streams, active or
// invalidated, until cuStreamEndCapture.

static pthread_mutex_t capture_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st* capturing;            // capture_mu
static unsigned long long next_capture_id = 1;  // capture_mu
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

// prohibits reports whether capture c prohibits the calling thread's
// potentially unsafe calls.
static int prohibits(const struct CUstream_st* c) {
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return 0;
  if (pthread_equal(c->cap_thread, pthread_self())) return c->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  return thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

// unsafe_locked is the check of a potentially unsafe call (capture_mu
// held): it invalidates every capture that prohibits it.
static CUresult unsafe_locked(void) {
  CUresult r = CUDA_SUCCESS;
  for (struct CUstream_st* c = capturing; c != NULL; c = c->cap_next) {
    if (prohibits(c)) {
      c->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return r;
}

// implicit_locked is the check of legacy-stream work on device dev
// (capture_mu held): invalidate (when asked) each capture of a blocking
// stream of that device, and refuse.
static CUresult implicit_locked(int dev, int invalidate) {
  CUresult r = CUDA_SUCCESS;
  for (struct CUstream_st* c = capturing; c != NULL; c = c->cap_next) {
    if ((c->flags & CU_STREAM_NON_BLOCKING) == 0 && c->home == dev) {
      if (invalidate) c->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  return r;
}

// unsafe_call checks a potentially unsafe call; legacy_work adds the
// check of a synchronous call on the current device's legacy stream.
static CUresult unsafe_call(int legacy_work) {
  pthread_mutex_lock(&capture_mu);
  CUresult r = capturing == NULL ? CUDA_SUCCESS : unsafe_locked();
  if (r == CUDA_SUCCESS && legacy_work && capturing != NULL) r = implicit_locked(ctx_dev(stack[depth - 1]), 1);
  pthread_mutex_unlock(&capture_mu);
  return r;
}

// UNSAFE returns a potentially unsafe call's refusal (after NEED_CTX).
#define UNSAFE(legacy_work)                            \
  do {                                                 \
    CUresult unsafe_r = unsafe_call(legacy_work);      \
    if (unsafe_r != CUDA_SUCCESS) return unsafe_r;     \
  } while (0)

// sync_locked is the check of a synchronisation with or query of stream
// s (capture_mu held).
static CUresult sync_locked(CUstream s) {
  if (is_legacy(s)) return implicit_locked(stream_dev(s), 1);
  if (s->capture == NULL) return CUDA_SUCCESS;
  s->cap_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult sync_check(CUstream s) {
  pthread_mutex_lock(&capture_mu);
  CUresult r = sync_locked(s);
  pthread_mutex_unlock(&capture_mu);
  return r;
}

// end_capture_locked takes s out of the list of capturing streams and
// returns its graph.
static struct CUgraph_st* end_capture_locked(CUstream s) {
  struct CUstream_st** at = &capturing;
  while (*at != s) at = &(*at)->cap_next;
  *at = s->cap_next;
  struct CUgraph_st* g = s->capture;
  s->capture = NULL;
  s->cap_next = NULL;
  return g;
}

static CUresult drain(CUstream s);

// join waits for a stream's pending launch and frees its residency.
static void join_handle(CUstream s, void* h) {
  s->wait(h);
  pthread_mutex_lock(&resident_mu);
  resident[s->dev] -= s->units;
  s->units = 0;
  pthread_mutex_unlock(&resident_mu);
  __atomic_add_fetch(&s->joined, 1, __ATOMIC_ACQ_REL);
}

// join waits for every kernel started on s so far, also one whose end
// another thread is waiting for (an event's synchronisation).
static void join(CUstream s) {
  unsigned long long want = __atomic_load_n(&s->started, __ATOMIC_ACQUIRE);
  void* h = __atomic_exchange_n(&s->pending, NULL, __ATOMIC_ACQ_REL);
  if (h != NULL) join_handle(s, h);
  while (__atomic_load_n(&s->joined, __ATOMIC_ACQUIRE) < want) usleep(20);
}

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDriverGetVersion(int* v) {
  *v = 11080;
  return CUDA_SUCCESS;
}

// ERROR_NAME is a case of cuGetErrorName.
#define ERROR_NAME(code) \
  case code:             \
    *s = #code;          \
    return CUDA_SUCCESS;

CUresult cuGetErrorName(CUresult e, const char** s) {
  switch (e) {
    ERROR_NAME(CUDA_SUCCESS)
    ERROR_NAME(CUDA_ERROR_INVALID_VALUE)
    ERROR_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    ERROR_NAME(CUDA_ERROR_INVALID_CONTEXT)
    ERROR_NAME(CUDA_ERROR_NOT_FOUND)
    ERROR_NAME(CUDA_ERROR_NOT_READY)
    ERROR_NAME(CUDA_ERROR_INVALID_DEVICE)
    ERROR_NAME(CUDA_ERROR_INVALID_HANDLE)
    ERROR_NAME(CUDA_ERROR_ILLEGAL_STATE)
    ERROR_NAME(CUDA_ERROR_NOT_SUPPORTED)
    ERROR_NAME(CUDA_ERROR_NOT_PERMITTED)
    ERROR_NAME(CUDA_ERROR_FILE_NOT_FOUND)
    ERROR_NAME(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
    ERROR_NAME(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    ERROR_NAME(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
    ERROR_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    ERROR_NAME(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
    ERROR_NAME(CUDA_ERROR_CAPTURED_EVENT)
    ERROR_NAME(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    default:
      *s = NULL;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceGetCount(int* n) {
  *n = num_devices();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (!valid_dev(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!valid_dev(d) || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, "fake CUDA device (host threads)", (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}

// The UUID: "fakecuda", a hash of the machine's name, the ordinal. Every
// process of one machine sees the same UUIDs, as on a real host.
CUresult cuDeviceGetUuid(CUuuid* u, CUdevice d) {
  if (!valid_dev(d) || u == NULL) return CUDA_ERROR_INVALID_VALUE;
  const char* m = getenv("MSCCLGO_FAKECUDA_MACHINE");
  uint32_t h = 2166136261u;
  for (const char* c = m == NULL ? "" : m; *c != 0; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  memcpy(u->bytes, "fakecuda", 8);
  memcpy(u->bytes + 8, &h, 4);
  uint32_t o = (uint32_t)d;
  memcpy(u->bytes + 12, &o, 4);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* u, CUdevice d) { return cuDeviceGetUuid(u, d); }

CUresult cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  if (!valid_dev(d) || !valid_dev(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = can_peer(d, peer);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  if ((int)a == ATTR_MULTICAST) {
    *v = env_int("MSCCLGO_FAKECUDA_MULTICAST", 0, 0, 1);
    return CUDA_SUCCESS;
  }
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = num_sms();
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = FAKE_MAX_THREADS;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = FAKE_SHARED_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = FAKE_SHARED_OPTIN;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *v = 1;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&primary[d].refs, 1, __ATOMIC_RELAXED);
  *c = &primary[d];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  if (__atomic_sub_fetch(&primary[d].refs, 1, __ATOMIC_RELAXED) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext c) {
  if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (depth == STACK) return CUDA_ERROR_INVALID_VALUE;
  stack[depth++] = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* c) {
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext top = stack[--depth];
  if (c != NULL) *c = top;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext c) {
  if (depth == 0) {
    if (c != NULL) stack[depth++] = c;
  } else {
    stack[depth - 1] = c;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = depth == 0 ? NULL : stack[depth - 1];
  return CUDA_SUCCESS;
}

// cuCtxEnablePeerAccess lets the current context's kernels access the
// memory of peer's device.
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  NEED_CTX();
  CUcontext cur = stack[depth - 1];
  if (peer == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (peer == cur) return CUDA_ERROR_INVALID_DEVICE;
  if (!can_peer(ctx_dev(cur), ctx_dev(peer))) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  unsigned bit = 1u << ctx_dev(peer);
  if (__atomic_fetch_or(&cur->peers, bit, __ATOMIC_ACQ_REL) & bit) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  NEED_CTX();
  CUcontext cur = stack[depth - 1];
  if (peer == NULL) return CUDA_ERROR_INVALID_VALUE;
  unsigned bit = 1u << ctx_dev(peer);
  if (!(__atomic_fetch_and(&cur->peers, ~bit, __ATOMIC_ACQ_REL) & bit)) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  NEED_CTX();
  UNSAFE(1);
  return drain(stream_of(NULL));
}

// ---- memory -----------------------------------------------------------------

static void* zalloc(size_t align, size_t n) {
  size_t size = (n + align - 1) / align * align;
  void* p = aligned_alloc(align, size == 0 ? align : size);
  if (p != NULL) memset(p, 0, size);
  return p;
}

// A device allocation: a memory file mapped at base (fd >= 0), or a
// peer's opened through IPC (fd < 0).
struct dev_alloc {
  uintptr_t base;
  size_t size;
  int fd;
  unsigned long long id;  // CU_POINTER_ATTRIBUTE_BUFFER_ID: never reused
  struct dev_alloc* next;
};

static pthread_mutex_t allocs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dev_alloc* allocs;
static unsigned long long next_alloc_id = 1;

static void add_alloc(uintptr_t base, size_t size, int fd) {
  struct dev_alloc* a = malloc(sizeof *a);
  if (a == NULL) abort();
  a->base = base;
  a->size = size;
  a->fd = fd;
  pthread_mutex_lock(&allocs_mu);
  a->id = next_alloc_id++;
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&allocs_mu);
}

// take_alloc unlinks the allocation at base whose kind (own: fd >= 0)
// matches and returns it, or NULL.
static struct dev_alloc* take_alloc(uintptr_t base, int own) {
  pthread_mutex_lock(&allocs_mu);
  struct dev_alloc** at = &allocs;
  while (*at != NULL && ((*at)->base != base || ((*at)->fd >= 0) != own)) at = &(*at)->next;
  struct dev_alloc* a = *at;
  if (a != NULL) *at = a->next;
  pthread_mutex_unlock(&allocs_mu);
  return a;
}

// cuMemGetAddressRange returns the allocation (own or opened) that holds p.
CUresult cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  NEED_CTX();
  pthread_mutex_lock(&allocs_mu);
  struct dev_alloc* a = allocs;
  while (a != NULL && !((uintptr_t)p >= a->base && (uintptr_t)p - a->base < a->size)) a = a->next;
  if (a != NULL) {
    if (base != NULL) *base = (CUdeviceptr)a->base;
    if (size != NULL) *size = a->size;
  }
  pthread_mutex_unlock(&allocs_mu);
  return a == NULL ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

// cuPointerGetAttribute answers CU_POINTER_ATTRIBUTE_BUFFER_ID (the
// allocation's id, which an allocation made at a freed one's address does
// not share) for an allocation of this process (own or opened).
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  NEED_CTX();
  if (attr != CU_POINTER_ATTRIBUTE_BUFFER_ID || data == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&allocs_mu);
  struct dev_alloc* a = allocs;
  while (a != NULL && !((uintptr_t)p >= a->base && (uintptr_t)p - a->base < a->size)) a = a->next;
  if (a != NULL) *(unsigned long long*)data = a->id;
  pthread_mutex_unlock(&allocs_mu);
  return a == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// The layout of a fake CUipcMemHandle's 64 bytes.
struct fake_ipc {
  char magic[8];
  uint64_t pid;
  uint64_t fd;
  uint64_t size;
};

static const char ipc_magic[8] = "fakeipc";

CUresult cuMemAlloc(CUdeviceptr* p, size_t n) {
  NEED_CTX();
  UNSAFE(0);
  if (n == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t size = (n + 4095) & ~(size_t)4095;
  int fd = memfd_create("fakecuda", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  add_alloc((uintptr_t)m, size, fd);
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p) {
  NEED_CTX();
  UNSAFE(0);
  struct dev_alloc* a = take_alloc((uintptr_t)p, 1);
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  munmap((void*)a->base, a->size);
  close(a->fd);
  free(a);
  return CUDA_SUCCESS;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  NEED_CTX();
  struct fake_ipc f;
  memset(h, 0, sizeof *h);
  pthread_mutex_lock(&allocs_mu);
  struct dev_alloc* a = allocs;
  while (a != NULL && (a->base != (uintptr_t)p || a->fd < 0)) a = a->next;
  if (a != NULL) {
    memcpy(f.magic, ipc_magic, sizeof f.magic);
    f.pid = (uint64_t)getpid();
    f.fd = (uint64_t)a->fd;
    f.size = a->size;
  }
  pthread_mutex_unlock(&allocs_mu);
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  memcpy(h->reserved, &f, sizeof f);
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr* p, CUipcMemHandle h, unsigned int flags) {
  NEED_CTX();
  UNSAFE(0);
  struct fake_ipc f;
  memcpy(&f, h.reserved, sizeof f);
  if (memcmp(f.magic, ipc_magic, sizeof f.magic) != 0 || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // CUDA does not open a handle in the process that exported it.
  if (f.pid == (uint64_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  char path[64];
  snprintf(path, sizeof path, "/proc/%llu/fd/%llu", (unsigned long long)f.pid, (unsigned long long)f.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  void* m = mmap(NULL, f.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  add_alloc((uintptr_t)m, f.size, -1);
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  NEED_CTX();
  UNSAFE(0);
  struct dev_alloc* a = take_alloc((uintptr_t)p, 0);
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  munmap((void*)a->base, a->size);
  free(a);
  return CUDA_SUCCESS;
}

// Pinned host memory (cuMemHostAlloc) with its flags, for
// cuMemHostGetDevicePointer and the stream memory operations' checks.
struct host_alloc {
  uintptr_t base;
  size_t size;
  unsigned flags;
  struct host_alloc* next;
};

static pthread_mutex_t hosts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_alloc* hosts;

// host_flags returns the flags of the pinned allocation that holds n
// bytes at p, or -1 when none does.
static long host_flags(uintptr_t p, size_t n) {
  long f = -1;
  pthread_mutex_lock(&hosts_mu);
  for (struct host_alloc* h = hosts; h != NULL; h = h->next) {
    if (p >= h->base && p - h->base < h->size && n <= h->size - (p - h->base)) {
      f = (long)h->flags;
      break;
    }
  }
  pthread_mutex_unlock(&hosts_mu);
  return f;
}

CUresult cuMemHostAlloc(void** p, size_t n, unsigned int flags) {
  NEED_CTX();
  UNSAFE(0);
  if (n == 0 || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct host_alloc* h = malloc(sizeof *h);
  if (h == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = zalloc(4096, n);
  if (*p == NULL) {
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  h->base = (uintptr_t)*p;
  h->size = n;
  h->flags = flags;
  pthread_mutex_lock(&hosts_mu);
  h->next = hosts;
  hosts = h;
  pthread_mutex_unlock(&hosts_mu);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void** p, size_t n) { return cuMemHostAlloc(p, n, 0); }

// cuMemHostGetDevicePointer: only for memory from cuMemHostAlloc with
// CU_MEMHOSTALLOC_DEVICEMAP (CUDA fails it otherwise), flags 0. Under
// unified addressing the device address is the host address.
CUresult cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int flags) {
  NEED_CTX();
  if (d == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  long f = host_flags((uintptr_t)p, 1);
  if (f < 0 || (f & CU_MEMHOSTALLOC_DEVICEMAP) == 0) return CUDA_ERROR_INVALID_VALUE;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
  NEED_CTX();
  UNSAFE(0);
  pthread_mutex_lock(&hosts_mu);
  struct host_alloc** at = &hosts;
  while (*at != NULL && (*at)->base != (uintptr_t)p) at = &(*at)->next;
  struct host_alloc* h = *at;
  if (h != NULL) *at = h->next;
  pthread_mutex_unlock(&hosts_mu);
  if (h == NULL) return CUDA_ERROR_INVALID_VALUE;
  free(h);
  free(p);
  return CUDA_SUCCESS;
}

// The synchronous copies and memsets run on the legacy stream.
CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  NEED_CTX();
  UNSAFE(1);
  memset((void*)(uintptr_t)p, v, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  NEED_CTX();
  UNSAFE(1);
  memcpy((void*)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  NEED_CTX();
  UNSAFE(1);
  memcpy(dst, (const void*)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

// copy_words copies n bytes, in relaxed 8-byte atomic words where both
// ends are aligned (the kernel may poll the destination meanwhile).
static void copy_words(uintptr_t dst, uintptr_t src, size_t n) {
  if ((dst | src) % 8 != 0) {
    memcpy((void*)dst, (const void*)src, n);
    return;
  }
  uint64_t* d = (uint64_t*)dst;
  const uint64_t* s = (const uint64_t*)src;
  size_t i = 0;
  for (; i < n / 8; i++) __atomic_store_n(d + i, __atomic_load_n(s + i, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  memcpy(d + i, s + i, n % 8);
}

// ---- stream-ordered work and capture ------------------------------------------

static CUresult add_node(struct CUgraph_st* g, struct node nd) {
  if (g->n == g->cap) {
    size_t cap = g->cap == 0 ? 8 : 2 * g->cap;
    struct node* m = realloc(g->nodes, cap * sizeof *m);
    if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes = m;
    g->cap = cap;
  }
  g->nodes[g->n++] = nd;
  return CUDA_SUCCESS;
}

static void set32(uintptr_t dst, unsigned v, size_t n) {
  uint32_t* d = (uint32_t*)dst;
  for (size_t i = 0; i < n; i++) __atomic_store_n(d + i, v, __ATOMIC_RELAXED);
}

static int per_sm(CUfunction f, int block, size_t shmem);

// run_kernel starts a kernel node's host launcher on stream s once the
// grid's residency is taken on its device: a grid that does not fit
// beside the kernels running there is refused, where a GPU would queue
// its blocks behind spinning kernels and hang.
static CUresult run_kernel(CUstream s, const struct node* nd) {
  int k = per_sm(nd->fn, (int)nd->block, nd->shmem);
  if (k <= 0) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  long long cap = (long long)num_sms() * RES_UNIT;
  long long units = (long long)nd->grid * ((RES_UNIT + k - 1) / k);
  pthread_mutex_lock(&resident_mu);
  long long used = resident[nd->dev];
  int fits = used + units <= cap;
  if (fits) resident[nd->dev] += units;
  pthread_mutex_unlock(&resident_mu);
  if (!fits) {
    fprintf(stderr,
            "fakecuda: launch of %u blocks of %u threads (%u bytes of shared memory) on device %d does not fit "
            "beside the kernels running there (%lld of %lld residency units in use, it needs %lld): a GPU "
            "would queue its blocks behind spinning kernels\n",
            nd->grid, nd->block, nd->shmem, nd->dev, used, cap, units);
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  void* h = nd->fn->launch(nd->grid, nd->block, nd->shmem, nd->arg);
  if (h == NULL) {
    pthread_mutex_lock(&resident_mu);
    resident[nd->dev] -= units;
    pthread_mutex_unlock(&resident_mu);
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  }
  s->wait = nd->fn->wait;
  s->dev = nd->dev;
  s->units = units;
  __atomic_store_n(&s->pending, h, __ATOMIC_RELEASE);
  __atomic_add_fetch(&s->started, 1, __ATOMIC_ACQ_REL);
  return CUDA_SUCCESS;
}

// wait_met reports whether a wait node's condition holds now (the
// conditions of CUstreamWaitValue_flags: a cyclic greater-or-equal, equal,
// and, nor).
static int wait_met(const struct node* nd) {
  uint32_t v = __atomic_load_n((const uint32_t*)nd->dst, __ATOMIC_ACQUIRE);
  switch (nd->n) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return (int32_t)(v - nd->value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return v == nd->value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (v & nd->value) != 0;
    default:
      return ~(v | nd->value) != 0;
  }
}

// run_node runs one node on stream s: after the stream's pending kernel
// (work on one stream runs in order), a kernel asynchronously. A wait
// polls until its condition holds (the queue's worker runs it); an
// event's record takes the kernels started so far.
static CUresult run_node(CUstream s, const struct node* nd) {
  if (nd->kind == NODE_EVENT) {
    struct CUevent_st* e = nd->ev;
    e->at = __atomic_load_n(&s->started, __ATOMIC_ACQUIRE);
    e->s = s;
    __atomic_store_n(&e->captured, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&e->queued, 0, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
  }
  join(s);
  switch (nd->kind) {
    case NODE_COPY:
      copy_words(nd->dst, (uintptr_t)nd->src, nd->n);
      return CUDA_SUCCESS;
    case NODE_SET8:
      memset((void*)nd->dst, (int)nd->value, nd->n);
      return CUDA_SUCCESS;
    case NODE_SET32:
      set32(nd->dst, nd->value, nd->n);
      return CUDA_SUCCESS;
    case NODE_WAIT32:
      while (!wait_met(nd)) usleep(20);
      return CUDA_SUCCESS;
    case NODE_WRITE32:
      __atomic_store_n((uint32_t*)nd->dst, nd->value, __ATOMIC_RELEASE);
      return CUDA_SUCCESS;
    default:
      return run_kernel(s, nd);
  }
}

// worker runs a stream's queue in order until it is empty.
static void* worker(void* arg) {
  CUstream s = arg;
  pthread_mutex_lock(&s->q_mu);
  while (s->q_head != NULL) {
    struct qnode* q = s->q_head;
    s->q_head = q->next;
    if (s->q_head == NULL) s->q_tail = NULL;
    pthread_mutex_unlock(&s->q_mu);
    CUresult r = run_node(s, &q->nd);
    if (r != CUDA_SUCCESS) {
      fprintf(stderr, "fakecuda: queued work of kind %d failed asynchronously: %d\n", q->nd.kind, (int)r);
    }
    free(q);
    pthread_mutex_lock(&s->q_mu);
    if (r != CUDA_SUCCESS && s->q_err == CUDA_SUCCESS) s->q_err = r;
  }
  s->q_busy = 0;
  pthread_mutex_unlock(&s->q_mu);
  return NULL;
}

// put runs nd on s now, or queues it behind the stream's queued work (or
// as the first, a wait whose condition does not hold yet), starting the
// stream's worker: the caller returns at once, as from a GPU's stream.
static CUresult put(CUstream s, struct node nd) {
  pthread_mutex_lock(&s->q_mu);
  if (!s->q_busy && !(nd.kind == NODE_WAIT32 && !wait_met(&nd))) {
    pthread_mutex_unlock(&s->q_mu);
    return run_node(s, &nd);
  }
  struct qnode* q = malloc(sizeof *q);
  if (q == NULL) {
    pthread_mutex_unlock(&s->q_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  q->nd = nd;
  q->next = NULL;
  if (nd.kind == NODE_EVENT) __atomic_store_n(&nd.ev->queued, 1, __ATOMIC_RELEASE);
  if (s->q_tail != NULL) {
    s->q_tail->next = q;
  } else {
    s->q_head = q;
  }
  s->q_tail = q;
  CUresult r = CUDA_SUCCESS;
  if (!s->q_busy) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, worker, s) != 0) {
      s->q_head = s->q_tail = NULL;
      free(q);
      if (nd.kind == NODE_EVENT) __atomic_store_n(&nd.ev->queued, 0, __ATOMIC_RELEASE);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      s->q_busy = 1;
    }
    pthread_attr_destroy(&at);
  }
  pthread_mutex_unlock(&s->q_mu);
  return r;
}

// drain waits until s's queue has run, then for its kernels, and returns
// (and clears) the first failure of its queued work.
static CUresult drain(CUstream s) {
  for (;;) {
    pthread_mutex_lock(&s->q_mu);
    int busy = s->q_busy;
    CUresult r = s->q_err;
    if (!busy) s->q_err = CUDA_SUCCESS;
    pthread_mutex_unlock(&s->q_mu);
    if (!busy) {
      join(s);
      return r;
    }
    usleep(20);
  }
}

// queue_busy reports whether s has queued work not run yet.
static int queue_busy(CUstream s) {
  pthread_mutex_lock(&s->q_mu);
  int busy = s->q_busy;
  pthread_mutex_unlock(&s->q_mu);
  return busy;
}

// submit records nd while s captures, else runs it. Work on the legacy
// stream while a blocking stream of its device captures is refused, and
// work on an invalidated capture.
static CUresult submit(CUstream s, struct node nd) {
  s = stream_of(s);
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  int captured = 0;
  if (is_legacy(s)) {
    r = capturing == NULL ? CUDA_SUCCESS : implicit_locked(stream_dev(s), 1);
  } else if (s->capture != NULL) {
    captured = 1;
    r = s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                                : add_node(s->capture, nd);
  }
  pthread_mutex_unlock(&capture_mu);
  if (r != CUDA_SUCCESS || captured) return r;
  return put(s, nd);
}

// cuMemcpyAsync: a device-to-device copy in 8-byte atomic words (the
// proxy's, while the kernel runs on another stream).
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  NEED_CTX();
  struct node nd = {.kind = NODE_COPY, .dst = (uintptr_t)dst, .src = (const void*)(uintptr_t)src, .n = n};
  return submit(s, nd);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  NEED_CTX();
  struct node nd = {.kind = NODE_COPY, .dst = (uintptr_t)dst, .src = src, .n = n};
  return submit(s, nd);
}

// cuMemcpyDtoHAsync: the watchdog's read while the kernel runs on
// another stream: 8-byte atomic words.
CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  NEED_CTX();
  struct node nd = {.kind = NODE_COPY, .dst = (uintptr_t)dst, .src = (const void*)(uintptr_t)src, .n = n};
  return submit(s, nd);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  NEED_CTX();
  struct node nd = {.kind = NODE_SET8, .dst = (uintptr_t)dst, .n = n, .value = v};
  return submit(s, nd);
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  NEED_CTX();
  if (dst % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  struct node nd = {.kind = NODE_SET32, .dst = (uintptr_t)dst, .n = n, .value = v};
  return submit(s, nd);
}

// cuStreamBeginCapture (cuda.h names it cuStreamBeginCapture_v2): the
// legacy stream cannot capture, nor a stream that is capturing.
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  NEED_CTX();
  if (s == NULL || s == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s == CU_STREAM_PER_THREAD || (mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                    mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                                    mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct CUgraph_st* g = calloc(1, sizeof *g);
  if (g == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  if (s->capture != NULL) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    s->capture = g;
    s->cap_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->cap_mode = (int)mode;
    s->cap_thread = pthread_self();
    s->cap_id = next_capture_id++;
    s->cap_next = capturing;
    capturing = s;
  }
  pthread_mutex_unlock(&capture_mu);
  if (r != CUDA_SUCCESS) free(g);
  return r;
}

// cuStreamEndCapture returns the graph, or for an invalidated capture
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and a NULL graph. A capture not
// begun in relaxed mode ends on the thread that began it.
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  NEED_CTX();
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || g == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  struct CUgraph_st* captured = NULL;
  if (s->capture == NULL) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->cap_thread, pthread_self())) {
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  } else {
    int invalidated = s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    captured = end_capture_locked(s);
    if (invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  pthread_mutex_unlock(&capture_mu);
  if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    free(captured->nodes);
    free(captured);
    captured = NULL;
  }
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) *g = captured;
  return r;
}

// capture_info answers for s: on the legacy stream, the implicit
// dependency on a capturing blocking stream (that capture stays valid).
static CUresult capture_info(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph) {
  if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
  s = stream_of(s);
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  if (is_legacy(s)) {
    r = implicit_locked(stream_dev(s), 0);
    if (r == CUDA_SUCCESS) *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else if (s->capture == NULL) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *status = (CUstreamCaptureStatus)s->cap_status;
    if (id != NULL) *id = s->cap_id;
    if (graph != NULL) *graph = s->capture;
  }
  pthread_mutex_unlock(&capture_mu);
  return r;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  NEED_CTX();
  return capture_info(s, status, NULL, NULL);
}

CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  NEED_CTX();
  return capture_info(s, status, id, NULL);
}

// cuStreamGetCaptureInfo_v2: the graph being captured into, no
// dependency nodes (the fake's graphs are lists).
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                   const CUgraphNode** deps, size_t* ndeps) {
  NEED_CTX();
  if (deps != NULL) *deps = NULL;
  if (ndeps != NULL) *ndeps = 0;
  return capture_info(s, status, id, graph);
}

// cuThreadExchangeStreamCaptureMode swaps the calling thread's capture
// interaction mode.
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == NULL || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                       *mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long flags) {
  NEED_CTX();
  if (g == NULL || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  struct CUgraphExec_st* x = calloc(1, sizeof *x);
  if (x == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  x->g.nodes = malloc((g->n == 0 ? 1 : g->n) * sizeof(struct node));
  if (x->g.nodes == NULL) {
    free(x);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (g->n > 0) memcpy(x->g.nodes, g->nodes, g->n * sizeof(struct node));
  x->g.n = x->g.cap = g->n;
  *e = x;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  NEED_CTX();
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  s = stream_of(s);
  // A graph launched into a capture would be a child graph node, which
  // the fake's graphs do not have.
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  if (is_legacy(s)) {
    r = capturing == NULL ? CUDA_SUCCESS : implicit_locked(stream_dev(s), 1);
  } else if (s->capture != NULL) {
    r = s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                                : CUDA_ERROR_NOT_SUPPORTED;
  }
  pthread_mutex_unlock(&capture_mu);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < e->g.n; i++) {
    CUresult r = put(s, e->g.nodes[i]);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec e) {
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  free(e->g.nodes);
  free(e);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g) {
  if (g == NULL) return CUDA_ERROR_INVALID_HANDLE;
  free(g->nodes);
  free(g);
  return CUDA_SUCCESS;
}

// ---- streams ----------------------------------------------------------------

// cuStreamCreate: a blocking stream (flags 0) synchronises with the
// legacy stream, a CU_STREAM_NON_BLOCKING one does not.
CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  NEED_CTX();
  if (s == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0) return CUDA_ERROR_INVALID_VALUE;
  *s = calloc(1, sizeof(struct CUstream_st));
  if (*s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  (*s)->home = ctx_dev(stack[depth - 1]);
  (*s)->flags = flags;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
  NEED_CTX();
  s = stream_of(s);
  CUresult r = sync_check(s);
  if (r != CUDA_SUCCESS) return r;
  return drain(s);
}

// cuStreamQuery: the fake cannot tell that a kernel's host threads have
// ended before they are joined, so a stream with a kernel not yet joined
// (by a synchronisation) is not ready.
CUresult cuStreamQuery(CUstream s) {
  NEED_CTX();
  s = stream_of(s);
  CUresult r = sync_check(s);
  if (r != CUDA_SUCCESS) return r;
  if (queue_busy(s) ||
      __atomic_load_n(&s->joined, __ATOMIC_ACQUIRE) < __atomic_load_n(&s->started, __ATOMIC_ACQUIRE)) {
    return CUDA_ERROR_NOT_READY;
  }
  return CUDA_SUCCESS;
}

// cuStreamDestroy of a capturing stream drops its capture.
CUresult cuStreamDestroy(CUstream s) {
  NEED_CTX();
  if (s == NULL || is_legacy(s) || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  pthread_mutex_lock(&capture_mu);
  struct CUgraph_st* g = s->capture == NULL ? NULL : end_capture_locked(s);
  pthread_mutex_unlock(&capture_mu);
  if (g != NULL) {
    free(g->nodes);
    free(g);
  }
  drain(s);
  free(s);
  return CUDA_SUCCESS;
}

// ---- events -------------------------------------------------------------------

CUresult cuEventCreate(CUevent* e, unsigned int flags) {
  NEED_CTX();
  (void)flags;
  *e = calloc(1, sizeof(struct CUevent_st));
  return *e == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e) {
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  free(e);
  return CUDA_SUCCESS;
}

// cuEventRecord marks the work on s so far: its kernels started. On a
// capturing stream the record is captured: the event then stands for no
// work that runs, and synchronising with it fails until it is recorded
// again outside a capture.
CUresult cuEventRecord(CUevent e, CUstream s) {
  NEED_CTX();
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  s = stream_of(s);
  pthread_mutex_lock(&capture_mu);
  CUresult r = CUDA_SUCCESS;
  int captured = 0;
  if (is_legacy(s)) {
    r = capturing == NULL ? CUDA_SUCCESS : implicit_locked(stream_dev(s), 1);
  } else if (s->capture != NULL) {
    captured = 1;
    if (s->cap_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  pthread_mutex_unlock(&capture_mu);
  if (r != CUDA_SUCCESS) return r;
  if (captured) {
    e->s = NULL;
    __atomic_store_n(&e->captured, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
  }
  // Behind queued work the record waits its turn.
  struct node nd = {.kind = NODE_EVENT, .ev = e};
  return put(s, nd);
}

// cuEventSynchronize waits for the kernels started on the event's stream
// before its record, not for later ones: it joins the pending kernel
// only while that is the recorded one (a later kernel's start joins it
// first), else waits for the joiner.
CUresult cuEventSynchronize(CUevent e) {
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (__atomic_load_n(&e->captured, __ATOMIC_ACQUIRE)) return CUDA_ERROR_CAPTURED_EVENT;
  while (__atomic_load_n(&e->queued, __ATOMIC_ACQUIRE)) usleep(20);
  CUstream s = e->s;
  if (s == NULL) return CUDA_SUCCESS;
  for (;;) {
    if (__atomic_load_n(&s->joined, __ATOMIC_ACQUIRE) >= e->at) return CUDA_SUCCESS;
    void* h = __atomic_load_n(&s->pending, __ATOMIC_ACQUIRE);
    if (h != NULL && __atomic_load_n(&s->started, __ATOMIC_ACQUIRE) == e->at &&
        __atomic_load_n(&s->joined, __ATOMIC_ACQUIRE) + 1 == e->at &&
        __atomic_compare_exchange_n(&s->pending, &h, NULL, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      join_handle(s, h);
      return CUDA_SUCCESS;
    }
    usleep(20);
  }
}

CUresult cuEventQuery(CUevent e) {
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (__atomic_load_n(&e->captured, __ATOMIC_ACQUIRE)) return CUDA_ERROR_CAPTURED_EVENT;
  if (__atomic_load_n(&e->queued, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_READY;
  if (e->s == NULL || __atomic_load_n(&e->s->joined, __ATOMIC_ACQUIRE) >= e->at) return CUDA_SUCCESS;
  return CUDA_ERROR_NOT_READY;
}

// ---- modules and launches ---------------------------------------------------

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  NEED_CTX();
  UNSAFE(0);
  if (image == NULL) return CUDA_ERROR_INVALID_VALUE;
  const char* path = getenv("MSCCLGO_FAKE_KERNEL_LIB");
  if (path == NULL || *path == 0) return CUDA_ERROR_FILE_NOT_FOUND;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return CUDA_ERROR_FILE_NOT_FOUND;
  *m = calloc(1, sizeof(struct CUmod_st));
  if (*m == NULL) {
    dlclose(lib);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  (*m)->lib = lib;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m) {
  NEED_CTX();
  if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
  // The library stays loaded: host threads of a launch may still unwind.
  free(m);
  return CUDA_SUCCESS;
}

// cuModuleGetFunction resolves mscclgo_NAME to the host launcher
// mscclgo_host_NAME and its waiter mg_host_wait.
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  NEED_CTX();
  if (m == NULL || strncmp(name, "mscclgo_", 8) != 0 || strlen(name) > 200) return CUDA_ERROR_NOT_FOUND;
  char sym[256];
  strcpy(sym, "mscclgo_host_");
  strcat(sym, name + 8);
  void* launch = dlsym(m->lib, sym);
  void* wait = dlsym(m->lib, "mg_host_wait");
  if (launch == NULL || wait == NULL) return CUDA_ERROR_NOT_FOUND;
  struct CUfunc_st* fn = calloc(1, sizeof(struct CUfunc_st));
  if (fn == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  // POSIX guarantees that dlsym's object pointers convert to functions.
  memcpy(&fn->launch, &launch, sizeof launch);
  memcpy(&fn->wait, &wait, sizeof wait);
  fn->max_dynamic_shared = FAKE_SHARED_DEFAULT;
  *f = fn;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = FAKE_MAX_THREADS;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *v = f->max_dynamic_shared;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *v = 64;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
  if (v < 0 || v > FAKE_SHARED_OPTIN) return CUDA_ERROR_INVALID_VALUE;
  f->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}

// The fake's occupancy: 2048 threads per multiprocessor, at most 32
// blocks, within the opted-in shared memory.
static int per_sm(CUfunction f, int block, size_t shmem) {
  int blocks = 2048 / block;
  if (blocks > 32) blocks = 32;
  if (shmem > (size_t)f->max_dynamic_shared) {
    blocks = 0;
  } else if (shmem > 0 && (size_t)blocks * shmem > (size_t)FAKE_SHARED_OPTIN) {
    blocks = (int)((size_t)FAKE_SHARED_OPTIN / shmem);
  }
  return blocks;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction f, int block, size_t shmem) {
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (block <= 0 || block > FAKE_MAX_THREADS) return CUDA_ERROR_INVALID_VALUE;
  *n = per_sm(f, block, shmem);
  return CUDA_SUCCESS;
}

// launch starts f's host launcher on stream s once the grid's residency
// is taken on the current context's device. cooperative: the grid alone
// must fit the device.
static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                       unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params,
                       void** extra, int cooperative) {
  NEED_CTX();
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > FAKE_MAX_THREADS || by != 1 || bz != 1 || params == NULL ||
      extra != NULL || shmem > (unsigned)f->max_dynamic_shared) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int dev = ctx_dev(stack[depth - 1]);
  int k = per_sm(f, (int)bx, shmem);
  if (k <= 0) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  long long cap = (long long)num_sms() * RES_UNIT;
  long long units = (long long)gx * ((RES_UNIT + k - 1) / k);
  if (cooperative && units > cap) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  // The argument is copied at the launch (a graph keeps the copy).
  struct node nd = {
      .kind = NODE_KERNEL, .fn = f, .grid = gx, .block = bx, .shmem = shmem, .arg = *(void**)params[0], .dev = dev};
  return submit(s, nd);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra, 0);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shmem, CUstream s,
                                   void** params) {
  return launch(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL, 1);
}

// ---- virtual memory management and multicast (NVLS) -------------------------
//
// cuMemCreate backs a physical allocation with a memory file; cuMemMap of
// it maps the file at a reserved range. A multicast object (CUDA 12.1's
// cuMulticastCreate, which 11.8's cuda.h lacks: declared here and reached
// through cuGetProcAddress, as the driver does) records its devices and
// each device's binding; a range mapped to it stays inaccessible, since
// the g++-built kernel has no multimem path and must not touch it. Every
// multicast call is checked as the driver documents it (granularity,
// bounds, every device added before a bind or map) and, with
// MSCCLGO_FAKECUDA_LOG set, appended to that file as one line.

enum {
  FAKE_GRANULARITY = 2 << 20,  // allocation and minimum multicast granularity
  FAKE_MC_RECOMMENDED = 4 << 20,
  KIND_PHYS = 1,
  KIND_MC = 2,
};

typedef struct {
  unsigned int numDevices;
  size_t size;
  unsigned long long handleTypes;
  unsigned long long flags;
} fake_mc_prop;

struct mc_binding {
  int dev;
  size_t mc_off, mem_off, size;
  struct vmm_handle* mem;
};

struct vmm_handle {
  int kind;
  size_t size;
  int dev;     // KIND_PHYS: the owning device
  int fd;      // KIND_PHYS: the memory file
  int mapped;  // ranges mapped to it
  int released;
  // KIND_MC:
  unsigned num_devices;
  int devs[FAKE_MAX_DEVICES];
  unsigned added;
  struct mc_binding binds[FAKE_MAX_DEVICES];
  unsigned bound;
};

// A range mapped with cuMemMap.
struct vmm_map {
  uintptr_t va;
  size_t size;
  struct vmm_handle* h;
  unsigned access;  // bit d: device d may access it
  struct vmm_map* next;
};

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_map* maps;

static void fake_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

static void fake_log(const char* fmt, ...) {
  const char* path = getenv("MSCCLGO_FAKECUDA_LOG");
  if (path == NULL || *path == 0) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

// free_handle frees a released handle that nothing maps or binds.
static void free_handle(struct vmm_handle* h) {
  if (!h->released || h->mapped > 0 || (h->kind == KIND_MC && h->bound > 0)) return;
  if (h->kind == KIND_PHYS) close(h->fd);
  free(h);
}

CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  if (g == NULL || prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_dev(prop->location.id)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  (void)option;
  *g = FAKE_GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* out, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  NEED_CTX();
  if (out == NULL || prop == NULL || flags != 0 || size == 0 || size % FAKE_GRANULARITY != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !valid_dev(prop->location.id)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct vmm_handle* h = calloc(1, sizeof *h);
  if (h == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  h->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
  if (h->fd < 0 || ftruncate(h->fd, (off_t)size) != 0) {
    if (h->fd >= 0) close(h->fd);
    free(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  h->kind = KIND_PHYS;
  h->size = size;
  h->dev = prop->location.id;
  *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  struct vmm_handle* h = (struct vmm_handle*)(uintptr_t)handle;
  if (h == NULL || h->released) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_mu);
  if (h->kind == KIND_MC) {
    fake_log("mc release %p mapped %d bound %u", (void*)h, h->mapped, h->bound);
  }
  h->released = 1;
  free_handle(h);
  pthread_mutex_unlock(&vmm_mu);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* p, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  if (p == NULL || size == 0 || size % FAKE_GRANULARITY != 0 || addr != 0 || flags != 0 ||
      (alignment != 0 && alignment % FAKE_GRANULARITY != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
  if (p == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  munmap((void*)(uintptr_t)p, size);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  struct vmm_handle* h = (struct vmm_handle*)(uintptr_t)handle;
  if (p == 0 || h == NULL || flags != 0 || size == 0 || size % FAKE_GRANULARITY != 0 ||
      offset % FAKE_GRANULARITY != 0 || offset + size > h->size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (h->kind == KIND_MC) {
    // The driver blocks until every device is added: in one process
    // that is a hang, here an error.
    if (h->added != h->num_devices) return CUDA_ERROR_NOT_PERMITTED;
  } else if (mmap((void*)(uintptr_t)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset) ==
             MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  struct vmm_map* m = calloc(1, sizeof *m);
  if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  m->va = (uintptr_t)p;
  m->size = size;
  m->h = h;
  pthread_mutex_lock(&vmm_mu);
  h->mapped++;
  m->next = maps;
  maps = m;
  if (h->kind == KIND_MC) fake_log("mc map %p va %#lx size %zu", (void*)h, (unsigned long)p, size);
  pthread_mutex_unlock(&vmm_mu);
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
  pthread_mutex_lock(&vmm_mu);
  struct vmm_map** at = &maps;
  while (*at != NULL && ((*at)->va != (uintptr_t)p || (*at)->size != size)) at = &(*at)->next;
  struct vmm_map* m = *at;
  if (m == NULL) {
    pthread_mutex_unlock(&vmm_mu);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *at = m->next;
  if (m->h->kind == KIND_MC) fake_log("mc unmap %p va %#lx size %zu", (void*)m->h, (unsigned long)p, size);
  m->h->mapped--;
  free_handle(m->h);
  pthread_mutex_unlock(&vmm_mu);
  // The range stays reserved until cuMemAddressFree.
  mmap((void*)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  free(m);
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (desc == NULL || count == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_mu);
  struct vmm_map* m = maps;
  while (m != NULL && (m->va != (uintptr_t)p || m->size != size)) m = m->next;
  CUresult r = m == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
    int dev = desc[i].location.id;
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_dev(dev) ||
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      r = CUDA_ERROR_INVALID_VALUE;
    } else if (m->h->kind == KIND_PHYS && dev != m->h->dev && !can_peer(dev, m->h->dev)) {
      r = CUDA_ERROR_INVALID_DEVICE;
    } else {
      m->access |= 1u << dev;
      if (m->h->kind == KIND_MC) fake_log("mc access %p va %#lx dev %d", (void*)m->h, (unsigned long)p, dev);
    }
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

static CUresult fake_mc_granularity(size_t* g, const fake_mc_prop* prop, int option) {
  if (g == NULL || prop == NULL || prop->numDevices == 0) return CUDA_ERROR_INVALID_VALUE;
  *g = option == 1 ? FAKE_MC_RECOMMENDED : FAKE_GRANULARITY;
  return CUDA_SUCCESS;
}

static CUresult fake_mc_create(CUmemGenericAllocationHandle* out, const fake_mc_prop* prop) {
  if (!env_int("MSCCLGO_FAKECUDA_MULTICAST", 0, 0, 1)) return CUDA_ERROR_NOT_SUPPORTED;
  if (out == NULL || prop == NULL || prop->numDevices == 0 || prop->numDevices > FAKE_MAX_DEVICES ||
      prop->size == 0 || prop->size % FAKE_GRANULARITY != 0 || prop->flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct vmm_handle* h = calloc(1, sizeof *h);
  if (h == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  h->kind = KIND_MC;
  h->size = prop->size;
  h->num_devices = prop->numDevices;
  h->fd = -1;
  *out = (CUmemGenericAllocationHandle)(uintptr_t)h;
  fake_log("mc create %p devices %u size %zu granularity %d", (void*)h, prop->numDevices, prop->size,
           FAKE_GRANULARITY);
  return CUDA_SUCCESS;
}

static CUresult fake_mc_add(CUmemGenericAllocationHandle mc, CUdevice dev) {
  struct vmm_handle* h = (struct vmm_handle*)(uintptr_t)mc;
  if (h == NULL || h->kind != KIND_MC || h->released) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&vmm_mu);
  CUresult r = h->added < h->num_devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; r == CUDA_SUCCESS && i < h->added; i++) {
    if (h->devs[i] == dev) r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS) {
    h->devs[h->added++] = dev;
    fake_log("mc add %p dev %d", (void*)h, dev);
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

static CUresult fake_mc_bind(CUmemGenericAllocationHandle mc, size_t mc_off, CUmemGenericAllocationHandle memh,
                             size_t mem_off, size_t size, unsigned long long flags) {
  struct vmm_handle* h = (struct vmm_handle*)(uintptr_t)mc;
  struct vmm_handle* mem = (struct vmm_handle*)(uintptr_t)memh;
  if (h == NULL || h->kind != KIND_MC || mem == NULL || mem->kind != KIND_PHYS || flags != 0 || size == 0 ||
      (mc_off | mem_off | size) % FAKE_GRANULARITY != 0 || mc_off + size > h->size || mem_off + size > mem->size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&vmm_mu);
  CUresult r = CUDA_SUCCESS;
  int member = 0;
  for (unsigned i = 0; i < h->added; i++) member |= h->devs[i] == mem->dev;
  if (h->added != h->num_devices) {
    r = CUDA_ERROR_NOT_PERMITTED;  // the driver would block: a hang in one process
  } else if (!member) {
    r = CUDA_ERROR_INVALID_DEVICE;
  }
  for (unsigned i = 0; r == CUDA_SUCCESS && i < h->bound; i++) {
    if (h->binds[i].dev == mem->dev) r = CUDA_ERROR_INVALID_VALUE;  // one binding per device here
  }
  if (r == CUDA_SUCCESS) {
    h->binds[h->bound++] = (struct mc_binding){mem->dev, mc_off, mem_off, size, mem};
    fake_log("mc bind %p dev %d mcoff %zu memoff %zu size %zu memsize %zu", (void*)h, mem->dev, mc_off, mem_off,
             size, mem->size);
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

static CUresult fake_mc_unbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t mc_off, size_t size) {
  struct vmm_handle* h = (struct vmm_handle*)(uintptr_t)mc;
  if (h == NULL || h->kind != KIND_MC) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&vmm_mu);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < h->bound; i++) {
    struct mc_binding* b = &h->binds[i];
    if (b->dev == dev && b->mc_off == mc_off && b->size == size) {
      h->binds[i] = h->binds[--h->bound];
      fake_log("mc unbind %p dev %d mcoff %zu size %zu", (void*)h, dev, mc_off, size);
      r = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&vmm_mu);
  return r;
}

// cuGetProcAddress finds the multicast calls (and the fake's others).
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (symbol == NULL || pfn == NULL || flags != CU_GET_PROC_ADDRESS_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  (void)version;
  static const struct {
    const char* name;
    void* fn;
  } table[] = {
      {"cuMulticastCreate", (void*)fake_mc_create},       {"cuMulticastAddDevice", (void*)fake_mc_add},
      {"cuMulticastBindMem", (void*)fake_mc_bind},        {"cuMulticastUnbind", (void*)fake_mc_unbind},
      {"cuMulticastGetGranularity", (void*)fake_mc_granularity},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strcmp(symbol, table[i].name) == 0) {
      *pfn = table[i].fn;
      return CUDA_SUCCESS;
    }
  }
  *pfn = NULL;
  return CUDA_ERROR_NOT_FOUND;
}

// ---- stream memory operations ------------------------------------------------
//
// As CUDA's documentation gives them (cuStreamWaitValue32 and the section
// "Stream Memory Operations"): the V1 entries (cuStreamWaitValue32,
// cuStreamWriteValue32) are disabled unless the kernel module enables
// them (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS is 0 here), the V2
// entries (CUDA 11.7 and later) are always there. The address is a device
// address: device memory, or pinned host memory mapped into the device
// (cuMemHostAlloc, which unified addressing maps at its host address);
// anything else is CUDA_ERROR_INVALID_VALUE. The fake device reports
// neither CU_STREAM_WAIT_VALUE_NOR nor flushes of remote writes
// (CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V2 and
// CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES are 0): those flags are
// CUDA_ERROR_NOT_SUPPORTED, unknown flags CUDA_ERROR_INVALID_VALUE. A wait
// whose condition does not hold queues the stream's later work (put).

// memop_addr checks the address of a stream memory operation on n bytes:
// aligned to n, and in device memory (own, opened through IPC, or a
// mapped VMM range) or in pinned host memory from cuMemHostAlloc, which
// unified addressing maps at its host address. Pageable memory, or any
// address the driver did not allocate, is refused with
// CUDA_ERROR_INVALID_VALUE.
static CUresult memop_addr(CUdeviceptr addr, size_t n) {
  uintptr_t p = (uintptr_t)addr;
  if (p == 0 || p % n != 0) return CUDA_ERROR_INVALID_VALUE;
  if (host_flags(p, n) >= 0) return CUDA_SUCCESS;
  int found = 0;
  pthread_mutex_lock(&allocs_mu);
  for (struct dev_alloc* a = allocs; a != NULL && !found; a = a->next) {
    found = p >= a->base && p - a->base < a->size && n <= a->size - (p - a->base);
  }
  pthread_mutex_unlock(&allocs_mu);
  if (found) return CUDA_SUCCESS;
  pthread_mutex_lock(&vmm_mu);
  for (struct vmm_map* m = maps; m != NULL && !found; m = m->next) {
    found = m->h->kind == KIND_PHYS && p >= m->va && p - m->va < m->size && n <= m->size - (p - m->va);
  }
  pthread_mutex_unlock(&vmm_mu);
  return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  NEED_CTX();
  CUresult r = memop_addr(addr, 4);
  if (r != CUDA_SUCCESS) return r;
  unsigned cond = flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
  if (cond > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
  if (cond == CU_STREAM_WAIT_VALUE_NOR || (flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  struct node nd = {.kind = NODE_WAIT32, .dst = (uintptr_t)addr, .value = value, .n = cond};
  return submit(s, nd);
}

CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  NEED_CTX();
  CUresult r = memop_addr(addr, 4);
  if (r != CUDA_SUCCESS) return r;
  if ((flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0) return CUDA_ERROR_INVALID_VALUE;
  struct node nd = {.kind = NODE_WRITE32, .dst = (uintptr_t)addr, .value = value};
  return submit(s, nd);
}

// The V1 entries: disabled, as on a driver loaded without
// NVreg_EnableStreamMemOPs=1.
CUresult cuStreamWaitValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  NEED_CTX();
  (void)s, (void)addr, (void)value, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  NEED_CTX();
  (void)s, (void)addr, (void)value, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
