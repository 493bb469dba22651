/*
 * copy: the reference of make device-check's bench step (scripts/device-check.sh):
 * the time of one device-to-device copy of BYTES bytes (cuMemcpyAsync on a
 * stream, then cuStreamSynchronize), best of ITERS after one warm-up, on
 * device 0, measured with the host's monotonic clock. An 8-rank allreduce of
 * S bytes on one device reads 8 S and writes 8 S bytes, as a copy of 8 S
 * bytes does, so the script compares the kernel against copy 8S.
 *
 *   copy BYTES [ITERS]    prints "copy BYTES MICROSECONDS"
 *
 * It loads libcuda.so.1 at run time (the driver of the machine, or the fake
 * driver of build/fakecuda), so it builds where no driver is installed.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*dev_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*setctx_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*stream_fn)(CUstream *, unsigned int);
typedef CUresult (*copy_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*sync_fn)(CUstream);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "copy: libcuda.so.1 has no %s\n", name);
    exit(1);
  }
  return p;
}

static void check(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "copy: %s failed: CUresult %d\n", call, (int)r);
    exit(1);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: copy BYTES [ITERS]\n");
    return 2;
  }
  char *end;
  unsigned long long bytes = strtoull(argv[1], &end, 10);
  if (*end != '\0' || bytes == 0) {
    fprintf(stderr, "copy: BYTES %s is not a positive number\n", argv[1]);
    return 2;
  }
  int iters = argc == 3 ? atoi(argv[2]) : 20;
  if (iters <= 0) {
    fprintf(stderr, "copy: ITERS %s is not a positive number\n", argv[2]);
    return 2;
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "copy: loading libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr a, b;
  CUstream s;
  check(((init_fn)sym(lib, "cuInit"))(0), "cuInit");
  check(((dev_fn)sym(lib, "cuDeviceGet"))(&dev, 0), "cuDeviceGet");
  check(((retain_fn)sym(lib, "cuDevicePrimaryCtxRetain"))(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(((setctx_fn)sym(lib, "cuCtxSetCurrent"))(ctx), "cuCtxSetCurrent");
  alloc_fn alloc = (alloc_fn)sym(lib, "cuMemAlloc_v2");
  check(alloc(&a, bytes), "cuMemAlloc (source)");
  check(alloc(&b, bytes), "cuMemAlloc (destination)");
  check(((stream_fn)sym(lib, "cuStreamCreate"))(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  copy_fn copy = (copy_fn)sym(lib, "cuMemcpyAsync");
  sync_fn sync = (sync_fn)sym(lib, "cuStreamSynchronize");
  check(copy(b, a, bytes, s), "cuMemcpyAsync");
  check(sync(s), "cuStreamSynchronize");
  double best = 1e30;
  for (int i = 0; i < iters; i++) {
    double t0 = now_us();
    check(copy(b, a, bytes, s), "cuMemcpyAsync");
    check(sync(s), "cuStreamSynchronize");
    double t = now_us() - t0;
    if (t < best) {
      best = t;
    }
  }
  printf("copy %llu %.1f\n", bytes, best);
  return 0;
}
