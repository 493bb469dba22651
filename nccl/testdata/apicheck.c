/*
 * apicheck drives the parts of the NCCL library's API that newer clients
 * use (api_test.go runs it): NCCL 2.28's collectives, the later
 * releases' calls, a nonblocking init, and the current device of a
 * program of the CUDA driver API alone. Like ncclcheck, it prints one
 * line "rank R: CALL -> CODE" per call, and "rank R: CALL error: MSG"
 * after a failure. Buffers are host memory: the fallback (the stub)
 * moves no data, and the calls that reach mscclgo are checked, not run.
 *
 *   apicheck colls N        N ranks as threads: alltoall, gather, scatter
 *   apicheck later          the functions of NCCL 2.24 to 2.29 added last
 *   apicheck nonblocking    two ranks made by one thread, blocking = 0
 *   apicheck nonblockfail   one rank of two, blocking = 0: its init fails
 *   apicheck nonblockabort  one rank of two, blocking = 0, aborted while
 *                           it waits for its peer
 *   apicheck ctxdevice D0 D1  two ranks as threads, each with a current
 *                           context on device Di (-1: none)
 *   apicheck device         nccl_device.h's host functions, on one rank
 */
#define _GNU_SOURCE
#include "mscclgo.h"
#include "nccl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COUNT 256

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  pthread_mutex_lock(&out_mu);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

/* report prints a call's result and, after a failure, the calling
 * thread's last error. */
static ncclResult_t report(int rank, const char *what, ncclResult_t r) {
  say("rank %d: %s -> %d", rank, what, (int)r);
  if (r != ncclSuccess && r != ncclInProgress) {
    say("rank %d: %s error: %s", rank, what, mscclgoGetLastError());
  }
  return r;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The current context's device of this thread, for cuCtxGetDevice: -1
 * when no context is current. */
static __thread int ctx_dev = -1;

/* cuCtxGetDevice stands in for the CUDA driver's (the program is linked
 * with -rdynamic, and defines no cudaGetDevice: a program of the driver
 * API alone). 201 is CUDA_ERROR_INVALID_CONTEXT. */
int cuCtxGetDevice(int *dev) {
  if (ctx_dev < 0) {
    return 201;
  }
  *dev = ctx_dev;
  return 0;
}

/* ------------------------------------------------------------------ */
/* colls: NCCL 2.28's collectives on N ranks as threads. */

struct rank_arg {
  int rank, n, dev;
  ncclUniqueId id;
};

static void *colls_main(void *p) {
  struct rank_arg *a = p;
  int r = a->rank, n = a->n;
  ncclComm_t comm = NULL;
  if (report(r, "ncclCommInitRank", ncclCommInitRank(&comm, n, a->id, r)) != ncclSuccess) {
    return NULL;
  }
  float *send = calloc((size_t)n * COUNT, sizeof *send);
  float *recv = calloc((size_t)n * COUNT, sizeof *recv);
  cudaStream_t stream = (cudaStream_t)(uintptr_t)(0x1000 + r);
  report(r, "ncclAlltoAll", ncclAlltoAll(send, recv, COUNT, ncclFloat, comm, stream));
  report(r, "ncclAlltoAll in-place", ncclAlltoAll(recv, recv, COUNT, ncclFloat, comm, stream));
  report(r, "ncclGather", ncclGather(send, recv, COUNT, ncclFloat, n - 1, comm, stream));
  /* In place: the root's input is its slice of the output. */
  report(r, "ncclGather in-place", ncclGather(recv + (size_t)(n - 1) * COUNT, recv, COUNT, ncclFloat, n - 1, comm, stream));
  report(r, "ncclScatter", ncclScatter(send, recv, COUNT, ncclInt32, 0, comm, stream));
  report(r, "ncclScatter in-place", ncclScatter(send, send, COUNT, ncclInt32, 0, comm, stream));
  report(r, "ncclGroupStart", ncclGroupStart());
  report(r, "ncclAlltoAll in a group", ncclAlltoAll(send, recv, COUNT, ncclBfloat16, comm, stream));
  report(r, "ncclGroupEnd", ncclGroupEnd());
  report(r, "ncclGather root out of range", ncclGather(send, recv, COUNT, ncclFloat, n, comm, stream));
  report(r, "ncclScatter data type 42", ncclScatter(send, recv, COUNT, (ncclDataType_t)42, 0, comm, stream));
  report(r, "ncclAlltoAll count too large", ncclAlltoAll(send, recv, (size_t)1 << 62, ncclFloat, comm, stream));
  report(r, "ncclCommDestroy", ncclCommDestroy(comm));
  report(r, "ncclAlltoAll after destroy", ncclAlltoAll(send, recv, COUNT, ncclFloat, comm, stream));
  free(send);
  free(recv);
  return NULL;
}

static int threads(int n, void *(*main_)(void *), const int *devs) {
  struct rank_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  ncclUniqueId id;
  if (args == NULL || ts == NULL || report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  for (int i = 0; i < n; i++) {
    args[i] = (struct rank_arg){.rank = i, .n = n, .dev = devs != NULL ? devs[i] : -1, .id = id};
    if (pthread_create(&ts[i], NULL, main_, &args[i]) != 0) {
      return 1;
    }
  }
  for (int i = 0; i < n; i++) {
    pthread_join(ts[i], NULL);
  }
  free(args);
  free(ts);
  return 0;
}

/* ------------------------------------------------------------------ */
/* later: the later releases' functions added last, on one rank. */

static int later(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  cudaStream_t stream = (cudaStream_t)(uintptr_t)0x3000;
  static char buf[4096];
  ncclWindow_t win = NULL;
  void *p = NULL;
  report(0, "ncclCommWindowRegister", ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_DEFAULT));
  report(0, "ncclWinGetUserPtr", ncclWinGetUserPtr(comm, win, &p));
  say("rank 0: user pointer is the buffer: %d", p == (void *)buf);
  p = NULL;
  report(0, "ncclGetLsaDevicePointer", ncclGetLsaDevicePointer(win, 32, 0, &p));
  say("rank 0: lsa pointer at window + %ld", p != NULL ? (long)((char *)p - buf) : -1L);
  p = NULL;
  report(0, "ncclGetPeerDevicePointer", ncclGetPeerDevicePointer(win, 48, 0, &p));
  say("rank 0: peer pointer at window + %ld", p != NULL ? (long)((char *)p - buf) : -1L);
  report(0, "ncclPutSignal", ncclPutSignal(buf, 16, ncclFloat, 0, win, 128, 1, 2, 0, comm, stream));
  char props[256] = {0};
  report(0, "ncclCommQueryProperties", ncclCommQueryProperties(comm, (ncclCommProperties_t *)(void *)props));
  report(0, "ncclCommRevoke flags 1", ncclCommRevoke(comm, 1));
  report(0, "ncclCommRevoke", ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  ncclUniqueId growID;
  ncclComm_t grown = (ncclComm_t)(uintptr_t)1;
  report(0, "ncclCommGetUniqueId", ncclCommGetUniqueId(comm, &growID));
  report(0, "ncclCommGrow", ncclCommGrow(comm, 2, &growID, -1, &grown, NULL));
  say("rank 0: grow gave %s", grown == NULL ? "NULL" : "a communicator");
  grown = (ncclComm_t)(uintptr_t)1;
  report(0, "ncclCommGrow new rank", ncclCommGrow(NULL, 2, &growID, 1, &grown, NULL));
  ncclResetDebugInit();
  say("rank 0: ncclResetDebugInit returned");
  report(0, "ncclCommWindowDeregister", ncclCommWindowDeregister(comm, win));
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}

/* ------------------------------------------------------------------ */
/* nonblocking: ranks 0 and 1 of one id made by this thread, blocking 0:
 * each init returns ncclInProgress at once (rank 1's has not begun when
 * rank 0's returns, so a blocking one would wait for it), then
 * ncclCommGetAsyncError gives ncclInProgress until both are done. */

static int poll_done(int rank, ncclComm_t comm, double limit, ncclResult_t *state) {
  double start = now_s();
  int polls = 0;
  do {
    if (ncclCommGetAsyncError(comm, state) != ncclSuccess) {
      return -1;
    }
    polls++;
    if (*state != ncclInProgress) {
      break;
    }
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
  } while (now_s() - start < limit);
  say("rank %d: polled %s", rank, polls > 1 ? "more than once" : "once");
  return polls;
}

static int nonblocking(void) {
  ncclUniqueId id;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comms[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    double t0 = now_s();
    report(r, "ncclCommInitRankConfig nonblocking", ncclCommInitRankConfig(&comms[r], 2, id, r, &config));
    say("rank %d: returned within 5 s: %d", r, now_s() - t0 < 5.0); /* a blocking one waits 20 s */
    say("rank %d: handle set: %d", r, comms[r] != NULL);
    if (r == 0) {
      ncclResult_t state = ncclSuccess;
      report(0, "ncclCommGetAsyncError while initialising", ncclCommGetAsyncError(comms[0], &state));
      say("rank 0: state while initialising %d", (int)state);
      int count = -1;
      report(0, "ncclCommCount while initialising", ncclCommCount(comms[0], &count));
      say("rank 0: count while initialising %d", count);
      int dev = -1;
      report(0, "ncclCommCuDevice while initialising", ncclCommCuDevice(comms[0], &dev));
      report(0, "ncclAllReduce while initialising",
             ncclAllReduce(&dev, &dev, 1, ncclInt32, ncclSum, comms[0], (cudaStream_t)(uintptr_t)0x1000));
    }
  }
  /* The config was the caller's only for the call: NCCL copies it. */
  memset(&config, 0xff, sizeof config);
  for (int r = 0; r < 2; r++) {
    ncclResult_t state = ncclInProgress;
    poll_done(r, comms[r], 60, &state);
    say("rank %d: state after the init %d", r, (int)state);
  }
  for (int r = 0; r < 2; r++) {
    int count = -1, user = -1;
    report(r, "ncclCommCount", ncclCommCount(comms[r], &count));
    report(r, "ncclCommUserRank", ncclCommUserRank(comms[r], &user));
    say("rank %d: count %d user rank %d", r, count, user);
  }
  for (int r = 0; r < 2; r++) {
    report(r, "ncclCommDestroy", ncclCommDestroy(comms[r]));
  }
  return 0;
}

/* nonblockfail: rank 0 of two, whose peer never comes: the init fails at
 * the set-up's timeout, in the background; the async error gives its
 * code, ncclGetLastError its reason, and the destroy succeeds once. */
static int nonblockfail(void) {
  ncclUniqueId id;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  report(0, "ncclCommInitRankConfig nonblocking", ncclCommInitRankConfig(&comm, 2, id, 0, &config));
  ncclResult_t state = ncclSuccess;
  poll_done(0, comm, 60, &state);
  say("rank 0: state after the init %d", (int)state);
  say("rank 0: last error: %s", ncclGetLastError(comm));
  report(0, "ncclAllReduce after the failed init",
         ncclAllReduce(&state, &state, 1, ncclInt32, ncclSum, comm, (cudaStream_t)(uintptr_t)0x1000));
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  report(0, "ncclCommDestroy again", ncclCommDestroy(comm));
  /* Bad arguments are refused at the call, not in the background. */
  ncclComm_t bad = NULL;
  report(0, "ncclCommInitRankConfig nonblocking rank 2 of 2", ncclCommInitRankConfig(&bad, 2, id, 2, &config));
  say("rank 0: bad init left the handle NULL: %d", bad == NULL);
  return 0;
}

/* nonblockabort: rank 0 of two, whose peer never comes, aborted while
 * its init waits: the abort ends the init at once, not at the set-up's
 * timeout, and succeeds once. */
static int nonblockabort(void) {
  ncclUniqueId id;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  report(0, "ncclCommInitRankConfig nonblocking", ncclCommInitRankConfig(&comm, 2, id, 0, &config));
  struct timespec ms = {0, 200000000};
  nanosleep(&ms, NULL);
  ncclResult_t state = ncclSuccess;
  report(0, "ncclCommGetAsyncError before the abort", ncclCommGetAsyncError(comm, &state));
  say("rank 0: state before the abort %d", (int)state);
  double t0 = now_s();
  report(0, "ncclCommAbort", ncclCommAbort(comm));
  say("rank 0: the abort took less than 10 s: %d", now_s() - t0 < 10.0);
  report(0, "ncclCommAbort again", ncclCommAbort(comm));
  return 0;
}

/* ------------------------------------------------------------------ */
/* ctxdevice: each rank's thread makes its context current on its
 * device (as cuCtxSetCurrent would), then initialises. */

static void *ctx_main(void *p) {
  struct rank_arg *a = p;
  ctx_dev = a->dev;
  ncclComm_t comm = NULL;
  if (report(a->rank, "ncclCommInitRank", ncclCommInitRank(&comm, a->n, a->id, a->rank)) != ncclSuccess) {
    return NULL;
  }
  int dev = -1;
  report(a->rank, "ncclCommCuDevice", ncclCommCuDevice(comm, &dev));
  say("rank %d: device %d", a->rank, dev);
  report(a->rank, "ncclCommDestroy", ncclCommDestroy(comm));
  return NULL;
}

/* ------------------------------------------------------------------ */
/* device: nccl_device.h's host functions, which nccl.h does not declare
 * (a program that calls them includes NVIDIA's nccl_device.h): declared
 * here with its team and multimem handle layouts. */

struct team {
  int nRanks, rank, stride;
};
struct multimem {
  void *mcBasePtr;
};
struct team ncclTeamWorld(ncclComm_t comm);
struct team ncclTeamLsa(ncclComm_t comm);
struct team ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, struct team team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, struct team team, int rank);
ncclResult_t ncclLsaBarrierCreateRequirement(struct team team, int nBarriers, void *outHandle, void *outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, struct team team, int nBarriers, void *outHandle, void *outReq);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, struct multimem mm, void **outPtr);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq);

static void say_team(const char *what, struct team t) { say("rank 0: %s %d:%d:%d", what, t.nRanks, t.rank, t.stride); }

static int device_api(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  say_team("world team", ncclTeamWorld(comm));
  say_team("lsa team", ncclTeamLsa(comm));
  say_team("rail team", ncclTeamRail(comm));
  struct team t = {4, 1, 2};
  say("rank 0: rank to world %d", ncclTeamRankToWorld(comm, t, 3));
  say("rank 0: rank to lsa %d", ncclTeamRankToLsa(comm, t, 3));
  char handle[64], req[256];
  report(0, "ncclLsaBarrierCreateRequirement", ncclLsaBarrierCreateRequirement(t, 5, handle, req));
  report(0, "ncclGinBarrierCreateRequirement", ncclGinBarrierCreateRequirement(comm, t, 6, handle, req));
  static char base[256];
  void *p = NULL;
  report(0, "ncclGetMultimemDevicePointer",
         ncclGetMultimemDevicePointer((ncclWindow_t)(void *)base, 16, (struct multimem){base}, &p));
  say("rank 0: multimem pointer at base + %ld", p != NULL ? (long)((char *)p - base) : -1L);
  say("rank 0: lla2a slots %d", ncclLLA2ACalcSlots(64, 8));
  report(0, "ncclLLA2ACreateRequirement", ncclLLA2ACreateRequirement(2, 3, handle, req));
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 3 && strcmp(argv[1], "colls") == 0) {
    return threads(atoi(argv[2]), colls_main, NULL);
  }
  if (argc == 2 && strcmp(argv[1], "later") == 0) {
    return later();
  }
  if (argc == 2 && strcmp(argv[1], "nonblocking") == 0) {
    return nonblocking();
  }
  if (argc == 2 && strcmp(argv[1], "nonblockfail") == 0) {
    return nonblockfail();
  }
  if (argc == 2 && strcmp(argv[1], "nonblockabort") == 0) {
    return nonblockabort();
  }
  if (argc == 2 && strcmp(argv[1], "device") == 0) {
    return device_api();
  }
  if (argc == 4 && strcmp(argv[1], "ctxdevice") == 0) {
    int devs[2] = {atoi(argv[2]), atoi(argv[3])};
    return threads(2, ctx_main, devs);
  }
  fprintf(stderr, "usage: apicheck colls N | later | nonblocking | nonblockfail | nonblockabort | ctxdevice D0 D1 | device\n");
  return 2;
}
