// capturecheck.c checks the stream-capture rules of the fake libcuda
// (fakecuda.c) through the driver API as cuda.h declares it: one line per
// check, "ok NAME" or "FAIL NAME: what" (a check may print several FAIL
// lines), and exit status 1 when a check failed. gpu/cuda's
// TestFakeCapture builds it against build/fakecuda and runs it;
// MSCCLGO_FAKE_KERNEL_LIB names the fake's kernel library, which
// cuModuleLoadData loads. It fakes a machine of two devices.
//
// Build: cc -std=c11 -Wall -Wextra -Werror -pthread capturecheck.c
// build/fakecuda/libcuda.so.1, run with LD_LIBRARY_PATH=build/fakecuda.
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GLOBAL CU_STREAM_CAPTURE_MODE_GLOBAL
#define THREAD_LOCAL CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
#define RELAXED CU_STREAM_CAPTURE_MODE_RELAXED

enum { CHECK_SECONDS = 30 };  // a check that runs longer has hung

static CUcontext ctx0, ctx1;  // the primary contexts of devices 0 and 1
static const char* current;   // the check running
static int failed;            // it failed
static int any_failed;

static void describe(CUresult r, char* buf, size_t n) {
  const char* s = NULL;
  if (cuGetErrorName(r, &s) == CUDA_SUCCESS && s != NULL) {
    snprintf(buf, n, "%s", s);
  } else {
    snprintf(buf, n, "CUresult %d", (int)r);
  }
}

static void fail(int line, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(int line, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL %s: line %d: %s\n", current, line, msg);
  failed = 1;
}

// EXPECT checks a call's result.
#define EXPECT(call, want) expect(__LINE__, #call, (call), (want))

static void expect(int line, const char* what, CUresult got, CUresult want) {
  if (got == want) return;
  char g[64], w[64];
  describe(got, g, sizeof g);
  describe(want, w, sizeof w);
  fail(line, "%s = %s, want %s", what, g, w);
}

// must stops the program when a call the checks stand on fails.
#define MUST(call) must(__LINE__, #call, (call))

static void must(int line, const char* what, CUresult r) {
  if (r == CUDA_SUCCESS) return;
  char g[64];
  describe(r, g, sizeof g);
  printf("FAIL %s: line %d: %s = %s (cannot go on)\n", current == NULL ? "setup" : current, line, what, g);
  exit(1);
}

static const char* status_name(CUstreamCaptureStatus s) {
  switch (s) {
    case CU_STREAM_CAPTURE_STATUS_NONE:
      return "NONE";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE:
      return "ACTIVE";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED:
      return "INVALIDATED";
    default:
      return "unknown";
  }
}

// EXPECT_STATUS checks cuStreamIsCapturing's answer for s.
#define EXPECT_STATUS(s, want) expect_status(__LINE__, (s), (want))

static void expect_status(int line, CUstream s, CUstreamCaptureStatus want) {
  CUstreamCaptureStatus got = (CUstreamCaptureStatus)99;
  CUresult r = cuStreamIsCapturing(s, &got);
  if (r != CUDA_SUCCESS) {
    char g[64];
    describe(r, g, sizeof g);
    fail(line, "cuStreamIsCapturing = %s, want CUDA_SUCCESS", g);
  } else if (got != want) {
    fail(line, "capture status %s, want %s", status_name(got), status_name(want));
  }
}

// EXPECT_END ends s's capture: with want CUDA_SUCCESS a graph comes
// back (and is destroyed), else a NULL graph.
#define EXPECT_END(s, want) expect_end(__LINE__, (s), (want))

static void expect_end(int line, CUstream s, CUresult want) {
  CUgraph g = (CUgraph)(uintptr_t)0x1;  // a value the call must overwrite
  CUresult r = cuStreamEndCapture(s, &g);
  expect(line, "cuStreamEndCapture", r, want);
  if (r == CUDA_SUCCESS) {
    if (g == NULL || g == (CUgraph)(uintptr_t)0x1) {
      fail(line, "cuStreamEndCapture succeeded without a graph");
    } else {
      MUST(cuGraphDestroy(g));
    }
  } else if (want == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && r == want && g != NULL) {
    fail(line, "cuStreamEndCapture of an invalidated capture returned a graph, want NULL");
  }
}

// set_mode sets the calling thread's capture interaction mode.
static void set_mode(CUstreamCaptureMode m) { MUST(cuThreadExchangeStreamCaptureMode(&m)); }

static CUstream make_stream(unsigned flags) {
  CUstream s;
  MUST(cuStreamCreate(&s, flags));
  return s;
}

static CUdeviceptr dev_alloc(size_t n) {
  CUdeviceptr p;
  MUST(cuMemAlloc(&p, n));
  MUST(cuMemsetD8(p, 0, n));
  return p;
}

static uint32_t read_word(CUdeviceptr p) {
  uint32_t v;
  MUST(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}

// ---- threads ------------------------------------------------------------------

// A capture begun and ended on a thread of its own, with the calling
// thread in between: begin, then run, then end.
struct other {
  pthread_t t;
  CUstream s;
  CUstreamCaptureMode mode;
  pthread_barrier_t began, done;
  CUresult begin_r, end_r;
  CUgraph g;
};

static void* other_main(void* p) {
  struct other* o = p;
  MUST(cuCtxSetCurrent(ctx0));
  o->begin_r = cuStreamBeginCapture(o->s, o->mode);
  pthread_barrier_wait(&o->began);
  pthread_barrier_wait(&o->done);
  o->g = NULL;
  o->end_r = cuStreamEndCapture(o->s, &o->g);
  return NULL;
}

static void other_begin(struct other* o, CUstream s, CUstreamCaptureMode mode) {
  memset(o, 0, sizeof *o);
  o->s = s;
  o->mode = mode;
  pthread_barrier_init(&o->began, NULL, 2);
  pthread_barrier_init(&o->done, NULL, 2);
  if (pthread_create(&o->t, NULL, other_main, o) != 0) {
    printf("FAIL %s: pthread_create\n", current);
    exit(1);
  }
  pthread_barrier_wait(&o->began);
}

static CUresult other_end(struct other* o) {
  pthread_barrier_wait(&o->done);
  pthread_join(o->t, NULL);
  pthread_barrier_destroy(&o->began);
  pthread_barrier_destroy(&o->done);
  if (o->g != NULL) MUST(cuGraphDestroy(o->g));
  return o->end_r;
}

// on_thread runs f(arg) on a new thread with device 0's context current.
struct on_thread_arg {
  void (*f)(void*);
  void* arg;
};

static void* on_thread_main(void* p) {
  struct on_thread_arg* a = p;
  MUST(cuCtxSetCurrent(ctx0));
  a->f(a->arg);
  return NULL;
}

static void on_thread(void (*f)(void*), void* arg) {
  struct on_thread_arg a = {f, arg};
  pthread_t t;
  if (pthread_create(&t, NULL, on_thread_main, &a) != 0) {
    printf("FAIL %s: pthread_create\n", current);
    exit(1);
  }
  pthread_join(t, NULL);
}

// ---- the potentially unsafe calls ----------------------------------------------

// An unsafe call: prep runs before the capture, call during it, undo
// after it with call's result.
struct op_state {
  CUdeviceptr p, q;
  void* h;
  CUipcMemHandle ipc;
  CUmodule m;
};

struct unsafe_op {
  const char* name;
  void (*prep)(struct op_state*);
  CUresult (*call)(struct op_state*);
  void (*undo)(struct op_state*, CUresult);
};

static void prep_none(struct op_state* st) { (void)st; }
static void prep_dev(struct op_state* st) { st->p = dev_alloc(64); }
static void prep_host(struct op_state* st) { MUST(cuMemHostAlloc(&st->h, 64, 0)); }
static void prep_ipc(struct op_state* st) {
  prep_dev(st);
  MUST(cuIpcGetMemHandle(&st->ipc, st->p));
}

static void undo_none(struct op_state* st, CUresult r) {
  (void)st;
  (void)r;
}
static void undo_dev(struct op_state* st, CUresult r) {
  (void)r;
  MUST(cuMemFree(st->p));
}
static void undo_alloc(struct op_state* st, CUresult r) {
  if (r == CUDA_SUCCESS) MUST(cuMemFree(st->p));
}
static void undo_free(struct op_state* st, CUresult r) {
  if (r != CUDA_SUCCESS) MUST(cuMemFree(st->p));
}
static void undo_host_alloc(struct op_state* st, CUresult r) {
  if (r == CUDA_SUCCESS) MUST(cuMemFreeHost(st->h));
}
static void undo_host_free(struct op_state* st, CUresult r) {
  if (r != CUDA_SUCCESS) MUST(cuMemFreeHost(st->h));
}
static void undo_ipc(struct op_state* st, CUresult r) {
  if (r == CUDA_SUCCESS) MUST(cuIpcCloseMemHandle(st->q));
  MUST(cuMemFree(st->p));
}
static void undo_module(struct op_state* st, CUresult r) {
  if (r == CUDA_SUCCESS) MUST(cuModuleUnload(st->m));
}

static CUresult call_alloc(struct op_state* st) { return cuMemAlloc(&st->p, 64); }
static CUresult call_free(struct op_state* st) { return cuMemFree(st->p); }
static CUresult call_host_alloc(struct op_state* st) { return cuMemHostAlloc(&st->h, 64, 0); }
static CUresult call_alloc_host(struct op_state* st) { return cuMemAllocHost(&st->h, 64); }
static CUresult call_free_host(struct op_state* st) { return cuMemFreeHost(st->h); }
static CUresult call_htod(struct op_state* st) {
  static const uint32_t v = 7;
  return cuMemcpyHtoD(st->p, &v, sizeof v);
}
static CUresult call_dtoh(struct op_state* st) {
  uint32_t v;
  return cuMemcpyDtoH(&v, st->p, sizeof v);
}
static CUresult call_memset(struct op_state* st) { return cuMemsetD8(st->p, 1, 64); }
static CUresult call_ctx_sync(struct op_state* st) {
  (void)st;
  return cuCtxSynchronize();
}
// A handle this process exported: the fake refuses to open it
// (CUDA_ERROR_INVALID_CONTEXT) when capture does not refuse first.
static CUresult call_ipc_open(struct op_state* st) {
  return cuIpcOpenMemHandle(&st->q, st->ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
}
// An address no handle was opened at: CUDA_ERROR_INVALID_VALUE when
// capture does not refuse first.
static CUresult call_ipc_close(struct op_state* st) { return cuIpcCloseMemHandle(st->p); }
static CUresult call_module(struct op_state* st) { return cuModuleLoadData(&st->m, "fake image"); }

static const struct unsafe_op unsafe_ops[] = {
    {"cuMemAlloc", prep_none, call_alloc, undo_alloc},
    {"cuMemFree", prep_dev, call_free, undo_free},
    {"cuMemHostAlloc", prep_none, call_host_alloc, undo_host_alloc},
    {"cuMemAllocHost", prep_none, call_alloc_host, undo_host_alloc},
    {"cuMemFreeHost", prep_host, call_free_host, undo_host_free},
    {"cuMemcpyHtoD", prep_dev, call_htod, undo_dev},
    {"cuMemcpyDtoH", prep_dev, call_dtoh, undo_dev},
    {"cuMemsetD8", prep_dev, call_memset, undo_dev},
    {"cuCtxSynchronize", prep_none, call_ctx_sync, undo_none},
    {"cuIpcOpenMemHandle", prep_ipc, call_ipc_open, undo_ipc},
    {"cuIpcCloseMemHandle", prep_dev, call_ipc_close, undo_dev},
    {"cuModuleLoadData", prep_none, call_module, undo_module},
};
enum { NUM_OPS = sizeof unsafe_ops / sizeof unsafe_ops[0] };

// baseline[i] is what unsafe_ops[i] answers with no capture on.
static CUresult baseline[NUM_OPS];

static int capture_error(CUresult r) {
  return r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
         r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || r == CUDA_ERROR_CAPTURED_EVENT;
}

static void measure_baselines(void) {
  for (int i = 0; i < NUM_OPS; i++) {
    struct op_state st = {0};
    unsafe_ops[i].prep(&st);
    baseline[i] = unsafe_ops[i].call(&st);
    unsafe_ops[i].undo(&st, baseline[i]);
    if (capture_error(baseline[i])) {
      char g[64];
      describe(baseline[i], g, sizeof g);
      fail(__LINE__, "%s with no capture on: %s", unsafe_ops[i].name, g);
    }
  }
}

// An unsafe-call scenario: a capture in cap_mode begun by this thread or
// another, the calling thread in thread_mode; refused: CUDA prohibits the
// call.
struct scenario {
  const char* name;
  int other;
  CUstreamCaptureMode cap_mode, thread_mode;
  int refused;
};

static void run_scenario(const struct scenario* sc) {
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);  // no legacy-stream conflict
  for (int i = 0; i < NUM_OPS; i++) {
    const struct unsafe_op* op = &unsafe_ops[i];
    struct op_state st = {0};
    op->prep(&st);
    struct other o = {0};
    if (sc->other) {
      other_begin(&o, s, sc->cap_mode);
      EXPECT(o.begin_r, CUDA_SUCCESS);
    } else {
      MUST(cuStreamBeginCapture(s, sc->cap_mode));
    }
    set_mode(sc->thread_mode);
    CUresult r = op->call(&st);
    set_mode(GLOBAL);
    CUresult want = sc->refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : baseline[i];
    if (r != want) {
      char g[64], w[64];
      describe(r, g, sizeof g);
      describe(want, w, sizeof w);
      fail(__LINE__, "%s = %s, want %s", op->name, g, w);
    }
    EXPECT_STATUS(s, sc->refused ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUresult want_end = sc->refused ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    if (sc->other) {
      CUresult end = other_end(&o);
      if (end != want_end) {
        char g[64], w[64];
        describe(end, g, sizeof g);
        describe(want_end, w, sizeof w);
        fail(__LINE__, "after %s: cuStreamEndCapture on the capturing thread = %s, want %s", op->name, g, w);
      }
    } else {
      EXPECT_END(s, want_end);
    }
    op->undo(&st, r);
  }
  MUST(cuStreamDestroy(s));
}

static const struct scenario scenarios[] = {
    // The calling thread's own capture.
    {"unsafe-own-global-thread-global", 0, GLOBAL, GLOBAL, 1},
    {"unsafe-own-threadlocal-thread-global", 0, THREAD_LOCAL, GLOBAL, 1},
    {"unsafe-own-global-thread-threadlocal", 0, GLOBAL, THREAD_LOCAL, 1},
    {"unsafe-own-threadlocal-thread-threadlocal", 0, THREAD_LOCAL, THREAD_LOCAL, 1},
    {"unsafe-own-global-thread-relaxed", 0, GLOBAL, RELAXED, 0},
    {"unsafe-own-relaxed-thread-global", 0, RELAXED, GLOBAL, 0},
    // Another thread's capture: only a GLOBAL one, and only to a thread
    // in GLOBAL mode.
    {"unsafe-other-global-thread-global", 1, GLOBAL, GLOBAL, 1},
    {"unsafe-other-global-thread-threadlocal", 1, GLOBAL, THREAD_LOCAL, 0},
    {"unsafe-other-global-thread-relaxed", 1, GLOBAL, RELAXED, 0},
    {"unsafe-other-threadlocal-thread-global", 1, THREAD_LOCAL, GLOBAL, 0},
    {"unsafe-other-relaxed-thread-global", 1, RELAXED, GLOBAL, 0},
};

// ---- legacy-stream work ---------------------------------------------------------

// Work on the legacy stream (or synchronising it) while another stream of
// the device captures.
struct legacy_op {
  const char* name;
  CUresult (*call)(CUdeviceptr p, CUevent e);
};

static uint32_t host_word = 3;

static CUresult legacy_memset(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemsetD8(p, 2, 4);
}
static CUresult legacy_htod(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemcpyHtoD(p, &host_word, 4);
}
static CUresult legacy_dtoh(CUdeviceptr p, CUevent e) {
  (void)e;
  uint32_t v;
  return cuMemcpyDtoH(&v, p, 4);
}
static CUresult legacy_memset_async(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemsetD8Async(p, 2, 4, NULL);
}
static CUresult legacy_memset32_async(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemsetD32Async(p, 2, 1, CU_STREAM_LEGACY);
}
static CUresult legacy_htod_async(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemcpyHtoDAsync(p, &host_word, 4, NULL);
}
static CUresult legacy_dtod_async(CUdeviceptr p, CUevent e) {
  (void)e;
  return cuMemcpyAsync(p + 8, p, 4, NULL);
}
static CUresult legacy_record(CUdeviceptr p, CUevent e) {
  (void)p;
  return cuEventRecord(e, NULL);
}
static CUresult legacy_sync(CUdeviceptr p, CUevent e) {
  (void)p;
  (void)e;
  return cuStreamSynchronize(NULL);
}
static CUresult legacy_query(CUdeviceptr p, CUevent e) {
  (void)p;
  (void)e;
  return cuStreamQuery(CU_STREAM_LEGACY);
}
static CUresult legacy_ctx_sync(CUdeviceptr p, CUevent e) {
  (void)p;
  (void)e;
  return cuCtxSynchronize();
}

static const struct legacy_op legacy_ops[] = {
    {"cuMemsetD8", legacy_memset},
    {"cuMemcpyHtoD", legacy_htod},
    {"cuMemcpyDtoH", legacy_dtoh},
    {"cuMemsetD8Async(NULL)", legacy_memset_async},
    {"cuMemsetD32Async(CU_STREAM_LEGACY)", legacy_memset32_async},
    {"cuMemcpyHtoDAsync(NULL)", legacy_htod_async},
    {"cuMemcpyAsync(NULL)", legacy_dtod_async},
    {"cuEventRecord(NULL)", legacy_record},
    {"cuStreamSynchronize(NULL)", legacy_sync},
    {"cuStreamQuery(CU_STREAM_LEGACY)", legacy_query},
    {"cuCtxSynchronize", legacy_ctx_sync},
};
enum { NUM_LEGACY = sizeof legacy_ops / sizeof legacy_ops[0] };

// run_legacy runs each legacy-stream op while a stream created with
// flags on device dev captures in relaxed mode, the thread in relaxed
// mode too (which does not lift the implicit dependency); conflict: the
// op must fail with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidate
// the capture.
static void run_legacy(unsigned flags, CUcontext dev, int conflict) {
  CUdeviceptr p = dev_alloc(16);
  CUevent e;
  MUST(cuEventCreate(&e, 0));
  MUST(cuCtxPushCurrent(dev));
  CUstream s = make_stream(flags);
  MUST(cuCtxPopCurrent(NULL));
  for (int i = 0; i < NUM_LEGACY; i++) {
    MUST(cuStreamBeginCapture(s, RELAXED));
    set_mode(RELAXED);
    CUresult r = legacy_ops[i].call(p, e);
    set_mode(GLOBAL);
    CUresult want = conflict ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
    if (r != want) {
      char g[64], w[64];
      describe(r, g, sizeof g);
      describe(want, w, sizeof w);
      fail(__LINE__, "%s = %s, want %s", legacy_ops[i].name, g, w);
    }
    EXPECT_STATUS(s, conflict ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_END(s, conflict ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
  }
  MUST(cuStreamSynchronize(NULL));
  MUST(cuStreamDestroy(s));
  MUST(cuEventDestroy(e));
  MUST(cuMemFree(p));
}

// ---- the checks ----------------------------------------------------------------

static void check_begin_legacy(void) {
  EXPECT(cuStreamBeginCapture(NULL, GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT(cuStreamBeginCapture(CU_STREAM_LEGACY, RELAXED), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

static void check_begin_twice(void) {
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
  MUST(cuStreamBeginCapture(s, GLOBAL));
  EXPECT(cuStreamBeginCapture(s, RELAXED), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_END(s, CUDA_SUCCESS);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_NONE);
  MUST(cuStreamDestroy(s));
}

static void check_status(void) {
  CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(0);
  EXPECT_STATUS(a, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_STATUS(NULL, CU_STREAM_CAPTURE_STATUS_NONE);
  MUST(cuStreamBeginCapture(a, THREAD_LOCAL));
  MUST(cuStreamBeginCapture(b, THREAD_LOCAL));
  EXPECT_STATUS(a, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE, st2 = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t ida = 0, idb = 0, id2 = 0;
  CUgraph g = NULL;
  const CUgraphNode* deps = (const CUgraphNode*)(uintptr_t)0x1;
  size_t ndeps = 99;
  EXPECT(cuStreamGetCaptureInfo(a, &st, &ida), CUDA_SUCCESS);
  EXPECT(cuStreamGetCaptureInfo(b, &st2, &idb), CUDA_SUCCESS);
  if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || st2 != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    fail(__LINE__, "cuStreamGetCaptureInfo status %s and %s, want ACTIVE", status_name(st), status_name(st2));
  }
  if (ida == 0 || idb == 0 || ida == idb) {
    fail(__LINE__, "capture ids %llu and %llu, want two different non-zero ids", (unsigned long long)ida,
         (unsigned long long)idb);
  }
  st = CU_STREAM_CAPTURE_STATUS_NONE;
  EXPECT(cuStreamGetCaptureInfo_v2(a, &st, &id2, &g, &deps, &ndeps), CUDA_SUCCESS);
  if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || id2 != ida || g == NULL || ndeps != 0) {
    fail(__LINE__, "cuStreamGetCaptureInfo_v2: status %s id %llu graph %p dependencies %zu, want ACTIVE %llu, a graph, 0",
         status_name(st), (unsigned long long)id2, (void*)g, ndeps, (unsigned long long)ida);
  }
  EXPECT(cuStreamIsCapturing(a, NULL), CUDA_ERROR_INVALID_VALUE);
  EXPECT_END(a, CUDA_SUCCESS);
  EXPECT_END(b, CUDA_SUCCESS);
  EXPECT_STATUS(a, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT(cuStreamGetCaptureInfo(a, &st, &id2), CUDA_SUCCESS);
  if (st != CU_STREAM_CAPTURE_STATUS_NONE) fail(__LINE__, "status %s after the end, want NONE", status_name(st));
  EXPECT(cuStreamEndCapture(a, &g), CUDA_ERROR_INVALID_VALUE);
  MUST(cuStreamDestroy(a));
  MUST(cuStreamDestroy(b));
}

static void exchange_on_new_thread(void* p) {
  CUstreamCaptureMode* m = p;
  CUresult r = cuThreadExchangeStreamCaptureMode(m);
  if (r != CUDA_SUCCESS) *m = (CUstreamCaptureMode)99;
}

static void check_thread_mode(void) {
  CUstreamCaptureMode m = RELAXED;
  EXPECT(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  if (m != GLOBAL) fail(__LINE__, "the first exchange gave mode %d, want GLOBAL (the default)", (int)m);
  // Another thread's mode is its own: GLOBAL.
  CUstreamCaptureMode o = THREAD_LOCAL;
  on_thread(exchange_on_new_thread, &o);
  if (o != GLOBAL) fail(__LINE__, "a new thread's exchange gave mode %d, want GLOBAL", (int)o);
  m = THREAD_LOCAL;
  EXPECT(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  if (m != RELAXED) fail(__LINE__, "the exchange gave mode %d, want RELAXED (set before)", (int)m);
  m = (CUstreamCaptureMode)7;
  EXPECT(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
  EXPECT(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
  m = GLOBAL;
  EXPECT(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  if (m != THREAD_LOCAL) fail(__LINE__, "the exchange gave mode %d, want THREAD_LOCAL (set before)", (int)m);
}

// Work submitted to an invalidated capture fails; its end gives no graph,
// the captured work never runs, and the stream works again after it.
static void check_invalidated_work(void) {
  CUdeviceptr p = dev_alloc(16);
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
  CUevent e;
  MUST(cuEventCreate(&e, 0));
  MUST(cuStreamBeginCapture(s, GLOBAL));
  EXPECT(cuMemsetD32Async(p, 5, 1, s), CUDA_SUCCESS);
  CUdeviceptr q;
  EXPECT(cuMemAlloc(&q, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT(cuMemsetD32Async(p, 6, 1, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT(cuMemsetD8Async(p, 6, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT(cuMemcpyHtoDAsync(p, &host_word, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT(cuMemcpyAsync(p + 8, p, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  uint32_t v;
  EXPECT(cuMemcpyDtoHAsync(&v, p, 4, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT(cuEventRecord(e, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_END(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_NONE);
  if (read_word(p) != 0) fail(__LINE__, "work captured before the invalidation ran: word %u, want 0", read_word(p));
  EXPECT(cuMemsetD32Async(p, 9, 1, s), CUDA_SUCCESS);
  EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
  if (read_word(p) != 9) fail(__LINE__, "the stream's work after the capture: word %u, want 9", read_word(p));
  MUST(cuEventDestroy(e));
  MUST(cuStreamDestroy(s));
  MUST(cuMemFree(p));
}

// Synchronising with or querying a capturing stream invalidates it,
// whatever the modes.
static void check_sync_capturing(void) {
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
  static const struct {
    const char* name;
    CUresult (*f)(CUstream);
  } calls[] = {{"cuStreamSynchronize", cuStreamSynchronize}, {"cuStreamQuery", cuStreamQuery}};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    MUST(cuStreamBeginCapture(s, RELAXED));
    set_mode(RELAXED);
    CUresult r = calls[i].f(s);
    set_mode(GLOBAL);
    if (r != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
      char g[64];
      describe(r, g, sizeof g);
      fail(__LINE__, "%s of the capturing stream = %s, want CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", calls[i].name, g);
    }
    EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT_END(s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT(calls[i].f(s), CUDA_SUCCESS);
  }
  MUST(cuStreamDestroy(s));
}

// An event recorded in a capture cannot be waited for or queried, until
// recorded again outside one; the capture stays valid.
static void check_captured_event(void) {
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
  CUevent e;
  MUST(cuEventCreate(&e, 0));
  MUST(cuStreamBeginCapture(s, GLOBAL));
  EXPECT(cuEventRecord(e, s), CUDA_SUCCESS);
  EXPECT(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_END(s, CUDA_SUCCESS);
  EXPECT(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT(cuEventRecord(e, s), CUDA_SUCCESS);
  EXPECT(cuEventSynchronize(e), CUDA_SUCCESS);
  EXPECT(cuEventQuery(e), CUDA_SUCCESS);
  MUST(cuEventDestroy(e));
  MUST(cuStreamDestroy(s));
}

static void check_implicit_blocking(void) { run_legacy(0, ctx0, 1); }
static void check_implicit_nonblocking(void) { run_legacy(CU_STREAM_NON_BLOCKING, ctx0, 0); }
static void check_implicit_other_device(void) { run_legacy(0, ctx1, 0); }

// Asking the legacy stream for its capture status while a blocking stream
// captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, the capture stays valid.
static void check_implicit_query(void) {
  CUstream s = make_stream(0);
  MUST(cuStreamBeginCapture(s, RELAXED));
  CUstreamCaptureStatus st;
  cuuint64_t id;
  CUgraph g;
  EXPECT(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT(cuStreamGetCaptureInfo(NULL, &st, &id), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT(cuStreamGetCaptureInfo_v2(NULL, &st, &id, &g, NULL, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_END(s, CUDA_SUCCESS);
  EXPECT_STATUS(NULL, CU_STREAM_CAPTURE_STATUS_NONE);
  MUST(cuStreamDestroy(s));
}

// An end of a capture on another thread: the stream and the result.
struct end_call {
  CUstream s;
  CUresult r;
};

static void end_on_new_thread(void* p) {
  struct end_call* c = p;
  CUgraph g = NULL;
  c->r = cuStreamEndCapture(c->s, &g);
  if (c->r == CUDA_SUCCESS) MUST(cuGraphDestroy(g));
}

// A capture not begun in relaxed mode ends on its own thread.
static void check_end_thread(void) {
  static const struct {
    CUstreamCaptureMode mode;
    CUresult want;
  } cases[] = {
      {GLOBAL, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD},
      {THREAD_LOCAL, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD},
      {RELAXED, CUDA_SUCCESS},
  };
  CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    MUST(cuStreamBeginCapture(s, cases[i].mode));
    struct end_call c = {s, (CUresult)-1};
    on_thread(end_on_new_thread, &c);
    if (c.r != cases[i].want) {
      char g[64], w[64];
      describe(c.r, g, sizeof g);
      describe(cases[i].want, w, sizeof w);
      fail(__LINE__, "mode %d: cuStreamEndCapture on another thread = %s, want %s", (int)cases[i].mode, g, w);
    }
    if (cases[i].want != CUDA_SUCCESS) {
      EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_ACTIVE);
      EXPECT_END(s, CUDA_SUCCESS);
    }
    EXPECT_STATUS(s, CU_STREAM_CAPTURE_STATUS_NONE);
  }
  MUST(cuStreamDestroy(s));
}

// A capture records its stream's work without running it, and each
// launch of the instantiated graph runs it in order, reading host memory
// at the launch; in relaxed mode (gpu/cuda's own capture) an unsafe call
// meanwhile leaves it valid.
static void check_replay(void) {
  static const CUstreamCaptureMode modes[] = {GLOBAL, THREAD_LOCAL, RELAXED};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    CUdeviceptr p = dev_alloc(16);
    CUstream s = make_stream(i == 2 ? 0 : CU_STREAM_NON_BLOCKING);
    uint32_t src = 11;
    MUST(cuStreamBeginCapture(s, modes[i]));
    EXPECT(cuMemsetD32Async(p, 0xab, 2, s), CUDA_SUCCESS);
    EXPECT(cuMemcpyHtoDAsync(p, &src, 4, s), CUDA_SUCCESS);
    if (modes[i] == RELAXED) {
      CUdeviceptr q;
      EXPECT(cuMemAlloc(&q, 64), CUDA_SUCCESS);
      EXPECT(cuMemFree(q), CUDA_SUCCESS);
    }
    CUgraph g = NULL;
    EXPECT(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    if (g == NULL) {
      fail(__LINE__, "mode %d: no graph", (int)modes[i]);
      continue;
    }
    if (read_word(p) != 0) fail(__LINE__, "mode %d: captured work ran at the capture", (int)modes[i]);
    CUgraphExec x;
    MUST(cuGraphInstantiateWithFlags(&x, g, 0));
    for (uint32_t launch = 0; launch < 2; launch++) {
      src = 20 + launch;
      EXPECT(cuGraphLaunch(x, s), CUDA_SUCCESS);
      EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
      if (read_word(p) != src || read_word(p + 4) != 0xab) {
        fail(__LINE__, "mode %d launch %u: words %u %u, want %u %u", (int)modes[i], launch, read_word(p),
             read_word(p + 4), src, 0xab);
      }
    }
    MUST(cuGraphExecDestroy(x));
    MUST(cuGraphDestroy(g));
    MUST(cuStreamDestroy(s));
    MUST(cuMemFree(p));
  }
}

static const struct {
  const char* name;
  void (*run)(void);
} checks[] = {
    {"begin-legacy", check_begin_legacy},
    {"begin-twice", check_begin_twice},
    {"status", check_status},
    {"thread-mode", check_thread_mode},
    {"invalidated-work", check_invalidated_work},
    {"sync-capturing", check_sync_capturing},
    {"captured-event", check_captured_event},
    {"implicit-blocking", check_implicit_blocking},
    {"implicit-nonblocking", check_implicit_nonblocking},
    {"implicit-other-device", check_implicit_other_device},
    {"implicit-query", check_implicit_query},
    {"end-thread", check_end_thread},
    {"replay", check_replay},
};

// on_alarm ends a check that hung, naming it (write is safe in a signal
// handler, printf is not).
static void on_alarm(int sig) {
  (void)sig;
  static const char head[] = "FAIL ", tail[] = ": timed out (a wait of the fake never ended)\n";
  const char* name = current == NULL ? "setup" : current;
  size_t n = 0;
  while (name[n] != 0) n++;
  if (write(1, head, sizeof head - 1) < 0 || write(1, name, n) < 0 || write(1, tail, sizeof tail - 1) < 0) _exit(3);
  _exit(2);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, on_alarm);
  // Two devices: the legacy stream of one has no dependency on the other's
  // captures. Set before the first call (the fake reads it at each call).
  setenv("MSCCLGO_FAKECUDA_DEVICES", "2", 1);
  MUST(cuInit(0));
  CUdevice d0, d1;
  MUST(cuDeviceGet(&d0, 0));
  MUST(cuDeviceGet(&d1, 1));
  MUST(cuDevicePrimaryCtxRetain(&ctx0, d0));
  MUST(cuDevicePrimaryCtxRetain(&ctx1, d1));
  MUST(cuCtxSetCurrent(ctx0));

  current = "baseline";
  measure_baselines();
  if (failed) return 1;

  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
    current = scenarios[i].name;
    failed = 0;
    alarm(CHECK_SECONDS);
    run_scenario(&scenarios[i]);
    if (!failed) printf("ok %s\n", current);
    any_failed |= failed;
  }
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    current = checks[i].name;
    failed = 0;
    alarm(CHECK_SECONDS);
    checks[i].run();
    if (!failed) printf("ok %s\n", current);
    any_failed |= failed;
  }
  alarm(0);
  return any_failed;
}
