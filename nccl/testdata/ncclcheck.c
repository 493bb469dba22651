/*
 * ncclcheck: a program written against nccl.h the way nccl-tests and
 * frameworks use NCCL, linked against libnccl.so.2 (mscclgo's library in
 * the tests). It prints one line per call, "rank R: CALL -> CODE", and for
 * a failure the last error, "rank R: CALL error: TEXT"; the Go test reads
 * them (and the stub NCCL's log). Buffers are host memory standing in for
 * device pointers: nothing here reads or writes them.
 *
 *   ncclcheck threads N     N ranks as threads of this process (ncclCommInitAll)
 *   ncclcheck procs         one rank of a job: RANK, WORLD_SIZE, and the unique
 *                           id through the file NCCLCHECK_ID_FILE
 *   ncclcheck single        one rank alone (ncclGetUniqueId, ncclCommInitRank)
 *   ncclcheck afterdestroy  calls on a destroyed communicator
 *   ncclcheck badargs       invalid arguments
 *   ncclcheck mismatch      two threads that disagree on the rank count
 *   ncclcheck group N       N ranks made by one thread inside a group, as
 *                           nccl-tests does under mpirun; then as threads
 *   ncclcheck groupbad      the same with 2 ranks that disagree on the count
 *   ncclcheck data N        N ranks as threads run collectives on host memory
 *                           and check the results (MSCCLGO_NCCL_HOSTMEM=1)
 *   ncclcheck datamismatch  2 ranks as threads call allreduce with different
 *                           counts
 *   ncclcheck dataprocs     the data checks as one rank of a job of processes
 *                           (RANK, WORLD_SIZE, the unique id through
 *                           NCCLCHECK_ID_FILE), on device rank mod the CUDA
 *                           driver's device count (this program's stand-in
 *                           cudaSetDevice), buffers from cuMemAlloc
 *   ncclcheck hostprocs     the data checks of data N as one rank of a job of
 *                           processes (as procs), buffers in host memory
 *                           (MSCCLGO_NCCL_HOSTMEM=1)
 *   ncclcheck mixed N       N ranks as threads, even or odd ranks in place and
 *                           the others out of place in one call, each of the
 *                           three collectives, results checked
 *   ncclcheck mixedprocs    the same as one rank of a job of processes (as
 *                           procs); NCCLCHECK_DEVICE=cuda sets device rank mod
 *                           the driver's count (cuMemAlloc), =emu takes the
 *                           emulated-device build's shared memory, unset host
 *                           memory
 *   ncclcheck hosts CASE    one rank of a job of processes (as mixedprocs,
 *                           NCCLCHECK_DEVICE included) whose ranks below
 *                           WORLD_SIZE/2 are one host and the others another
 *                           (MSCCLGO_HOST): CASE steady, switch, mismatch or
 *                           abort (hosts_main)
 *   ncclcheck oop N         N ranks as threads, out-of-place calls of the
 *                           three collectives, results checked
 *   ncclcheck custom        one rank of a job of mscclgo.h communicators from
 *                           the launcher's environment (torchrun's variables),
 *                           with the plans of NCCLCHECK_PLANS; allreduces on
 *                           host memory (mscclgoExecuteHost) checked
 *   ncclcheck lost          as procs, but rank 1 exits at once without
 *                           ncclCommDestroy; rank 0 polls
 *                           ncclCommGetAsyncError, then aborts
 *   ncclcheck sweep N MIN MAX FACTOR  N ranks as threads run nccl-tests'
 *                           sweep (every data type, collective, size from
 *                           MIN to MAX bytes by FACTOR, out of place and in
 *                           place) and check every result
 *   ncclcheck bench N ITERS N ranks as threads time ncclAllReduce (128 B,
 *                           4 KiB) and ncclCommGetAsyncError, per call
 *   ncclcheck benchprocs ITERS  the same as one rank of a job of processes
 *                           (as procs)
 *   ncclcheck groupdata N   N ranks driven by one thread, as nccl-tests' -g N:
 *                           each round one group with an allreduce per rank,
 *                           results checked after the group ends
 *   ncclcheck capture N     N ranks as threads: an allreduce on a stream of
 *                           their own, then the same call captured into a
 *                           graph (global capture mode, as PyTorch's
 *                           default), replayed with new data, then again
 *                           outside the graph; every result checked
 *   ncclcheck capturefirst N  the same on blocking streams (created without
 *                           CU_STREAM_NON_BLOCKING), with no call before the
 *                           capture: the plan's set-up happens while the
 *                           stream captures
 *   ncclcheck later         one rank made by ncclCommInitRankScalable, then
 *                           every later release's function nccl.h declares
 *                           (windows, device communicators, signals, suspend,
 *                           shrink), and ncclCommInitRankScalable's bad
 *                           arguments
 *   ncclcheck scalable N K  N ranks as threads made by ncclCommInitRankScalable
 *                           from K unique ids (one per root, roots placed as
 *                           NCCL places them), then the calls of threads N
 *   ncclcheck scalableprocs as procs, made by ncclCommInitRankScalable from
 *                           NCCLCHECK_IDS unique ids, each made by its root
 *                           process and handed over in NCCLCHECK_ID_FILE.I
 */
#define _GNU_SOURCE
#include "mscclgo.h"
#include "nccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOB_PROG "ncclcheck"
#include "jobid.h"

#define COUNT 1024

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static ncclResult_t report(int rank, const char *what, ncclResult_t r) {
  pthread_mutex_lock(&out_mu);
  printf("rank %d: %s -> %d\n", rank, what, (int)r);
  if (r != ncclSuccess && r != ncclInProgress) {
    printf("rank %d: %s error: %s\n", rank, what, ncclGetLastError(NULL));
  }
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
  return r;
}

/* calls runs every collective and point-to-point call once or more on
 * comm, as rank of n. */
static void calls(ncclComm_t comm, int rank, int n) {
  float *send = calloc((size_t)n * COUNT, sizeof *send);
  float *recv = calloc((size_t)n * COUNT, sizeof *recv);
  cudaStream_t stream = (cudaStream_t)(uintptr_t)(0x1000 + rank);
  int count = -1, user = -1, dev = -1;
  report(rank, "ncclCommCount", ncclCommCount(comm, &count));
  report(rank, "ncclCommUserRank", ncclCommUserRank(comm, &user));
  report(rank, "ncclCommCuDevice", ncclCommCuDevice(comm, &dev));
  pthread_mutex_lock(&out_mu);
  printf("rank %d: count %d user rank %d device %d\n", rank, count, user, dev);
  pthread_mutex_unlock(&out_mu);

  report(rank, "ncclAllReduce out-of-place", ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  report(rank, "ncclAllReduce in-place", ncclAllReduce(recv, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  report(rank, "ncclAllReduce float64", ncclAllReduce(recv, recv, COUNT, ncclFloat64, ncclSum, comm, stream));
  report(rank, "ncclAllReduce max", ncclAllReduce(recv, recv, COUNT, ncclFloat, ncclMax, comm, stream));
  report(rank, "ncclAllGather in-place", ncclAllGather(recv + (size_t)rank * COUNT, recv, COUNT, ncclFloat, comm, stream));
  report(rank, "ncclAllGather out-of-place", ncclAllGather(send, recv, COUNT, ncclFloat, comm, stream));
  report(rank, "ncclReduceScatter", ncclReduceScatter(send, recv, COUNT, ncclBfloat16, ncclSum, comm, stream));
  report(rank, "ncclBroadcast", ncclBroadcast(send, recv, COUNT, ncclInt32, 0, comm, stream));
  report(rank, "ncclBcast", ncclBcast(recv, COUNT, ncclInt32, 0, comm, stream));
  report(rank, "ncclReduce", ncclReduce(send, recv, COUNT, ncclFloat16, ncclSum, 0, comm, stream));
  report(rank, "ncclGroupStart", ncclGroupStart());
  report(rank, "ncclSend", ncclSend(send, COUNT, ncclFloat, (rank + 1) % n, comm, stream));
  report(rank, "ncclRecv", ncclRecv(recv, COUNT, ncclFloat, (rank + n - 1) % n, comm, stream));
  report(rank, "ncclGroupEnd", ncclGroupEnd());

  ncclRedOp_t op = ncclSum;
  float scalar = 0.5f;
  if (report(rank, "ncclRedOpCreatePreMulSum",
             ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm)) == ncclSuccess) {
    report(rank, "ncclAllReduce premulsum", ncclAllReduce(send, recv, COUNT, ncclFloat, op, comm, stream));
    report(rank, "ncclRedOpDestroy", ncclRedOpDestroy(op, comm));
  }
  void *handle = NULL;
  if (report(rank, "ncclCommRegister", ncclCommRegister(comm, send, COUNT * sizeof *send, &handle)) == ncclSuccess) {
    report(rank, "ncclCommDeregister", ncclCommDeregister(comm, handle));
  }
  ncclResult_t async = ncclInternalError;
  report(rank, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async));
  pthread_mutex_lock(&out_mu);
  printf("rank %d: async error %d\n", rank, (int)async);
  pthread_mutex_unlock(&out_mu);
  free(send);
  free(recv);
}

/* split splits comm in two colors (parity of the rank); the last rank of
 * more than two takes no color. */
static void split(ncclComm_t comm, int rank, int n) {
  int color = (n > 2 && rank == n - 1) ? NCCL_SPLIT_NOCOLOR : rank % 2;
  ncclComm_t sub = NULL;
  if (report(rank, "ncclCommSplit", ncclCommSplit(comm, color, rank, &sub, NULL)) != ncclSuccess) {
    return;
  }
  if (sub == NULL) {
    pthread_mutex_lock(&out_mu);
    printf("rank %d: split color %d: no communicator\n", rank, color);
    pthread_mutex_unlock(&out_mu);
    return;
  }
  int count = -1, user = -1;
  ncclCommCount(sub, &count);
  ncclCommUserRank(sub, &user);
  pthread_mutex_lock(&out_mu);
  printf("rank %d: split color %d: rank %d of %d\n", rank, color, user, count);
  pthread_mutex_unlock(&out_mu);
  report(rank, "ncclAllReduce on split", ncclAllReduce(&count, &count, 1, ncclInt32, ncclSum, sub, NULL));
  report(rank, "ncclCommDestroy split", ncclCommDestroy(sub));
}

static void finish(ncclComm_t comm, int rank) {
  report(rank, "ncclCommFinalize", ncclCommFinalize(comm));
  report(rank, "ncclCommDestroy", ncclCommDestroy(comm));
}

struct rank_arg {
  ncclComm_t comm;
  int rank, n;
};

static void *rank_main(void *p) {
  struct rank_arg *a = p;
  calls(a->comm, a->rank, a->n);
  split(a->comm, a->rank, a->n);
  finish(a->comm, a->rank);
  return NULL;
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  if (v == NULL) {
    fprintf(stderr, "ncclcheck: %s is not set\n", name);
    exit(2);
  }
  return atoi(v);
}

static int set_rank_device(int rank);
static int procs_device(int rank);
static void *data_main(void *p);

/* What procs does after the init (PROCS_SCALABLE: the init is
 * ncclCommInitRankScalable's, then the calls). */
enum { PROCS_CALLS, PROCS_LOSE, PROCS_DATA, PROCS_SCALABLE, PROCS_BENCH, PROCS_HOSTDATA, PROCS_MIXED, PROCS_SESSIONS, PROCS_HOSTS };
static void hosts_main(ncclComm_t comm, int rank, int n);
static void *bench_main(void *p);
static void *mixed_main(void *p);
static void *sessions_main(void *p);

/* root_of is the rank that makes unique id i of k for n ranks, where NCCL
 * puts its roots: the first rank of the i-th of k slices of the ranks,
 * the first n % k of them one rank longer. */
static int root_of(int i, int n, int k) { return i * (n / k) + (i < n % k ? i : n % k); }

/* scalable_ids makes this rank's unique id if it is a root, writing it to
 * file.I, and reads all k. */
static int scalable_ids(int rank, int n, int k, const char *file, ncclUniqueId *ids) {
  char path[4096];
  for (int i = 0; i < k; i++) {
    snprintf(path, sizeof path, "%s.%d", file, i);
    if (root_of(i, n, k) == rank) {
      char what[64];
      snprintf(what, sizeof what, "ncclGetUniqueId of root %d", i);
      if (report(rank, what, ncclGetUniqueId(&ids[i])) != ncclSuccess) {
        return 1;
      }
      if (put_id(path, &ids[i]) != 0) {
        return 2;
      }
    }
  }
  for (int i = 0; i < k; i++) {
    snprintf(path, sizeof path, "%s.%d", file, i);
    if (get_id(path, rank, &ids[i]) != 0) {
      return 2;
    }
  }
  return 0;
}

/* procs is one rank of a job; the unique id goes through a file, as a
 * framework sends it through its own channel. PROCS_LOSE: rank 1 dies
 * after the init and rank 0 waits for the loss to show. PROCS_DATA: the
 * rank sets its device first and runs the data checks. PROCS_SCALABLE:
 * NCCLCHECK_IDS unique ids, made by their roots, through the files
 * NCCLCHECK_ID_FILE.I. */
static int procs(int mode) {
  int rank = env_int("RANK"), n = env_int("WORLD_SIZE");
  int lose = mode == PROCS_LOSE;
  if (mode == PROCS_DATA && set_rank_device(rank) != 0) {
    fprintf(stderr, "ncclcheck: rank %d: no CUDA device to set (is a CUDA driver loaded?)\n", rank);
    return 2;
  }
  if ((mode == PROCS_MIXED || mode == PROCS_SESSIONS || mode == PROCS_HOSTS) && procs_device(rank) != 0) {
    return 2;
  }
  const char *file = getenv("NCCLCHECK_ID_FILE");
  if (file == NULL) {
    fprintf(stderr, "ncclcheck: NCCLCHECK_ID_FILE is not set\n");
    return 2;
  }
  ncclComm_t comm = NULL;
  if (mode == PROCS_SCALABLE) {
    int k = env_int("NCCLCHECK_IDS");
    if (k < 1 || k > n) {
      fprintf(stderr, "ncclcheck: NCCLCHECK_IDS=%d: want 1 to WORLD_SIZE (%d)\n", k, n);
      return 2;
    }
    ncclUniqueId *ids = calloc((size_t)k, sizeof *ids);
    int bad = scalable_ids(rank, n, k, file, ids);
    if (bad == 0 && report(rank, "ncclCommInitRankScalable", ncclCommInitRankScalable(&comm, n, rank, k, ids, NULL)) != ncclSuccess) {
      bad = 1;
    }
    free(ids);
    if (bad != 0) {
      return bad;
    }
  } else {
    ncclUniqueId id;
    if (rank == 0) {
      if (report(rank, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
        return 1;
      }
      if (put_id(file, &id) != 0) {
        return 2;
      }
    } else if (get_id(file, rank, &id) != 0) {
      return 2;
    }
    if (report(rank, "ncclCommInitRank", ncclCommInitRank(&comm, n, id, rank)) != ncclSuccess) {
      return 1;
    }
  }
  if (mode == PROCS_HOSTS) {
    hosts_main(comm, rank, n);
    return 0;
  }
  if (mode == PROCS_SESSIONS) {
    struct rank_arg a = {comm, rank, n};
    sessions_main(&a);
    return 0;
  }
  if (mode == PROCS_DATA || mode == PROCS_HOSTDATA || mode == PROCS_BENCH || mode == PROCS_MIXED) {
    struct rank_arg a = {comm, rank, n};
    (mode == PROCS_BENCH ? bench_main : mode == PROCS_MIXED ? mixed_main : data_main)(&a);
    return 0;
  }
  if (lose) {
    if (rank == 1) {
      _exit(0); /* no ncclCommDestroy: a crash, as the peers see it */
    }
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 3000 && async == ncclSuccess; i++) {
      if (report(rank, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async)) != ncclSuccess) {
        return 1;
      }
      usleep(10000);
    }
    printf("rank %d: async error %d: %s\n", rank, (int)async, ncclGetLastError(comm));
    report(rank, "ncclCommAbort", ncclCommAbort(comm));
    return 0;
  }
  calls(comm, rank, n);
  split(comm, rank, n);
  finish(comm, rank);
  return 0;
}

static int single(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int version = 0;
  report(0, "ncclGetVersion", ncclGetVersion(&version));
  printf("rank 0: version %d\n", version);
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  calls(comm, 0, 1);
  void *mem = NULL;
  if (report(0, "ncclMemAlloc", ncclMemAlloc(&mem, 4096)) == ncclSuccess) {
    report(0, "ncclMemFree", ncclMemFree(mem));
  }
  finish(comm, 0);
  return 0;
}

static int afterdestroy(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  int count = 0;
  report(0, "ncclCommCount after destroy", ncclCommCount(comm, &count));
  float x = 0;
  report(0, "ncclAllReduce after destroy", ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL));
  report(0, "ncclCommDestroy after destroy", ncclCommDestroy(comm));

  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  report(0, "ncclCommFinalize", ncclCommFinalize(comm));
  report(0, "ncclAllReduce after finalize", ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL));
  report(0, "ncclCommAbort", ncclCommAbort(comm));
  report(0, "ncclCommUserRank after abort", ncclCommUserRank(comm, &count));
  return 0;
}

static int badargs(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  report(0, "ncclGetUniqueId", ncclGetUniqueId(&id));
  report(0, "ncclCommInitRank rank 2 of 2", ncclCommInitRank(&comm, 2, id, 2));
  report(0, "ncclCommInitRank 0 ranks", ncclCommInitRank(&comm, 0, id, 0));
  ncclUniqueId foreign;
  memset(&foreign, 0x5a, sizeof foreign);
  report(0, "ncclCommInitRank foreign id", ncclCommInitRank(&comm, 1, foreign, 0));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  report(0, "ncclCommInitRankConfig bad config", ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  report(0, "ncclGroupEnd without start", ncclGroupEnd());
  int x = 0;
  report(0, "ncclCommCount of NULL", ncclCommCount(NULL, &x));
  report(0, "ncclCommInitAll 0", ncclCommInitAll(&comm, 0, NULL));
  printf("rank 0: error string %d: %s\n", (int)ncclInvalidUsage, ncclGetErrorString(ncclInvalidUsage));
  return 0;
}

struct mismatch_arg {
  ncclUniqueId id;
  int rank, n;
};

static void *mismatch_main(void *p) {
  struct mismatch_arg *a = p;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, a->n, a->id, a->rank);
  pthread_mutex_lock(&out_mu);
  printf("rank %d: ncclCommInitRank of %d ranks -> %d\n", a->rank, a->n, (int)r);
  pthread_mutex_unlock(&out_mu);
  if (r == ncclSuccess) {
    ncclCommDestroy(comm);
  }
  return NULL;
}

static int mismatch(void) {
  struct mismatch_arg args[2];
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&args[0].id)) != ncclSuccess) {
    return 1;
  }
  args[1].id = args[0].id;
  args[0].rank = 0;
  args[0].n = 2;
  args[1].rank = 1;
  args[1].n = 3;
  pthread_t ts[2];
  for (int i = 0; i < 2; i++) {
    pthread_create(&ts[i], NULL, mismatch_main, &args[i]);
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(ts[i], NULL);
  }
  printf("rank -1: last error: %s\n", ncclGetLastError(NULL));
  return 0;
}

/* group makes n ranks from one thread between ncclGroupStart and
 * ncclGroupEnd; with bad set, the last one says n + 1 ranks. */
static int group(int n, int bad) {
  ncclUniqueId id;
  if (report(-1, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  report(-1, "ncclGroupStart", ncclGroupStart());
  for (int r = 0; r < n; r++) {
    char what[64];
    snprintf(what, sizeof what, "ncclCommInitRank %d in a group", r);
    report(r, what, ncclCommInitRank(&comms[r], (bad && r == n - 1) ? n + 1 : n, id, r));
  }
  int count = 0;
  report(0, "ncclCommCount before ncclGroupEnd", ncclCommCount(comms[0], &count));
  ncclResult_t r = report(-1, "ncclGroupEnd", ncclGroupEnd());
  if (r != ncclSuccess) {
    report(0, "ncclCommCount after a failed group", ncclCommCount(comms[0], &count));
    free(comms);
    return 0;
  }
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  struct rank_arg *args = calloc((size_t)n, sizeof *args);
  for (int k = 0; k < n; k++) {
    args[k] = (struct rank_arg){comms[k], k, n};
    pthread_create(&ts[k], NULL, rank_main, &args[k]);
  }
  for (int k = 0; k < n; k++) {
    pthread_join(ts[k], NULL);
  }
  free(comms);
  free(ts);
  free(args);
  return 0;
}

/* value is element i of rank r's input in the data checks. */
static double value(int r, size_t i) { return (double)(r + 1) + (double)(i % 7); }

struct data_case {
  const char *name;
  int coll; /* 0 allreduce, 1 allgather, 2 reducescatter */
  ncclDataType_t dtype;
  size_t count;
  int inplace; /* 1 in place, 0 out of place; 2 (3): even (odd) ranks in place, the others out of place */
};

static const struct data_case data_cases[] = {
    {"allreduce float32 in-place", 0, ncclFloat32, 1024, 1},
    {"allreduce float32 out-of-place", 0, ncclFloat32, 1024, 0},
    {"allreduce int32 in-place", 0, ncclInt32, 4096, 1},
    {"allreduce float32 in-place large", 0, ncclFloat32, 65536, 1},
    {"allgather float32 in-place", 1, ncclFloat32, 1024, 1},
    {"reducescatter float32 in-place", 2, ncclFloat32, 1024, 1},
};

static double get(const void *b, ncclDataType_t dt, size_t i) {
  return dt == ncclInt32 ? (double)((const int32_t *)b)[i] : (double)((const float *)b)[i];
}

static void set(void *b, ncclDataType_t dt, size_t i, double v) {
  if (dt == ncclInt32) {
    ((int32_t *)b)[i] = (int32_t)v;
  } else {
    ((float *)b)[i] = (float)v;
  }
}

/* cuda_sync waits for device dev's legacy stream through the CUDA driver
 * API of the process (libcuda.so.1, loaded by a cuda-tagged build of the
 * library; the fake driver in tests): what cudaStreamSynchronize(NULL)
 * would do. 1 when there is no CUDA driver in the process. */
static int cuda_sync(int dev) {
  int (*retain)(void **, int) = NULL, (*push)(void *) = NULL, (*pop)(void **) = NULL, (*release)(int) = NULL;
  int (*sync)(void *) = NULL;
  *(void **)(&retain) = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
  *(void **)(&push) = dlsym(RTLD_DEFAULT, "cuCtxPushCurrent_v2");
  *(void **)(&pop) = dlsym(RTLD_DEFAULT, "cuCtxPopCurrent_v2");
  *(void **)(&release) = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRelease_v2");
  *(void **)(&sync) = dlsym(RTLD_DEFAULT, "cuStreamSynchronize");
  if (retain == NULL || push == NULL || pop == NULL || release == NULL || sync == NULL) {
    return 1;
  }
  void *ctx = NULL, *old = NULL;
  if (retain(&ctx, dev) != 0) {
    return -1;
  }
  int res = push(ctx) == 0 && sync(NULL) == 0 ? 0 : -1;
  pop(&old);
  release(dev);
  return res;
}

/* stream_sync waits for the work of comm's device's default stream: the
 * library's calls whose plan runs only enqueue it, as on a GPU, where this
 * is cudaStreamSynchronize. The emulated-device build has its own
 * symbol; a cuda-tagged build, the CUDA driver; the default build runs
 * nothing on a stream. */
static ncclResult_t stream_sync(ncclComm_t comm) {
  int dev = 0;
  ncclCommCuDevice(comm, &dev);
  int (*sync)(int, void *) = NULL;
  *(void **)(&sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
  if (sync != NULL) {
    return sync(dev, NULL) == 0 ? ncclSuccess : ncclSystemError;
  }
  return cuda_sync(dev) >= 0 ? ncclSuccess : ncclSystemError;
}

/* The CUDA driver API of the process (libcuda.so.1, loaded by a
 * cuda-tagged build of the library), found at run time: this program links
 * no CUDA library. */
struct cu_api {
  int (*count)(int *);
  int (*retain)(void **, int);
  int (*set)(void *);
  int (*alloc)(uintptr_t *, size_t);
  int (*free_)(uintptr_t);
};

static int cu_api_load(struct cu_api *a) {
  *(void **)(&a->count) = dlsym(RTLD_DEFAULT, "cuDeviceGetCount");
  *(void **)(&a->retain) = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
  *(void **)(&a->set) = dlsym(RTLD_DEFAULT, "cuCtxSetCurrent");
  *(void **)(&a->alloc) = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  *(void **)(&a->free_) = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
  return a->count != NULL && a->retain != NULL && a->set != NULL && a->alloc != NULL && a->free_ != NULL;
}

/* The device this process set (dataprocs), -1 before: a process-wide
 * stand-in for the CUDA runtime's current device, as PyTorch's ranks have
 * one device per process. */
static int current_dev = -1;

/* cudaSetDevice and cudaGetDevice stand in for the CUDA runtime's (the
 * program is linked with -rdynamic, so the library finds cudaGetDevice as
 * it finds the runtime's in PyTorch's processes): set makes the device's
 * primary context current, as the runtime does. */
int cudaSetDevice(int dev) {
  struct cu_api a;
  void *ctx = NULL;
  if (!cu_api_load(&a) || a.retain(&ctx, dev) != 0 || a.set(ctx) != 0) {
    return 1;
  }
  current_dev = dev;
  return 0;
}

int cudaGetDevice(int *dev) {
  *dev = current_dev < 0 ? 0 : current_dev;
  return 0;
}

/* set_rank_device sets device rank mod the driver's device count, as a
 * rank of a job does with cudaSetDevice. */
static int set_rank_device(int rank) {
  struct cu_api a;
  int count = 0;
  if (!cu_api_load(&a) || a.count(&count) != 0 || count < 1) {
    return 1;
  }
  return cudaSetDevice(rank % count);
}

/* The emulated device's stand-in for cuMemAlloc (mscclgoEmuMalloc of
 * the emulated-device build), set by procs_device: memory the peers in
 * other processes can map. */
static int (*emu_malloc)(uintptr_t *, size_t);

/* procs_device gives a rank of mixedprocs device buffers, as
 * NCCLCHECK_DEVICE says: "cuda" sets device rank mod the driver's count
 * (cuMemAlloc), "emu" takes the emulated-device build's shared memory;
 * unset, the buffers are host memory (MSCCLGO_NCCL_HOSTMEM runs). */
static int procs_device(int rank) {
  const char *dev = getenv("NCCLCHECK_DEVICE");
  if (dev == NULL || *dev == 0) {
    return 0;
  }
  if (strcmp(dev, "cuda") == 0) {
    if (set_rank_device(rank) != 0) {
      fprintf(stderr, "ncclcheck: rank %d: NCCLCHECK_DEVICE=cuda: no CUDA device to set (is a CUDA driver loaded?)\n", rank);
      return 1;
    }
    return 0;
  }
  if (strcmp(dev, "emu") == 0) {
    *(void **)(&emu_malloc) = dlsym(RTLD_DEFAULT, "mscclgoEmuMalloc");
    if (emu_malloc == NULL) {
      fprintf(stderr, "ncclcheck: rank %d: NCCLCHECK_DEVICE=emu: the library is not the emulated-device build (no mscclgoEmuMalloc)\n", rank);
      return 1;
    }
    return 0;
  }
  fprintf(stderr, "ncclcheck: NCCLCHECK_DEVICE=%s: want cuda or emu\n", dev);
  return 1;
}

/* data_alloc allocates a data case's buffers: device memory (cuMemAlloc
 * on the current device, host-addressable on the fake driver) once
 * cudaSetDevice has run, the emulated device's shared memory where
 * procs_device chose it, else host memory. */
static void *data_alloc(size_t bytes) {
  struct cu_api a;
  if (emu_malloc != NULL) {
    uintptr_t p = 0;
    return emu_malloc(&p, bytes) == 0 ? (void *)p : NULL;
  }
  if (current_dev < 0 || !cu_api_load(&a)) {
    return malloc(bytes);
  }
  uintptr_t p = 0;
  return a.alloc(&p, bytes) == 0 ? (void *)p : NULL;
}

/* data_free frees a data case's buffers: the next case's cuMemAlloc may
 * return the same address, a new allocation the library must register
 * with the peers anew. */
static void data_free(void *p) {
  struct cu_api a;
  if (emu_malloc != NULL) {
    /* Kept until the process ends: the emulated device names no
     * allocation (no CU_POINTER_ATTRIBUTE_BUFFER_ID), so peers in other
     * processes would take a new allocation at a freed one's address and
     * size for the one they mapped. */
    return;
  }
  if (current_dev < 0 || !cu_api_load(&a)) {
    free(p);
    return;
  }
  a.free_((uintptr_t)p);
}

/* data_case_run runs one case on rank r of n and checks its result. */
static void data_case_run(const struct data_case *c, ncclComm_t comm, int r, int n) {
  size_t in = c->coll == 2 ? c->count * (size_t)n : c->count;  /* input elements */
  size_t out = c->coll == 1 ? c->count * (size_t)n : c->count; /* output elements */
  size_t total = in > out ? in : out;
  char *mem = data_alloc(2 * total * 4);
  if (mem == NULL) {
    report(r, c->name, ncclSystemError);
    return;
  }
  memset(mem, 0, 2 * total * 4);
  void *outb = mem, *inb = mem + total * 4;
  int inplace = c->inplace < 2 ? c->inplace : r % 2 == c->inplace - 2;
  if (inplace) {
    /* NCCL's in-place: allgather's input is the rank's slice of its
     * output, reducescatter's output the rank's slice of its input. */
    inb = c->coll == 1 ? mem + (size_t)r * c->count * 4 : mem;
    outb = c->coll == 2 ? mem + (size_t)r * c->count * 4 : mem;
  }
  for (size_t i = 0; i < in; i++) {
    set(inb, c->dtype, i, value(r, i));
  }
  ncclResult_t res;
  switch (c->coll) {
  case 0:
    res = ncclAllReduce(inb, outb, c->count, c->dtype, ncclSum, comm, NULL);
    break;
  case 1:
    res = ncclAllGather(inb, outb, c->count, c->dtype, comm, NULL);
    break;
  default:
    res = ncclReduceScatter(inb, outb, c->count, c->dtype, ncclSum, comm, NULL);
    break;
  }
  if (res == ncclSuccess) {
    res = stream_sync(comm);
  }
  char what[128];
  snprintf(what, sizeof what, "%s count %zu", c->name, c->count);
  if (report(r, what, res) == ncclSuccess) {
    size_t bad = out;
    double got = 0, want = 0;
    for (size_t i = 0; i < out && bad == out; i++) {
      want = 0;
      if (c->coll == 1) {
        want = value((int)(i / c->count), i % c->count);
      } else {
        size_t at = c->coll == 2 ? (size_t)r * c->count + i : i;
        for (int q = 0; q < n; q++) {
          want += value(q, at);
        }
      }
      got = get(outb, c->dtype, i);
      if (got != want) {
        bad = i;
      }
    }
    pthread_mutex_lock(&out_mu);
    if (bad == out) {
      printf("rank %d: DATA %s ok\n", r, what);
    } else {
      printf("rank %d: DATA %s WRONG at %zu: got %g, want %g\n", r, what, bad, got, want);
    }
    pthread_mutex_unlock(&out_mu);
  }
  data_free(mem);
}

static void *data_main(void *p) {
  struct rank_arg *a = p;
  for (size_t k = 0; k < sizeof data_cases / sizeof data_cases[0]; k++) {
    data_case_run(&data_cases[k], a->comm, a->rank, a->n);
  }
  /* The same on the halves of a split by parity. */
  ncclComm_t sub = NULL;
  if (report(a->rank, "ncclCommSplit", ncclCommSplit(a->comm, a->rank % 2, a->rank, &sub, NULL)) == ncclSuccess) {
    int subRank = -1, subN = 0;
    ncclCommUserRank(sub, &subRank);
    ncclCommCount(sub, &subN);
    static const struct data_case split_case = {"split allreduce float32 in-place", 0, ncclFloat32, 2048, 1};
    if (subN > 1) {
      data_case_run(&split_case, sub, subRank, subN);
    }
    report(a->rank, "ncclCommDestroy split", ncclCommDestroy(sub));
  }
  finish(a->comm, a->rank);
  return NULL;
}

/* Placement is each rank's own in NCCL: the ranks of one call mix
 * in-place and out-of-place buffers (issue 31), each case twice (the
 * second call is a steady-state one). */
static const struct data_case mixed_cases[] = {
    {"mixed allreduce float32 even in-place", 0, ncclFloat32, 1024, 2},
    {"mixed allreduce float32 odd in-place", 0, ncclFloat32, 1024, 3},
    {"mixed allgather float32 even in-place", 1, ncclFloat32, 1024, 2},
    {"mixed allgather float32 odd in-place", 1, ncclFloat32, 1024, 3},
    {"mixed reducescatter float32 even in-place", 2, ncclFloat32, 1024, 2},
    {"mixed reducescatter float32 odd in-place", 2, ncclFloat32, 1024, 3},
};

static void *mixed_main(void *p) {
  struct rank_arg *a = p;
  for (int round = 0; round < 2; round++) {
    for (size_t k = 0; k < sizeof mixed_cases / sizeof mixed_cases[0]; k++) {
      data_case_run(&mixed_cases[k], a->comm, a->rank, a->n);
    }
  }
  finish(a->comm, a->rank);
  return NULL;
}

/* Out-of-place calls, each twice (TestDeviceInPlaceViaCopy: a plan set
 * with in-place plans only; reducescatter's runs on a staging buffer). */
static const struct data_case oop_cases[] = {
    {"oop allreduce float32", 0, ncclFloat32, 1024, 0},
    {"oop allgather float32", 1, ncclFloat32, 1024, 0},
    {"oop reducescatter float32", 2, ncclFloat32, 1024, 0},
};

static void *oop_main(void *p) {
  struct rank_arg *a = p;
  for (int round = 0; round < 2; round++) {
    for (size_t k = 0; k < sizeof oop_cases / sizeof oop_cases[0]; k++) {
      data_case_run(&oop_cases[k], a->comm, a->rank, a->n);
    }
  }
  finish(a->comm, a->rank);
  return NULL;
}

/* sessions_alloc returns bytes of the emulated device's shareable memory
 * (mscclgoEmuMalloc, which peers in other processes can map) where the
 * library has it, else data_alloc's. */
static void *sessions_alloc(size_t bytes) {
  int (*emu_malloc)(uintptr_t *, size_t) = NULL;
  *(void **)(&emu_malloc) = dlsym(RTLD_DEFAULT, "mscclgoEmuMalloc");
  if (emu_malloc == NULL) {
    return data_alloc(bytes);
  }
  uintptr_t p = 0;
  return emu_malloc(&p, bytes) == 0 ? (void *)p : NULL;
}

/* Ten sizes of float sum in-place allreduce, each a plan instance of its
 * own in a buffer of its own, round-robin twice (TestDeviceSessionsBounded:
 * with MSCCLGO_NCCL_MAX_SESSIONS=4 each call closes the least recently
 * called instance on every rank and opens its own again). Every value of
 * every call is checked. The buffers are kept (process memory). */
static void *sessions_main(void *p) {
  struct rank_arg *a = p;
  enum { SIZES = 10 };
  float *bufs[SIZES];
  for (int k = 0; k < SIZES; k++) {
    bufs[k] = sessions_alloc(256 * (size_t)(k + 1) * sizeof(float));
    if (bufs[k] == NULL) {
      report(a->rank, "sessions: allocating", ncclSystemError);
      return NULL;
    }
  }
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < SIZES; k++) {
      size_t count = 256 * (size_t)(k + 1);
      for (size_t i = 0; i < count; i++) {
        bufs[k][i] = (float)(a->rank + 1 + (int)(i % 7) + round);
      }
      char what[96];
      snprintf(what, sizeof what, "sessions allreduce float32 round %d count %zu", round, count);
      ncclResult_t res = ncclAllReduce(bufs[k], bufs[k], count, ncclFloat32, ncclSum, a->comm, NULL);
      if (res == ncclSuccess) {
        res = stream_sync(a->comm);
      }
      if (report(a->rank, what, res) != ncclSuccess) {
        continue;
      }
      size_t bad = count;
      float want = 0;
      for (size_t i = 0; i < count && bad == count; i++) {
        want = (float)(a->n * (a->n + 1) / 2 + a->n * ((int)(i % 7) + round));
        if (bufs[k][i] != want) {
          bad = i;
        }
      }
      pthread_mutex_lock(&out_mu);
      if (bad == count) {
        printf("rank %d: DATA %s ok\n", a->rank, what);
      } else {
        printf("rank %d: DATA %s WRONG at %zu: got %g, want %g\n", a->rank, what, bad, (double)bufs[k][bad], (double)want);
      }
      pthread_mutex_unlock(&out_mu);
    }
  }
  finish(a->comm, a->rank);
  return NULL;
}

/* The job of hosts: the ranks below n/2 are one host, the others
 * another (the test names them apart with MSCCLGO_HOST); hosts_case is
 * what they do. */
static const char *hosts_case = "";

/* hosts_fill sets call k's input of rank r; hosts_want is element i of
 * the sum over n ranks. */
static void hosts_fill(float *b, size_t count, int r, int k) {
  for (size_t i = 0; i < count; i++) {
    b[i] = (float)(value(r, i) + k);
  }
}

static double hosts_want(int n, size_t i, int k) {
  double w = 0;
  for (int q = 0; q < n; q++) {
    w += value(q, i) + k;
  }
  return w;
}

/* hosts_call makes call k of rank r: an in-place float sum allreduce of
 * count on b, waited for and checked. */
static void hosts_call(ncclComm_t comm, float *b, size_t count, int r, int n, int k, const char *what) {
  hosts_fill(b, count, r, k);
  ncclResult_t res = ncclAllReduce(b, b, count, ncclFloat32, ncclSum, comm, NULL);
  if (res == ncclSuccess) {
    res = stream_sync(comm);
  }
  ncclResult_t async = ncclSuccess;
  if (res == ncclSuccess) {
    res = ncclCommGetAsyncError(comm, &async);
  }
  if (res == ncclSuccess) {
    res = async;
  }
  char name[128];
  snprintf(name, sizeof name, "%s call %d count %zu", what, k, count);
  if (report(r, name, res) != ncclSuccess) {
    return;
  }
  size_t bad = count;
  for (size_t i = 0; i < count && bad == count; i++) {
    if (b[i] != (float)hosts_want(n, i, k)) {
      bad = i;
    }
  }
  pthread_mutex_lock(&out_mu);
  if (bad == count) {
    printf("rank %d: DATA %s ok\n", r, name);
  } else {
    printf("rank %d: DATA %s WRONG at %zu: got %g, want %g\n", r, name, bad, (double)b[bad], hosts_want(n, bad, k));
  }
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

/* hosts_marker is the file rank r creates once it has reached step
 * (next to the unique id's file). */
static void hosts_marker(char *path, size_t len, const char *step, int r) {
  snprintf(path, len, "%s.%s.%d", getenv("NCCLCHECK_ID_FILE"), step, r);
}

/* hosts_reached says that rank r reached step. */
static void hosts_reached(const char *step, int r) {
  char path[4096];
  hosts_marker(path, sizeof path, step, r);
  FILE *f = fopen(path, "w");
  if (f != NULL) {
    fclose(f);
  }
}

/* hosts_await waits (at most 60 s) until ranks from to to-1 reached
 * step, outside the library. */
static void hosts_await(const char *step, int from, int to, int r) {
  char path[4096];
  for (int q = from; q < to; q++) {
    hosts_marker(path, sizeof path, step, q);
    int i = 0;
    for (; i < 6000 && access(path, F_OK) != 0; i++) {
      usleep(10000);
    }
    if (i == 6000) {
      char what[128];
      snprintf(what, sizeof what, "waiting for rank %d to reach %s", q, step);
      report(r, what, ncclSystemError);
    }
  }
}

/* hosts_main runs hosts_case on rank r of n (the ranks meet outside the
 * library, through files, where one host must not leave before the
 * other's calls have ended):
 *   steady    nine allreduces of 1024 floats on one buffer, each checked;
 *   switch    the same on three buffers in turn (call k on buffer k mod 3),
 *             the first host's ranks 20 ms late to each call, so that the
 *             other host's data for a call arrives before the buffers of
 *             that call were set; NCCLCHECK_COUNT elements (default 1024);
 *   mismatch  allreduces of 1024 and 2048 floats (both plan instances
 *             open), then the first host calls 1024 and the other 2048:
 *             every rank polls ncclCommGetAsyncError and prints the error
 *             and ncclGetLastError, then aborts;
 *   abort     one allreduce, then the first host makes another that the
 *             other host never makes and aborts while it is in flight; the
 *             other host aborts once the first has. */
static void hosts_main(ncclComm_t comm, int r, int n) {
  int host = r < n / 2 ? 0 : 1;
  size_t count = 1024;
  if (getenv("NCCLCHECK_COUNT") != NULL) {
    count = (size_t)env_int("NCCLCHECK_COUNT");
  }
  int nbufs = strcmp(hosts_case, "switch") == 0 ? 3 : 1;
  float *bufs[3] = {NULL, NULL, NULL};
  for (int j = 0; j < nbufs; j++) {
    bufs[j] = data_alloc(2 * count * sizeof(float));
    if (bufs[j] == NULL) {
      report(r, "hosts: allocating", ncclSystemError);
      return;
    }
  }
  if (strcmp(hosts_case, "steady") == 0 || strcmp(hosts_case, "switch") == 0) {
    for (int k = 0; k < 9; k++) {
      if (nbufs > 1 && host == 0) {
        usleep(20000);
      }
      hosts_call(comm, bufs[k % nbufs], count, r, n, k, hosts_case);
    }
    finish(comm, r);
    return;
  }
  if (strcmp(hosts_case, "mismatch") == 0) {
    hosts_call(comm, bufs[0], 1024, r, n, 0, "mismatch");
    hosts_call(comm, bufs[0], 2048, r, n, 1, "mismatch");
    hosts_reached("called", r);
    hosts_await("called", 0, n, r);
    size_t mine = host == 0 ? 1024 : 2048;
    report(r, "ncclAllReduce mismatched", ncclAllReduce(bufs[0], bufs[0], mine, ncclFloat32, ncclSum, comm, NULL));
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 3000 && async == ncclSuccess; i++) {
      if (report(r, "ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async)) != ncclSuccess) {
        break;
      }
      if (async == ncclSuccess) {
        usleep(10000);
      }
    }
    pthread_mutex_lock(&out_mu);
    printf("rank %d: async error %d: %s\n", r, (int)async, ncclGetLastError(comm));
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
    /* Every rank has its error before any leaves. */
    hosts_reached("mismatched", r);
    hosts_await("mismatched", 0, n, r);
    report(r, "ncclCommAbort", ncclCommAbort(comm));
    return;
  }
  if (strcmp(hosts_case, "abort") == 0) {
    hosts_call(comm, bufs[0], count, r, n, 0, "abort");
    /* Every rank's first call has ended (its port traffic applied). */
    hosts_reached("called", r);
    hosts_await("called", 0, n, r);
    if (host == 0) {
      hosts_fill(bufs[0], count, r, 1);
      report(r, "ncclAllReduce the other host never makes", ncclAllReduce(bufs[0], bufs[0], count, ncclFloat32, ncclSum, comm, NULL));
      report(r, "ncclCommAbort", ncclCommAbort(comm));
      hosts_reached("aborted", r);
      return;
    }
    hosts_await("aborted", 0, n / 2, r);
    report(r, "ncclCommAbort", ncclCommAbort(comm));
    return;
  }
  fprintf(stderr, "ncclcheck: hosts %s: want steady, switch, mismatch or abort\n", hosts_case);
  report(r, "hosts: unknown case", ncclInvalidArgument);
}

static void *mismatch_data_main(void *p) {
  struct rank_arg *a = p;
  float *b = calloc(2048, sizeof *b);
  report(a->rank, "ncclAllReduce mismatched", ncclAllReduce(b, b, a->rank == 0 ? 1024 : 2048, ncclFloat, ncclSum, a->comm, NULL));
  free(b);
  finish(a->comm, a->rank);
  return NULL;
}

/* data runs main_ on n ranks as threads of one ncclCommInitAll (rank_main:
 * the forwarding checks; the data mains: results checked). */
static int data(int n, void *(*main_)(void *)) {
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, n, NULL)) != ncclSuccess) {
    return 1;
  }
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  struct rank_arg *args = calloc((size_t)n, sizeof *args);
  for (int r = 0; r < n; r++) {
    args[r] = (struct rank_arg){comms[r], r, n};
    pthread_create(&ts[r], NULL, main_, &args[r]);
  }
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
  }
  free(comms);
  free(ts);
  free(args);
  return 0;
}

/* The capture API of the process: the CUDA driver's (a cuda-tagged
 * build of the library; the fake driver in tests) or the emulated
 * device's stand-ins (mscclgoEmu*), found at run time. */
struct capture_api {
  /* emulated device */
  int (*emu_begin)(int, void *);
  int (*emu_end)(int, void *, uintptr_t *);
  int (*emu_launch)(int, uintptr_t, void *);
  int (*emu_sync)(int, void *);
  /* CUDA driver */
  int (*retain)(void **, int);
  int (*set)(void *);
  int (*create)(void **, unsigned);
  int (*begin)(void *, int);
  int (*end)(void *, void **);
  int (*instantiate)(void **, void *, unsigned long long);
  int (*launch)(void *, void *);
  int (*sync)(void *);
};

static int capture_api_load(struct capture_api *a) {
  memset(a, 0, sizeof *a);
  *(void **)(&a->emu_begin) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamBeginCapture");
  *(void **)(&a->emu_end) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamEndCapture");
  *(void **)(&a->emu_launch) = dlsym(RTLD_DEFAULT, "mscclgoEmuGraphLaunch");
  *(void **)(&a->emu_sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
  if (a->emu_begin != NULL && a->emu_end != NULL && a->emu_launch != NULL && a->emu_sync != NULL) {
    return 1;
  }
  *(void **)(&a->retain) = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
  *(void **)(&a->set) = dlsym(RTLD_DEFAULT, "cuCtxSetCurrent");
  *(void **)(&a->create) = dlsym(RTLD_DEFAULT, "cuStreamCreate");
  *(void **)(&a->begin) = dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2");
  *(void **)(&a->end) = dlsym(RTLD_DEFAULT, "cuStreamEndCapture");
  *(void **)(&a->instantiate) = dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags");
  *(void **)(&a->launch) = dlsym(RTLD_DEFAULT, "cuGraphLaunch");
  *(void **)(&a->sync) = dlsym(RTLD_DEFAULT, "cuStreamSynchronize");
  return a->retain != NULL && a->set != NULL && a->create != NULL && a->begin != NULL && a->end != NULL &&
         a->instantiate != NULL && a->launch != NULL && a->sync != NULL;
}

/* capture_first is set by the capturefirst mode. */
static int capture_first;

/* capture_stream makes rank dev's stream: a CUDA stream in the device's
 * primary context (current on this thread from now on), non-blocking
 * unless capture_first, or an emulated stream's handle. */
static int capture_stream(const struct capture_api *a, int dev, void **s) {
  if (a->emu_begin != NULL) {
    *s = (void *)(uintptr_t)(0x100 + dev);
    return 0;
  }
  void *ctx = NULL;
  if (a->retain(&ctx, dev) != 0 || a->set(ctx) != 0) {
    return 1;
  }
  return a->create(s, capture_first ? 0 : 1 /* CU_STREAM_NON_BLOCKING */);
}

static int capture_sync(const struct capture_api *a, int dev, void *s) {
  return a->emu_sync != NULL ? a->emu_sync(dev, s) : a->sync(s);
}

/* capture_value is element i of rank r's input at round k. */
static double capture_value(int r, size_t i, int k) { return value(r, i) + 8.0 * k; }

/* capture_check checks rank r's allreduce result of round k. */
static void capture_check(const float *out, int r, int n, int k, const char *what) {
  size_t bad = COUNT;
  double got = 0, want = 0;
  for (size_t i = 0; i < COUNT && bad == COUNT; i++) {
    want = 0;
    for (int q = 0; q < n; q++) {
      want += capture_value(q, i, k);
    }
    got = out[i];
    if (got != want) {
      bad = i;
    }
  }
  pthread_mutex_lock(&out_mu);
  if (bad == COUNT) {
    printf("rank %d: DATA %s ok\n", r, what);
  } else {
    printf("rank %d: DATA %s WRONG at %zu: got %g, want %g\n", r, what, bad, got, want);
  }
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

#define CAPTURE_REPLAYS 3

/* capture_main: see the capture mode. Round 0 is outside the graph, rounds
 * 1..CAPTURE_REPLAYS are replays, the last round outside again. */
static void *capture_main(void *p) {
  struct rank_arg *ra = p;
  int r = ra->rank, n = ra->n, dev = 0;
  struct capture_api a;
  void *s = NULL, *graph = NULL;
  uintptr_t emu_graph = 0;
  ncclCommCuDevice(ra->comm, &dev);
  if (!capture_api_load(&a) || capture_stream(&a, dev, &s) != 0) {
    report(r, "capture set-up", ncclSystemError);
    finish(ra->comm, r);
    return NULL;
  }
  float *in = calloc(COUNT, sizeof *in), *out = calloc(COUNT, sizeof *out);
  for (int k = capture_first ? 1 : 0; k <= CAPTURE_REPLAYS + 1; k++) {
    for (size_t i = 0; i < COUNT; i++) {
      in[i] = (float)capture_value(r, i, k);
    }
    char what[64];
    ncclResult_t res = ncclSuccess;
    if (k == 0 || k == CAPTURE_REPLAYS + 1) {
      snprintf(what, sizeof what, "allreduce round %d outside the graph", k);
      res = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, ra->comm, s);
    } else {
      if (k == 1) {
        int b = a.emu_begin != NULL ? a.emu_begin(dev, s) : a.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
        res = report(r, "begin capture", b == 0 ? ncclSuccess : ncclSystemError);
        if (res == ncclSuccess) {
          res = report(r, "ncclAllReduce captured", ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, ra->comm, s));
          int e = 0;
          if (a.emu_end != NULL) {
            e = a.emu_end(dev, s, &emu_graph);
          } else {
            void *g = NULL;
            e = a.end(s, &g);
            if (e == 0) {
              e = a.instantiate(&graph, g, 0);
            }
          }
          if (report(r, "end capture", e == 0 ? ncclSuccess : ncclSystemError) != ncclSuccess) {
            res = ncclSystemError;
          }
        }
      }
      snprintf(what, sizeof what, "allreduce round %d replayed", k);
      if (res == ncclSuccess) {
        int l = a.emu_launch != NULL ? a.emu_launch(dev, emu_graph, s) : a.launch(graph, s);
        res = l == 0 ? ncclSuccess : ncclSystemError;
      }
    }
    if (res == ncclSuccess) {
      res = capture_sync(&a, dev, s) == 0 ? ncclSuccess : ncclSystemError;
    }
    if (report(r, what, res) != ncclSuccess) {
      break;
    }
    capture_check(out, r, n, k, what);
  }
  free(in);
  free(out);
  finish(ra->comm, r);
  return NULL;
}

/* groupdata: see the mode. Two rounds, in and out of place. */
static int groupdata(int n) {
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  float **bufs = calloc((size_t)n, sizeof *bufs);
  if (comms == NULL || bufs == NULL || report(-1, "ncclCommInitAll", ncclCommInitAll(comms, n, NULL)) != ncclSuccess) {
    return 1;
  }
  for (int r = 0; r < n; r++) {
    bufs[r] = calloc(2 * COUNT, sizeof *bufs[r]);
  }
  for (int round = 0; round < 2; round++) {
    int inplace = round == 0;
    for (int r = 0; r < n; r++) {
      for (size_t i = 0; i < COUNT; i++) {
        bufs[r][i] = (float)capture_value(r, i, round);
      }
    }
    report(-1, "ncclGroupStart", ncclGroupStart());
    for (int r = 0; r < n; r++) {
      float *out = inplace ? bufs[r] : bufs[r] + COUNT;
      report(r, "ncclAllReduce in a group", ncclAllReduce(bufs[r], out, COUNT, ncclFloat32, ncclSum, comms[r], NULL));
    }
    if (report(-1, "ncclGroupEnd", ncclGroupEnd()) != ncclSuccess) {
      break;
    }
    for (int r = 0; r < n; r++) {
      char what[64];
      snprintf(what, sizeof what, "group allreduce %s", inplace ? "in-place" : "out-of-place");
      if (report(r, "stream_sync", stream_sync(comms[r])) == ncclSuccess) {
        capture_check(inplace ? bufs[r] : bufs[r] + COUNT, r, n, round, what);
      }
    }
  }
  for (int r = 0; r < n; r++) {
    finish(comms[r], r);
    free(bufs[r]);
  }
  free(comms);
  free(bufs);
  return 0;
}

/* later runs the functions of later NCCL releases on one rank. */
static int later(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRankScalable", ncclCommInitRankScalable(&comm, 1, 0, 1, &id, NULL)) != ncclSuccess) {
    return 1;
  }
  int count = -1, user = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &user);
  printf("rank 0: count %d user rank %d\n", count, user);
  cudaStream_t stream = (cudaStream_t)(uintptr_t)0x3000;
  char *buf = calloc(4096, 1);
  ncclWindow_t win = NULL;
  if (report(0, "ncclCommWindowRegister", ncclCommWindowRegister(comm, buf, 4096, &win, NCCL_WIN_COLL_SYMMETRIC)) ==
      ncclSuccess) {
    void *mc = NULL;
    if (report(0, "ncclGetLsaMultimemDevicePointer", ncclGetLsaMultimemDevicePointer(win, 64, &mc)) == ncclSuccess) {
      printf("rank 0: multimem pointer at window + %td\n", (char *)mc - (char *)win);
    }
    report(0, "ncclCommWindowDeregister", ncclCommWindowDeregister(comm, win));
  } else {
    void *mc = NULL;
    report(0, "ncclGetLsaMultimemDevicePointer", ncclGetLsaMultimemDevicePointer(NULL, 64, &mc));
  }
  /* Stand-ins for NCCL's device structures, which pass through by pointer. */
  static uint64_t reqs_mem[64], devcomm_mem[64];
  ncclDevCommRequirements_t *reqs = (ncclDevCommRequirements_t *)(void *)reqs_mem;
  ncclDevComm_t *devcomm = (ncclDevComm_t *)(void *)devcomm_mem;
  if (report(0, "ncclDevCommCreate", ncclDevCommCreate(comm, reqs, devcomm)) == ncclSuccess) {
    report(0, "ncclDevCommDestroy", ncclDevCommDestroy(comm, devcomm));
  }
  report(0, "ncclSignal", ncclSignal(0, 1, 2, 0, comm, stream));
  ncclWaitSignalDesc_t desc = {.opCnt = 1, .peer = 0, .sigIdx = 1, .ctx = 2};
  report(0, "ncclWaitSignal", ncclWaitSignal(1, &desc, comm, stream));
  if (report(0, "ncclCommSuspend", ncclCommSuspend(comm, NCCL_SUSPEND_MEM)) == ncclSuccess) {
    uint64_t total = 0;
    if (report(0, "ncclCommMemStats", ncclCommMemStats(comm, ncclStatGpuMemTotal, &total)) == ncclSuccess) {
      printf("rank 0: memory total %llu\n", (unsigned long long)total);
    }
    report(0, "ncclCommResume", ncclCommResume(comm));
  }
  ncclComm_t shrunk = comm;
  int excluded = 0;
  report(0, "ncclCommShrink", ncclCommShrink(comm, &excluded, 0, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
  printf("rank 0: shrink gave %s\n", shrunk == NULL ? "NULL" : "a communicator");

  ncclComm_t bad = NULL;
  report(0, "ncclCommInitRankScalable nId 0", ncclCommInitRankScalable(&bad, 1, 0, 0, &id, NULL));
  report(0, "ncclCommInitRankScalable nId 2 of 1 rank", ncclCommInitRankScalable(&bad, 1, 0, 2, &id, NULL));
  report(0, "ncclCommInitRankScalable commIds NULL", ncclCommInitRankScalable(&bad, 1, 0, 1, NULL, NULL));
  report(0, "ncclCommInitRankScalable newcomm NULL", ncclCommInitRankScalable(NULL, 1, 0, 1, &id, NULL));
  finish(comm, 0);
  report(0, "ncclCommWindowRegister after destroy", ncclCommWindowRegister(comm, buf, 4096, &win, NCCL_WIN_DEFAULT));
  free(buf);
  return 0;
}

struct scalable_arg {
  ncclUniqueId *ids;
  int rank, n, k;
};

static void *scalable_main(void *p) {
  struct scalable_arg *a = p;
  ncclComm_t comm = NULL;
  if (report(a->rank, "ncclCommInitRankScalable", ncclCommInitRankScalable(&comm, a->n, a->rank, a->k, a->ids, NULL)) !=
      ncclSuccess) {
    return NULL;
  }
  struct rank_arg r = {comm, a->rank, a->n};
  return rank_main(&r);
}

/* scalable makes n ranks as threads from k unique ids (root_of's). */
static int scalable(int n, int k) {
  if (n < 1 || k < 1 || k > n) {
    fprintf(stderr, "ncclcheck: scalable %d %d: want 1 <= K <= N\n", n, k);
    return 2;
  }
  ncclUniqueId *ids = calloc((size_t)k, sizeof *ids);
  for (int i = 0; i < k; i++) {
    char what[64];
    snprintf(what, sizeof what, "ncclGetUniqueId of root %d", i);
    if (report(root_of(i, n, k), what, ncclGetUniqueId(&ids[i])) != ncclSuccess) {
      free(ids);
      return 1;
    }
  }
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  struct scalable_arg *args = calloc((size_t)n, sizeof *args);
  for (int r = 0; r < n; r++) {
    args[r] = (struct scalable_arg){ids, r, n, k};
    pthread_create(&ts[r], NULL, scalable_main, &args[r]);
  }
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
  }
  free(ids);
  free(ts);
  free(args);
  return 0;
}

/* The nccl-tests-shaped sweep (ncclcheck sweep N MIN MAX FACTOR): for
 * every data type nccl-tests' -d all takes that plans compute (float,
 * half, bfloat16, int32), every collective (allreduce, allgather,
 * reducescatter) and every size from MIN to MAX bytes by FACTOR, the
 * out-of-place call then the in-place one, as nccl-tests runs them: sizes
 * count the whole message (allgather's output, reducescatter's input), one
 * send and one receive buffer per rank for the whole sweep, allocated once
 * at the largest size, sums (ncclSum). NCCLCHECK_SWEEP_TYPES, if set,
 * names the types to run ("half,int32"). Every result is checked; each
 * rank prints its failures and "rank R: SWEEP cases C wrong W failed F". */
static size_t sweep_min = 1024, sweep_max = 1 << 20, sweep_factor = 2;

struct sweep_type {
  ncclDataType_t dtype;
  const char *name;
  size_t size;
};

static const struct sweep_type sweep_types[] = {
    {ncclFloat32, "float", 4}, {ncclFloat16, "half", 2}, {ncclBfloat16, "bfloat16", 2}, {ncclInt32, "int32", 4}};

/* half_of and of_half convert the sweep's values (small integers, exact
 * in every type) to and from IEEE half precision. */
static uint16_t half_of(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  if ((x & 0x7fffffffu) == 0) {
    return (uint16_t)sign;
  }
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)exp << 10) | ((x & 0x7fffffu) >> 13));
}

static float of_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x = sign;
  if (exp == 0x1f) {
    x |= 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    x |= ((exp - 15 + 127) << 23) | (mant << 13);
  } /* zero and subnormals (never a right result here) read as zero */
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static void sweep_set(void *b, ncclDataType_t dt, size_t i, double v) {
  float f = (float)v;
  uint32_t x;
  switch (dt) {
  case ncclFloat16:
    ((uint16_t *)b)[i] = half_of(f);
    break;
  case ncclBfloat16:
    memcpy(&x, &f, sizeof x);
    ((uint16_t *)b)[i] = (uint16_t)(x >> 16);
    break;
  default:
    set(b, dt, i, v);
  }
}

static double sweep_get(const void *b, ncclDataType_t dt, size_t i) {
  uint32_t x;
  float f;
  switch (dt) {
  case ncclFloat16:
    return of_half(((const uint16_t *)b)[i]);
  case ncclBfloat16:
    x = (uint32_t)((const uint16_t *)b)[i] << 16;
    memcpy(&f, &x, sizeof f);
    return f;
  default:
    return get(b, dt, i);
  }
}

/* sweep_named reports whether name is one of the comma-separated list. */
static int sweep_named(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p != '\0';) {
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) {
      return 1;
    }
    if (end == NULL) {
      break;
    }
    p = end + 1;
  }
  return 0;
}

static const char *const sweep_colls[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter"};

static void *sweep_main(void *p) {
  struct rank_arg *a = p;
  int r = a->rank, n = a->n, cases = 0, wrong = 0, failed = 0;
  char *sendb = data_alloc(sweep_max), *recvb = data_alloc(sweep_max);
  if (sendb == NULL || recvb == NULL) {
    report(r, "sweep buffers", ncclSystemError);
    return NULL;
  }
  for (size_t t = 0; t < sizeof sweep_types / sizeof sweep_types[0]; t++) {
    const struct sweep_type *ty = &sweep_types[t];
    const char *only = getenv("NCCLCHECK_SWEEP_TYPES");
    if (only != NULL && !sweep_named(only, ty->name)) {
      continue;
    }
    for (int coll = 0; coll < 3; coll++) {
      for (size_t bytes = sweep_min; bytes <= sweep_max; bytes *= sweep_factor) {
        for (int inplace = 0; inplace < 2; inplace++) {
          size_t count = coll == 0 ? bytes / ty->size : bytes / ty->size / (size_t)n; /* as NCCL counts */
          if (count == 0) {
            continue;
          }
          size_t in = coll == 2 ? count * (size_t)n : count, out = coll == 1 ? count * (size_t)n : count;
          char *inb = sendb, *outb = recvb;
          if (inplace) {
            inb = coll == 1 ? recvb + (size_t)r * count * ty->size : recvb;
            outb = coll == 2 ? recvb + (size_t)r * count * ty->size : recvb;
          }
          memset(recvb, 0, bytes);
          for (size_t i = 0; i < in; i++) {
            sweep_set(inb, ty->dtype, i, value(r, i));
          }
          ncclResult_t res;
          if (coll == 0) {
            res = ncclAllReduce(inb, outb, count, ty->dtype, ncclSum, a->comm, NULL);
          } else if (coll == 1) {
            res = ncclAllGather(inb, outb, count, ty->dtype, a->comm, NULL);
          } else {
            res = ncclReduceScatter(inb, outb, count, ty->dtype, ncclSum, a->comm, NULL);
          }
          if (res == ncclSuccess) {
            res = stream_sync(a->comm);
          }
          char what[160];
          snprintf(what, sizeof what, "SWEEP %s %s %zu bytes %s", sweep_colls[coll], ty->name, bytes,
                   inplace ? "in-place" : "out-of-place");
          cases++;
          if (res != ncclSuccess) {
            failed++;
            report(r, what, res);
            continue;
          }
          for (size_t i = 0; i < out; i++) {
            double want = 0;
            if (coll == 1) {
              want = value((int)(i / count), i % count);
            } else {
              size_t at = coll == 2 ? (size_t)r * count + i : i;
              for (int q = 0; q < n; q++) {
                want += value(q, at);
              }
            }
            double got = sweep_get(outb, ty->dtype, i);
            if (got != want) {
              wrong++;
              pthread_mutex_lock(&out_mu);
              printf("rank %d: %s WRONG at %zu: got %g, want %g\n", r, what, i, got, want);
              pthread_mutex_unlock(&out_mu);
              break;
            }
          }
        }
      }
    }
  }
  data_free(sendb);
  data_free(recvb);
  pthread_mutex_lock(&out_mu);
  printf("rank %d: SWEEP cases %d wrong %d failed %d\n", r, cases, wrong, failed);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
  finish(a->comm, r);
  return NULL;
}

/* The host time per call (ncclcheck bench N ITERS, benchprocs ITERS):
 * each rank makes ITERS in-place float32 ncclAllReduce calls of 128 B,
 * then of 4 KiB, after 20 unmeasured ones, and ITERS ncclCommGetAsyncError
 * calls (a call that does nothing); rank 0 prints the mean time until each
 * call returned, "BENCH LABEL ranks N allreduce 128 B: T us/call" (LABEL
 * is NCCLCHECK_BENCH_LABEL). NCCLCHECK_BENCH_OOP=1 makes the allreduce
 * calls out of place. On host memory (MSCCLGO_NCCL_HOSTMEM=1) a
 * call returns when its collective is done. */
static int bench_iters = 1000;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *bench_main(void *p) {
  struct rank_arg *a = p;
  const char *label = getenv("NCCLCHECK_BENCH_LABEL");
  label = label != NULL ? label : "";
  static const size_t sizes[] = {128, 4096};
  /* NCCLCHECK_BENCH_OOP=1: out of place, from a second buffer. */
  const char *oop = getenv("NCCLCHECK_BENCH_OOP");
  float *buf = data_alloc(2 * 4096);
  if (buf == NULL) {
    report(a->rank, "bench buffer", ncclSystemError);
    return NULL;
  }
  memset(buf, 0, 2 * 4096);
  float *send = oop != NULL && strcmp(oop, "1") == 0 ? buf + 4096 / sizeof(float) : buf;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t count = sizes[k] / sizeof(float);
    double start = 0;
    for (int i = 0; i < 20 + bench_iters; i++) {
      if (i == 20) {
        start = now_us();
      }
      ncclResult_t r = ncclAllReduce(send, buf, count, ncclFloat32, ncclSum, a->comm, NULL);
      if (r != ncclSuccess) {
        report(a->rank, "bench ncclAllReduce", r);
        data_free(buf);
        return NULL;
      }
    }
    double per = (now_us() - start) / bench_iters;
    stream_sync(a->comm);
    if (a->rank == 0) {
      pthread_mutex_lock(&out_mu);
      printf("BENCH %s ranks %d allreduce %zu B: %.2f us/call\n", label, a->n, sizes[k], per);
      fflush(stdout);
      pthread_mutex_unlock(&out_mu);
    }
  }
  ncclResult_t async = ncclSuccess;
  double start = now_us();
  for (int i = 0; i < bench_iters; i++) {
    ncclCommGetAsyncError(a->comm, &async);
  }
  double per = (now_us() - start) / bench_iters;
  if (a->rank == 0) {
    pthread_mutex_lock(&out_mu);
    printf("BENCH %s ranks %d ncclCommGetAsyncError: %.2f us/call\n", label, a->n, per);
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
  }
  data_free(buf);
  finish(a->comm, a->rank);
  return NULL;
}

static int custom(void) {
  mscclgoComm_t comm = NULL;
  if (report(-1, "mscclgoCommInitEnv", mscclgoCommInitEnv(&comm)) != ncclSuccess) {
    return 1;
  }
  int rank = -1, size = 0;
  report(-1, "mscclgoCommRank", mscclgoCommRank(comm, &rank));
  report(rank, "mscclgoCommSize", mscclgoCommSize(comm, &size));
  int n = 0;
  report(rank, "mscclgoRegisterPlan missing", mscclgoRegisterPlan(comm, "/nonexistent/plans", &n));
  const char *plans = getenv("NCCLCHECK_PLANS");
  report(rank, "mscclgoRegisterPlan", mscclgoRegisterPlan(comm, plans ? plans : ".", &n));
  float *buf = calloc(1024, sizeof *buf);
  char name[128] = "";
  report(rank, "mscclgoSelect", mscclgoSelect(comm, "allreduce", NULL, buf, buf, 1024, ncclFloat32, name, sizeof name));
  printf("rank %d: size %d, %d plans registered, selected %s\n", rank, size, n, name);
  report(rank, "mscclgoExecute", mscclgoExecute(comm, "allreduce", NULL, buf, buf, 1024, ncclFloat32, NULL));
  report(rank, "mscclgoExecute broadcast", mscclgoExecute(comm, "broadcast", NULL, buf, buf, 1024, ncclFloat32, NULL));
  /* Host memory: in place twice (the second call reuses the plan's
   * session), then out of place through the in-place plan after a copy. */
  float *out = calloc(1024, sizeof *out);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 1024; i++) {
      buf[i] = (float)value(rank, (size_t)i) + (float)round;
    }
    float *dst = round < 2 ? buf : out;
    char what[64];
    snprintf(what, sizeof what, "mscclgoExecuteHost round %d", round);
    if (report(rank, what, mscclgoExecuteHost(comm, "allreduce", NULL, buf, dst, 1024, ncclFloat32)) != ncclSuccess) {
      continue;
    }
    int bad = -1;
    for (int i = 0; i < 1024 && bad < 0; i++) {
      double want = (double)size * round;
      for (int q = 0; q < size; q++) {
        want += value(q, (size_t)i);
      }
      if (dst[i] != (float)want) {
        bad = i;
      }
    }
    printf("rank %d: DATA %s %s\n", rank, what, bad < 0 ? "ok" : "WRONG");
  }
  free(out);
  report(rank, "mscclgoCommDestroy", mscclgoCommDestroy(comm));
  report(rank, "mscclgoCommRank after destroy", mscclgoCommRank(comm, &rank));
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: ncclcheck threads N | procs | lost | single | afterdestroy | badargs | mismatch | group N | groupbad | data N | datamismatch | dataprocs | hostprocs | custom | sweep N MIN MAX FACTOR | bench N ITERS | benchprocs ITERS | groupdata N | sessions N | sessionsprocs | capture N | capturefirst N | later | scalable N K | scalableprocs\n");
    return 2;
  }
  if (strcmp(argv[1], "threads") == 0 && argc == 3) {
    return data(atoi(argv[2]), rank_main);
  }
  if (strcmp(argv[1], "procs") == 0) {
    return procs(PROCS_CALLS);
  }
  if (strcmp(argv[1], "lost") == 0) {
    return procs(PROCS_LOSE);
  }
  if (strcmp(argv[1], "single") == 0) {
    return single();
  }
  if (strcmp(argv[1], "afterdestroy") == 0) {
    return afterdestroy();
  }
  if (strcmp(argv[1], "badargs") == 0) {
    return badargs();
  }
  if (strcmp(argv[1], "mismatch") == 0) {
    return mismatch();
  }
  if (strcmp(argv[1], "group") == 0 && argc == 3) {
    return group(atoi(argv[2]), 0);
  }
  if (strcmp(argv[1], "groupbad") == 0) {
    return group(2, 1);
  }
  if (strcmp(argv[1], "data") == 0 && argc == 3) {
    return data(atoi(argv[2]), data_main);
  }
  if (strcmp(argv[1], "dataprocs") == 0) {
    return procs(PROCS_DATA);
  }
  if (strcmp(argv[1], "hostprocs") == 0) {
    return procs(PROCS_HOSTDATA);
  }
  if (strcmp(argv[1], "mixed") == 0 && argc == 3) {
    return data(atoi(argv[2]), mixed_main);
  }
  if (strcmp(argv[1], "oop") == 0 && argc == 3) {
    return data(atoi(argv[2]), oop_main);
  }
  if (strcmp(argv[1], "mixedprocs") == 0) {
    return procs(PROCS_MIXED);
  }
  if (strcmp(argv[1], "sessions") == 0 && argc == 3) {
    return data(atoi(argv[2]), sessions_main);
  }
  if (strcmp(argv[1], "sessionsprocs") == 0) {
    return procs(PROCS_SESSIONS);
  }
  if (strcmp(argv[1], "hosts") == 0 && argc == 3) {
    hosts_case = argv[2];
    return procs(PROCS_HOSTS);
  }
  if (strcmp(argv[1], "datamismatch") == 0) {
    return data(2, mismatch_data_main);
  }
  if (strcmp(argv[1], "custom") == 0) {
    return custom();
  }
  if (strcmp(argv[1], "bench") == 0 && argc == 4) {
    bench_iters = atoi(argv[3]);
    return data(atoi(argv[2]), bench_main);
  }
  if (strcmp(argv[1], "benchprocs") == 0 && argc == 3) {
    bench_iters = atoi(argv[2]);
    return procs(PROCS_BENCH);
  }
  if (strcmp(argv[1], "sweep") == 0 && argc == 6) {
    sweep_min = strtoull(argv[3], NULL, 10);
    sweep_max = strtoull(argv[4], NULL, 10);
    sweep_factor = strtoull(argv[5], NULL, 10);
    if (sweep_min == 0 || sweep_max < sweep_min || sweep_factor < 2) {
      fprintf(stderr, "ncclcheck sweep N MIN MAX FACTOR: MIN > 0, MAX >= MIN, FACTOR >= 2\n");
      return 2;
    }
    return data(atoi(argv[2]), sweep_main);
  }
  if (strcmp(argv[1], "groupdata") == 0 && argc == 3) {
    return groupdata(atoi(argv[2]));
  }
  if (strcmp(argv[1], "capture") == 0 && argc == 3) {
    return data(atoi(argv[2]), capture_main);
  }
  if (strcmp(argv[1], "capturefirst") == 0 && argc == 3) {
    capture_first = 1;
    return data(atoi(argv[2]), capture_main);
  }
  if (strcmp(argv[1], "later") == 0) {
    return later();
  }
  if (strcmp(argv[1], "scalableprocs") == 0) {
    return procs(PROCS_SCALABLE);
  }
  if (strcmp(argv[1], "scalable") == 0 && argc == 4) {
    return scalable(atoi(argv[2]), atoi(argv[3]));
  }
  fprintf(stderr, "ncclcheck: unknown mode %s\n", argv[1]);
  return 2;
}
