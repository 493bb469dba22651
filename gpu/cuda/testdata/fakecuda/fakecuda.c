// fakecuda.c is a fake libcuda.so.1 for the cuda-tagged tests of gpu/cuda
// on machines without a GPU: the driver API calls that gorgonia.org/cu's
// init and the gpu/cuda driver make, over host memory. Device memory is
// host memory (aligned, zeroed), so a device address is a host address.
// cuModuleLoadData ignores the image and loads the g++-built interpreter
// (csrc/host/kernel.cc) named by $MSCCLGO_FAKE_KERNEL_LIB; cuLaunchKernel
// starts it on host threads and a stream's synchronize joins them. Other
// stream work (async copies, memsets) runs at once, after the stream's
// pending kernel, in 8-byte (memsets: 4-byte) atomic words where aligned,
// so that a kernel polling LL packets never sees a torn word. Stream
// capture records a stream's copies, memsets and launches into a graph
// instead of running them, and cuGraphLaunch replays them in order. Calls that need a
// context fail with CUDA_ERROR_INVALID_CONTEXT when none is current on the
// calling thread, which checks the driver's context handling.
//
// cuMemAlloc backs every allocation with a memory file (memfd), so that
// cuIpcGetMemHandle can export it: the handle names the file by the
// exporting process's id and descriptor, and cuIpcOpenMemHandle in a
// process of the same user maps /proc/PID/fd/FD (Linux).
//
// Build: cc -shared -fPIC -o libcuda.so.1 fakecuda.c -ldl (Makefile
// `fakecuda`); use through LD_LIBRARY_PATH.
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
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
};

struct CUctx_st {
  int refs;
};

struct CUgraph_st;

// A stream remembers its launch not yet joined, and the graph it is
// capturing into (NULL when its work runs).
struct CUstream_st {
  void* pending;
  void (*wait)(void*);
  struct CUgraph_st* capture;
};

// A captured node: a host-to-device copy (reads src when it runs), a
// memset of 8- or 32-bit values, or a kernel launch.
enum { NODE_COPY, NODE_SET8, NODE_SET32, NODE_KERNEL };
struct node {
  int kind;
  uintptr_t dst;
  const void* src;
  size_t n;
  unsigned value;
  struct CUfunc_st* fn;
  unsigned grid, block, shmem;
  void* arg;
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

static struct CUctx_st primary;
static struct CUstream_st legacy;  // the NULL stream

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

static CUstream stream_of(CUstream s) { return s == NULL ? &legacy : s; }

// join waits for a stream's pending launch.
static void join(CUstream s) {
  void* h = __atomic_exchange_n(&s->pending, NULL, __ATOMIC_ACQ_REL);
  if (h != NULL) s->wait(h);
}

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDriverGetVersion(int* v) {
  *v = 11080;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult e, const char** s) {
  switch (e) {
    case CUDA_SUCCESS:
      *s = "CUDA_SUCCESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
      *s = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *s = "CUDA_ERROR_OUT_OF_MEMORY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT:
      *s = "CUDA_ERROR_INVALID_CONTEXT";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND:
      *s = "CUDA_ERROR_NOT_FOUND";
      return CUDA_SUCCESS;
    default:
      *s = NULL;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (d != 0 || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, "fake CUDA device (host threads)", (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = FAKE_SMS;
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
      *v = 1;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&primary.refs, 1, __ATOMIC_RELAXED);
  *c = &primary;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (__atomic_sub_fetch(&primary.refs, 1, __ATOMIC_RELAXED) < 0) return CUDA_ERROR_INVALID_CONTEXT;
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

CUresult cuCtxSynchronize(void) {
  NEED_CTX();
  join(&legacy);
  return CUDA_SUCCESS;
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
  struct dev_alloc* next;
};

static pthread_mutex_t allocs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dev_alloc* allocs;

static void add_alloc(uintptr_t base, size_t size, int fd) {
  struct dev_alloc* a = malloc(sizeof *a);
  if (a == NULL) abort();
  a->base = base;
  a->size = size;
  a->fd = fd;
  pthread_mutex_lock(&allocs_mu);
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
  struct fake_ipc f;
  memcpy(&f, h.reserved, sizeof f);
  if (memcmp(f.magic, ipc_magic, sizeof f.magic) != 0 || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
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
  struct dev_alloc* a = take_alloc((uintptr_t)p, 0);
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  munmap((void*)a->base, a->size);
  free(a);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** p, size_t n, unsigned int flags) {
  NEED_CTX();
  if (n == 0 || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *p = zalloc(4096, n);
  return *p == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int flags) {
  NEED_CTX();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
  NEED_CTX();
  free(p);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) {
  NEED_CTX();
  memset((void*)(uintptr_t)p, v, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  NEED_CTX();
  memcpy((void*)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  NEED_CTX();
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

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  NEED_CTX();
  (void)s;
  copy_words((uintptr_t)dst, (uintptr_t)src, n);
  return CUDA_SUCCESS;
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

// run_node runs one node on stream s: after the stream's pending kernel
// (work on one stream runs in order), a kernel asynchronously.
static CUresult run_node(CUstream s, const struct node* nd) {
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
    default: {
      void* h = nd->fn->launch(nd->grid, nd->block, nd->shmem, nd->arg);
      if (h == NULL) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
      s->wait = nd->fn->wait;
      __atomic_store_n(&s->pending, h, __ATOMIC_RELEASE);
      return CUDA_SUCCESS;
    }
  }
}

// submit records nd while s captures, else runs it.
static CUresult submit(CUstream s, struct node nd) {
  s = stream_of(s);
  if (s->capture != NULL) return add_node(s->capture, nd);
  return run_node(s, &nd);
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
  s = stream_of(s);
  if (s->capture != NULL) return CUDA_ERROR_NOT_SUPPORTED;
  join(s);
  copy_words((uintptr_t)dst, (uintptr_t)src, n);
  return CUDA_SUCCESS;
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

CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  NEED_CTX();
  (void)mode;
  if (s == NULL || s->capture != NULL) return CUDA_ERROR_INVALID_VALUE;
  s->capture = calloc(1, sizeof(struct CUgraph_st));
  return s->capture == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  NEED_CTX();
  if (s == NULL || s->capture == NULL) return CUDA_ERROR_INVALID_VALUE;
  *g = s->capture;
  s->capture = NULL;
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
  if (s->capture != NULL) return CUDA_ERROR_NOT_SUPPORTED;
  for (size_t i = 0; i < e->g.n; i++) {
    CUresult r = run_node(s, &e->g.nodes[i]);
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

CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  NEED_CTX();
  (void)flags;
  *s = calloc(1, sizeof(struct CUstream_st));
  return *s == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
  NEED_CTX();
  join(stream_of(s));
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s) {
  NEED_CTX();
  if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
  join(s);
  free(s);
  return CUDA_SUCCESS;
}

// ---- modules and launches ---------------------------------------------------

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  NEED_CTX();
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
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction f, int block, size_t shmem) {
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (block <= 0 || block > FAKE_MAX_THREADS) return CUDA_ERROR_INVALID_VALUE;
  int blocks = 2048 / block;
  if (blocks > 32) blocks = 32;
  if (shmem > (size_t)f->max_dynamic_shared) {
    blocks = 0;
  } else if (shmem > 0 && (size_t)blocks * shmem > (size_t)FAKE_SHARED_OPTIN) {
    blocks = (int)((size_t)FAKE_SHARED_OPTIN / shmem);
  }
  *n = blocks;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params, void** extra) {
  NEED_CTX();
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > FAKE_MAX_THREADS || by != 1 || bz != 1 || params == NULL ||
      extra != NULL || shmem > (unsigned)f->max_dynamic_shared) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The argument is copied at the launch (a graph keeps the copy).
  struct node nd = {.kind = NODE_KERNEL, .fn = f, .grid = gx, .block = bx, .shmem = shmem, .arg = *(void**)params[0]};
  return submit(s, nd);
}
