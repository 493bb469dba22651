/*
 * hostile: a C caller that misuses the NCCL library on purpose, for
 * hostile_test.go. Each mode is one hostile case (or a family of them,
 * by its arguments); it prints what the library answered:
 *
 *   rank R: WHAT -> CODE        the ncclResult_t of a call
 *   rank R: WHAT error: MSG     the calling thread's last error
 *   rank R: data untouched      a refused call left the buffers alone
 *                               ("data CHANGED" otherwise)
 *
 * and exits 0 unless it could not set the case up. The test asserts the
 * codes, the messages and the data, and runs each mode under a time bound
 * (a hang is a failure).
 *
 *   hostile call N COLL COUNT DTYPE OP PEER   N ranks (ncclCommInitAll) make one call each
 *   hostile zero N                            N ranks: every collective, send and recv of 0
 *                                             elements on NULL buffers (alone and in a group)
 *   hostile ends MODE ROUNDS OP...            destroy/abort/finalize one communicator, in
 *                                             parallel threads (par) or in order (seq)
 *   hostile abortwait                         a call waits for a peer; another thread aborts
 *   hostile timeoutfree COUNT                 a run outlasts the waiting ranks' timeout; they free
 *   hostile reuseid N1 N2 DESTROY             a unique id used for a second communicator
 *   hostile refusedfds N                      N refused inits, each id then used: the fds left open
 *   hostile finishedfds N                     N communicators made and destroyed: the fds left open
 *   hostile samedev                           two ranks as threads, no device chosen
 *   hostile initall NDEV                      ncclCommInitAll(NDEV): the code and the peak memory
 *   hostile env                               one rank: init and one allreduce (for bad variables)
 *   hostile abortonly                         one rank: ncclCommAbort, then ncclCommDestroy
 *   hostile simgroup                          an init in a group ended by ncclGroupSimulateEnd
 *   hostile selector EMPTY|NULL               mscclgoSelect with a selector answering "" or NULL
 *   hostile register PATH                     mscclgoRegisterPlan(PATH)
 *   hostile execute COUNT                     mscclgoExecute of an allreduce of COUNT floats
 *   hostile sigwait                           main blocks SIGTERM, the library runs, the process
 *                                             sends itself SIGTERM and waits for it (sigtimedwait)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mscclgo.h"
#include "nccl.h"

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* report prints what call WHAT of rank answered, and its error. */
static ncclResult_t report(int rank, const char *what, ncclResult_t r) {
  pthread_mutex_lock(&out_mu);
  printf("rank %d: %s -> %d\n", rank, what, (int)r);
  if (r != ncclSuccess && r != ncclInProgress) {
    printf("rank %d: %s error: %s\n", rank, what, mscclgoGetLastError());
  }
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
  return r;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&out_mu);
  vprintf(fmt, ap);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
  va_end(ap);
}

/* ------------------------------------------------------------------ */
/* call: N ranks, one call each, with small buffers that a refused call
 * must leave alone. */

enum { BUF = 4096, PATTERN = 0x5a };

struct call_arg {
  ncclComm_t comm;
  int rank;
  const char *coll;
  size_t count;
  int dtype, op, peer;
  unsigned char *send, *recv;
};

static void *call_main(void *p) {
  struct call_arg *a = p;
  ncclResult_t r;
  const char *c = a->coll;
  ncclDataType_t dt = (ncclDataType_t)a->dtype;
  ncclRedOp_t op = (ncclRedOp_t)a->op;
  if (strcmp(c, "allreduce") == 0) {
    r = ncclAllReduce(a->send, a->recv, a->count, dt, op, a->comm, NULL);
  } else if (strcmp(c, "allgather") == 0) {
    r = ncclAllGather(a->send, a->recv, a->count, dt, a->comm, NULL);
  } else if (strcmp(c, "reducescatter") == 0) {
    r = ncclReduceScatter(a->send, a->recv, a->count, dt, op, a->comm, NULL);
  } else if (strcmp(c, "reduce") == 0) {
    r = ncclReduce(a->send, a->recv, a->count, dt, op, a->peer, a->comm, NULL);
  } else if (strcmp(c, "broadcast") == 0) {
    r = ncclBroadcast(a->send, a->recv, a->count, dt, a->peer, a->comm, NULL);
  } else if (strcmp(c, "bcast") == 0) {
    r = ncclBcast(a->recv, a->count, dt, a->peer, a->comm, NULL);
  } else if (strcmp(c, "send") == 0) {
    r = ncclSend(a->send, a->count, dt, a->peer, a->comm, NULL);
  } else if (strcmp(c, "recv") == 0) {
    r = ncclRecv(a->recv, a->count, dt, a->peer, a->comm, NULL);
  } else {
    say("rank %d: unknown collective %s\n", a->rank, c);
    return NULL;
  }
  report(a->rank, c, r);
  int changed = 0;
  for (int i = 0; i < BUF; i++) {
    changed |= a->send[i] != PATTERN || a->recv[i] != PATTERN;
  }
  say("rank %d: data %s\n", a->rank, changed ? "CHANGED" : "untouched");
  return NULL;
}

static int call(int n, const char *coll, size_t count, int dtype, int op, int peer) {
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  struct call_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, n, NULL)) != ncclSuccess) {
    return 1;
  }
  for (int r = 0; r < n; r++) {
    args[r] = (struct call_arg){comms[r], r, coll, count, dtype, op, peer, malloc(BUF), malloc(BUF)};
    memset(args[r].send, PATTERN, BUF);
    memset(args[r].recv, PATTERN, BUF);
    pthread_create(&ts[r], NULL, call_main, &args[r]);
  }
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
  }
  for (int r = 0; r < n; r++) {
    ncclCommDestroy(comms[r]);
    free(args[r].send);
    free(args[r].recv);
  }
  free(comms);
  free(args);
  free(ts);
  return 0;
}

/* ------------------------------------------------------------------ */
/* zero: N ranks (threads), each making every call with count 0 and NULL
 * buffers, then one in a group of a send and a recv: all no-ops. */

struct zero_arg {
  ncclComm_t comm;
  int rank, n;
};

static void *zero_main(void *p) {
  struct zero_arg *a = p;
  ncclComm_t c = a->comm;
  int r = a->rank, next = (a->rank + 1) % a->n, prev = (a->rank + a->n - 1) % a->n;
  report(r, "zero allreduce", ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL));
  report(r, "zero allgather", ncclAllGather(NULL, NULL, 0, ncclFloat, c, NULL));
  report(r, "zero reducescatter", ncclReduceScatter(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL));
  report(r, "zero reduce", ncclReduce(NULL, NULL, 0, ncclFloat, ncclSum, 0, c, NULL));
  report(r, "zero broadcast", ncclBroadcast(NULL, NULL, 0, ncclFloat, 0, c, NULL));
  report(r, "zero bcast", ncclBcast(NULL, 0, ncclFloat, 0, c, NULL));
  report(r, "zero alltoall", ncclAlltoAll(NULL, NULL, 0, ncclFloat, c, NULL));
  report(r, "zero gather", ncclGather(NULL, NULL, 0, ncclFloat, 0, c, NULL));
  report(r, "zero scatter", ncclScatter(NULL, NULL, 0, ncclFloat, 0, c, NULL));
  report(r, "zero send", ncclSend(NULL, 0, ncclFloat, next, c, NULL));
  report(r, "zero recv", ncclRecv(NULL, 0, ncclFloat, prev, c, NULL));
  ncclGroupStart();
  ncclSend(NULL, 0, ncclFloat, next, c, NULL);
  ncclRecv(NULL, 0, ncclFloat, prev, c, NULL);
  report(r, "zero send and recv in a group", ncclGroupEnd());
  return NULL;
}

static int zero(int n) {
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  struct zero_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, n, NULL)) != ncclSuccess) {
    return 1;
  }
  for (int r = 0; r < n; r++) {
    args[r] = (struct zero_arg){comms[r], r, n};
    pthread_create(&ts[r], NULL, zero_main, &args[r]);
  }
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
  }
  for (int r = 0; r < n; r++) {
    ncclCommDestroy(comms[r]);
  }
  free(comms);
  free(args);
  free(ts);
  return 0;
}

/* ------------------------------------------------------------------ */
/* ends: destroy, abort and finalize of one communicator, several at once
 * (par: one thread each, released together) or in order (seq). Each
 * round prints its codes in the order of the ops. */

struct end_arg {
  ncclComm_t comm;
  const char *op;
  pthread_barrier_t *start;
  ncclResult_t r;
  char err[256];
};

static ncclResult_t do_end(ncclComm_t comm, const char *op) {
  if (strcmp(op, "destroy") == 0) {
    return ncclCommDestroy(comm);
  }
  if (strcmp(op, "abort") == 0) {
    return ncclCommAbort(comm);
  }
  return ncclCommFinalize(comm);
}

static void *end_main(void *p) {
  struct end_arg *a = p;
  pthread_barrier_wait(a->start);
  a->r = do_end(a->comm, a->op);
  snprintf(a->err, sizeof a->err, "%s", a->r != ncclSuccess ? mscclgoGetLastError() : "");
  return NULL;
}

static int ends(int par, int rounds, int nops, char **ops) {
  for (int k = 0; k < rounds; k++) {
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    if (ncclGetUniqueId(&id) != ncclSuccess || report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
      return 1;
    }
    struct end_arg args[8];
    pthread_t ts[8];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)nops);
    for (int i = 0; i < nops; i++) {
      args[i] = (struct end_arg){.comm = comm, .op = ops[i], .start = &start};
      if (par) {
        pthread_create(&ts[i], NULL, end_main, &args[i]);
      } else {
        args[i].r = do_end(comm, ops[i]);
        snprintf(args[i].err, sizeof args[i].err, "%s", args[i].r != ncclSuccess ? mscclgoGetLastError() : "");
      }
    }
    for (int i = 0; par && i < nops; i++) {
      pthread_join(ts[i], NULL);
    }
    pthread_barrier_destroy(&start);
    char codes[64] = "";
    for (int i = 0; i < nops; i++) {
      snprintf(codes + strlen(codes), sizeof codes - strlen(codes), "%s%d", i ? "," : "", (int)args[i].r);
    }
    say("round %d: codes %s\n", k, codes);
    for (int i = 0; i < nops; i++) {
      if (args[i].r != ncclSuccess) {
        say("round %d: %s error: %s\n", k, ops[i], args[i].err);
      }
    }
    /* A communicator nobody ended (finalize only) is destroyed here. */
    int ended = 0;
    for (int i = 0; i < nops; i++) {
      ended |= strcmp(ops[i], "finalize") != 0 && args[i].r == ncclSuccess;
    }
    if (!ended) {
      ncclCommDestroy(comm);
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* abortwait: two ranks; rank 0 calls an allreduce that rank 1 never
 * makes; the main thread aborts rank 0's communicator while it waits. */

struct wait_arg {
  ncclComm_t comm;
  float *buf;
};

static void *wait_main(void *p) {
  struct wait_arg *a = p;
  report(0, "ncclAllReduce waiting for rank 1", ncclAllReduce(a->buf, a->buf, 1024, ncclFloat, ncclSum, a->comm, NULL));
  return NULL;
}

static int abortwait(void) {
  ncclComm_t comms[2];
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, 2, NULL)) != ncclSuccess) {
    return 1;
  }
  struct wait_arg a = {comms[0], calloc(1024, sizeof(float))};
  pthread_t t;
  pthread_create(&t, NULL, wait_main, &a);
  usleep(500 * 1000);
  report(0, "ncclCommAbort", ncclCommAbort(comms[0]));
  pthread_join(t, NULL);
  say("rank 0: the waiting call returned\n");
  free(a.buf);
  report(1, "ncclCommDestroy", ncclCommDestroy(comms[1]));
  return 0;
}

/* ------------------------------------------------------------------ */
/* timeoutfree: four ranks allreduce COUNT floats in place on mapped
 * buffers; ranks 1 to 3 call at once, rank 0 just before their timeout
 * (MSCCLGO_NCCL_TIMEOUT, seconds, in HOSTILE_TIMEOUT_S) ends, so that
 * the run is under way when it does. Every rank unmaps its buffer as soon
 * as its call returns: a run still writing it would fault. */

struct tf_arg {
  ncclComm_t comm;
  int rank;
  size_t count;
  unsigned delay_ms;
  pthread_barrier_t *ready; /* every rank's buffer is filled */
};

static void *tf_main(void *p) {
  struct tf_arg *a = p;
  size_t bytes = a->count * sizeof(float);
  float *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    say("rank %d: mmap failed\n", a->rank);
    return NULL;
  }
  for (size_t i = 0; i < a->count; i++) {
    buf[i] = (float)(a->rank + 1);
  }
  pthread_barrier_wait(a->ready);
  usleep(a->delay_ms * 1000);
  ncclResult_t r = ncclAllReduce(buf, buf, a->count, ncclFloat, ncclSum, a->comm, NULL);
  int right = 1;
  if (r == ncclSuccess) {
    for (size_t i = 0; i < a->count; i += 4099) {
      right &= buf[i] == 10.0f;
    }
  }
  munmap(buf, bytes);
  report(a->rank, "ncclAllReduce", r);
  if (r == ncclSuccess) {
    say("rank %d: data %s\n", a->rank, right ? "right" : "WRONG");
  }
  return NULL;
}

static int timeoutfree(size_t count) {
  const char *t = getenv("HOSTILE_TIMEOUT_MS");
  unsigned timeout_ms = t != NULL ? (unsigned)atoi(t) : 2000;
  ncclComm_t comms[4];
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, 4, NULL)) != ncclSuccess) {
    return 1;
  }
  struct tf_arg args[4];
  pthread_t ts[4];
  pthread_barrier_t ready;
  pthread_barrier_init(&ready, NULL, 4);
  for (int r = 0; r < 4; r++) {
    args[r] = (struct tf_arg){comms[r], r, count, r == 0 ? timeout_ms * 9 / 10 : 0, &ready};
    pthread_create(&ts[r], NULL, tf_main, &args[r]);
  }
  for (int r = 0; r < 4; r++) {
    pthread_join(ts[r], NULL);
  }
  pthread_barrier_destroy(&ready);
  say("all ranks returned\n");
  for (int r = 0; r < 4; r++) {
    ncclCommDestroy(comms[r]);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* reuseid: a communicator of N1 ranks from one unique id (destroyed
 * first if DESTROY), then one of N2 ranks from the same id. */

struct init_arg {
  ncclUniqueId id;
  int n, rank;
  ncclComm_t comm;
  const char *what;
};

static void *init_main(void *p) {
  struct init_arg *a = p;
  report(a->rank, a->what, ncclCommInitRank(&a->comm, a->n, a->id, a->rank));
  return NULL;
}

static void *init_quiet(void *p) {
  struct init_arg *a = p;
  ncclCommInitRank(&a->comm, a->n, a->id, a->rank);
  return NULL;
}

static void init_threads(ncclUniqueId id, int n, const char *what, ncclComm_t *out) {
  struct init_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  for (int r = 0; r < n; r++) {
    args[r] = (struct init_arg){.id = id, .n = n, .rank = r, .what = what};
    pthread_create(&ts[r], NULL, init_main, &args[r]);
  }
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
    out[r] = args[r].comm;
  }
  free(args);
  free(ts);
}

static int reuseid(int n1, int n2, int destroy) {
  ncclUniqueId id;
  if (report(-1, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclComm_t first[64] = {0}, second[64] = {0};
  init_threads(id, n1, "first ncclCommInitRank", first);
  for (int r = 0; destroy && r < n1; r++) {
    if (first[r] != NULL) {
      ncclCommDestroy(first[r]);
    }
  }
  init_threads(id, n2, "second ncclCommInitRank", second);
  for (int r = 0; r < n2; r++) {
    if (second[r] != NULL) {
      ncclCommDestroy(second[r]);
    }
  }
  for (int r = 0; !destroy && r < n1; r++) {
    if (first[r] != NULL) {
      ncclCommDestroy(first[r]);
    }
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* refusedfds: N unique ids, each refused by an init for its arguments
 * (rank 2 of 2, then nranks 0), which leaves the id unspent: an init of
 * one rank then makes a communicator of it, destroyed at once. */

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (d == NULL) {
    return -1;
  }
  while (readdir(d) != NULL) {
    n++;
  }
  closedir(d);
  return n;
}

static int refusedfds(int n) {
  /* One first, so that the library's own descriptors are counted. */
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclGetUniqueId(&id);
  report(0, "first refused init", ncclCommInitRank(&comm, 2, id, 2));
  report(0, "init after the refused one", ncclCommInitRank(&comm, 1, id, 0));
  if (comm != NULL) {
    ncclCommDestroy(comm);
  }
  int before = open_fds();
  int refused = 0, made = 0;
  for (int i = 0; i < n; i++) {
    ncclResult_t g = ncclGetUniqueId(&id);
    if (g != ncclSuccess) {
      report(0, "ncclGetUniqueId", g);
      return 1;
    }
    refused += ncclCommInitRank(&comm, 2, id, 2) == ncclInvalidArgument && ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument;
    comm = NULL;
    if (ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess) {
      made++;
    }
  }
  say("rank 0: %d of %d inits refused, %d of their ids then made a communicator, %d descriptors more\n", refused, n, made,
      open_fds() - before);
  return 0;
}

/* finishedfds: N communicators of two ranks (threads), made and
 * destroyed: the fds left open. */
static int finishedfds(int n) {
  int before = -1;
  for (int i = 0; i <= n; i++) {
    if (i == 1) {
      before = open_fds(); /* after one round: the library's own are counted */
    }
    ncclUniqueId id;
    ncclResult_t g = ncclGetUniqueId(&id);
    if (g != ncclSuccess) {
      report(0, "ncclGetUniqueId", g);
      return 1;
    }
    ncclComm_t comms[2] = {0};
    struct init_arg args[2];
    pthread_t ts[2];
    for (int r = 0; r < 2; r++) {
      args[r] = (struct init_arg){.id = id, .n = 2, .rank = r, .what = "ncclCommInitRank"};
      pthread_create(&ts[r], NULL, init_quiet, &args[r]);
    }
    for (int r = 0; r < 2; r++) {
      pthread_join(ts[r], NULL);
      comms[r] = args[r].comm;
    }
    for (int r = 0; r < 2; r++) {
      if (comms[r] == NULL || ncclCommDestroy(comms[r]) != ncclSuccess) {
        say("rank %d: round %d failed: %s\n", r, i, mscclgoGetLastError());
        return 1;
      }
    }
  }
  say("rank 0: %d communicators made and destroyed, %d descriptors more\n", n, open_fds() - before);
  return 0;
}

/* ------------------------------------------------------------------ */
/* samedev: two ranks as threads of this process that never chose a
 * device (no cudaSetDevice: both are on device 0). */

static int samedev(void) {
  ncclUniqueId id;
  if (report(-1, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  ncclComm_t comms[2] = {0};
  init_threads(id, 2, "ncclCommInitRank", comms);
  for (int r = 0; r < 2; r++) {
    if (comms[r] != NULL) {
      ncclCommDestroy(comms[r]);
    }
  }
  return 0;
}

/* peak_kib is this process's peak resident memory in KiB: VmHWM of
 * /proc/self/status, which starts afresh at exec, not getrusage's
 * ru_maxrss, which Linux keeps across exec: a child that the Go test
 * binary starts (with vfork, sharing its memory until the exec) would
 * report the test binary's peak. ru_maxrss where there is no VmHWM. */
static long peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f != NULL) {
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL) {
      if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) {
        break;
      }
    }
    fclose(f);
    if (kib >= 0) {
      return kib;
    }
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static int initall(int ndev) {
  ncclComm_t comm[4];
  /* The array is the caller's: a huge ndev is refused before it is used. */
  report(0, "ncclCommInitAll", ncclCommInitAll(comm, ndev, NULL));
  say("rank 0: peak memory %ld MiB\n", peak_kib() / 1024);
  return 0;
}

static int env(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int version = 0;
  report(0, "ncclGetVersion", ncclGetVersion(&version));
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 0;
  }
  float x[16] = {0};
  report(0, "ncclAllReduce", ncclAllReduce(x, x, 16, ncclFloat, ncclSum, comm, NULL));
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}

static int abortonly(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess ||
      report(0, "ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess) {
    return 1;
  }
  report(0, "ncclCommAbort", ncclCommAbort(comm));
  report(0, "ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}

static int simgroup(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (report(0, "ncclGetUniqueId", ncclGetUniqueId(&id)) != ncclSuccess) {
    return 1;
  }
  report(0, "ncclGroupStart", ncclGroupStart());
  report(0, "ncclCommInitRank in the group", ncclCommInitRank(&comm, 1, id, 0));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  report(0, "ncclGroupSimulateEnd", ncclGroupSimulateEnd(&sim));
  report(0, "ncclGroupStart", ncclGroupStart());
  report(0, "empty group's ncclGroupEnd", ncclGroupEnd());
  int n = 0;
  report(0, "ncclCommCount of the simulated init", ncclCommCount(comm, &n));
  return 0;
}

/* ------------------------------------------------------------------ */
/* mscclgo.h's communicator (a world of one, from an empty environment). */

static const char *select_empty(const mscclgoRequest_t *req, void *user) {
  (void)req;
  (void)user;
  return "";
}

static const char *select_null(const mscclgoRequest_t *req, void *user) {
  (void)req;
  (void)user;
  return NULL;
}

static int custom(const char *mode, const char *arg) {
  mscclgoComm_t comm = NULL;
  if (report(0, "mscclgoCommInitEnv", mscclgoCommInitEnv(&comm)) != ncclSuccess) {
    return 1;
  }
  float x[64];
  memset(x, PATTERN, sizeof x);
  if (strcmp(mode, "selector") == 0) {
    report(0, "mscclgoSetSelector",
           mscclgoSetSelector(comm, strcmp(arg, "EMPTY") == 0 ? select_empty : select_null, NULL));
    char name[64];
    report(0, "mscclgoSelect", mscclgoSelect(comm, "allreduce", NULL, x, x, 64, ncclFloat, name, sizeof name));
  } else if (strcmp(mode, "register") == 0) {
    int n = 0;
    report(0, "mscclgoRegisterPlan", mscclgoRegisterPlan(comm, arg, &n));
  } else {
    report(0, "mscclgoExecute", mscclgoExecute(comm, "allreduce", NULL, x, x, strtoull(arg, NULL, 0), ncclFloat, NULL));
    int changed = 0;
    for (size_t i = 0; i < sizeof x; i++) {
      changed |= ((unsigned char *)x)[i] != PATTERN;
    }
    say("rank 0: data %s\n", changed ? "CHANGED" : "untouched");
  }
  report(0, "mscclgoCommDestroy", mscclgoCommDestroy(comm));
  report(0, "mscclgoCommDestroy again", mscclgoCommDestroy(comm));
  return 0;
}

/* ------------------------------------------------------------------ */
/* sigwait: main blocks SIGTERM (after the library was loaded, as a
 * program linked with it does), makes two communicators of two ranks as
 * threads, one nonblocking, and runs an allreduce on them (the runtime
 * starts threads); then it counts the threads of the process that do not
 * block SIGTERM, sends SIGTERM to the process and waits for it. Killed
 * by it, the process prints nothing more and exits by the signal. */

/* unblocked_threads counts the threads of this process whose mask lacks
 * SIGTERM (/proc/self/task/T/status, SigBlk), of *all. */
static int unblocked_threads(int *all) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  *all = 0;
  if (d == NULL) {
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') {
      continue;
    }
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
      continue; /* the thread ended */
    }
    while (fgets(line, sizeof line, f) != NULL) {
      unsigned long long blk;
      if (sscanf(line, "SigBlk: %llx", &blk) == 1) {
        (*all)++;
        n += (blk & (1ULL << (SIGTERM - 1))) == 0;
      }
    }
    fclose(f);
  }
  closedir(d);
  return n;
}

struct sig_arg {
  ncclComm_t comm;
  int rank;
  float buf[256];
};

static void *sig_main(void *p) {
  struct sig_arg *a = p;
  report(a->rank, "ncclAllReduce", ncclAllReduce(a->buf, a->buf, 256, ncclFloat, ncclSum, a->comm, NULL));
  return NULL;
}

static int sigwaiter(void) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, NULL);
  ncclComm_t comms[2] = {0};
  if (report(-1, "ncclCommInitAll", ncclCommInitAll(comms, 2, NULL)) != ncclSuccess) {
    return 1;
  }
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t nb = NULL;
  report(0, "nonblocking ncclCommInitRankConfig", ncclCommInitRankConfig(&nb, 1, id, 0, &config));
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 10000 && state == ncclInProgress; i++) {
    ncclCommGetAsyncError(nb, &state);
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  report(0, "the nonblocking init", state);
  struct sig_arg args[2];
  pthread_t ts[2];
  for (int r = 0; r < 2; r++) {
    args[r].comm = comms[r];
    args[r].rank = r;
    for (int i = 0; i < 256; i++) {
      args[r].buf[i] = 1;
    }
    pthread_create(&ts[r], NULL, sig_main, &args[r]);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(ts[r], NULL);
  }
  int all = 0;
  int open = unblocked_threads(&all);
  say("threads that do not block SIGTERM: %d of %d\n", open, all);
  kill(getpid(), SIGTERM);
  struct timespec bound = {10, 0};
  int got = sigtimedwait(&term, NULL, &bound);
  say("sigtimedwait: %s\n", got == SIGTERM ? "SIGTERM" : strerror(errno));
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  say("main still blocks SIGTERM: %d\n", sigismember(&now, SIGTERM));
  ncclCommDestroy(nb);
  for (int r = 0; r < 2; r++) {
    ncclCommDestroy(comms[r]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hostile MODE ARGS (see hostile.c)\n");
    return 2;
  }
  const char *m = argv[1];
  if (strcmp(m, "call") == 0 && argc == 8) {
    return call(atoi(argv[2]), argv[3], (size_t)strtoull(argv[4], NULL, 0), atoi(argv[5]), (int)strtol(argv[6], NULL, 0),
                atoi(argv[7]));
  }
  if (strcmp(m, "zero") == 0 && argc == 3) {
    return zero(atoi(argv[2]));
  }
  if (strcmp(m, "ends") == 0 && argc >= 5 && argc - 4 <= 8) {
    return ends(strcmp(argv[2], "par") == 0, atoi(argv[3]), argc - 4, argv + 4);
  }
  if (strcmp(m, "abortwait") == 0) {
    return abortwait();
  }
  if (strcmp(m, "timeoutfree") == 0 && argc == 3) {
    return timeoutfree((size_t)strtoull(argv[2], NULL, 0));
  }
  if (strcmp(m, "reuseid") == 0 && argc == 5) {
    return reuseid(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  }
  if (strcmp(m, "refusedfds") == 0 && argc == 3) {
    return refusedfds(atoi(argv[2]));
  }
  if (strcmp(m, "finishedfds") == 0 && argc == 3) {
    return finishedfds(atoi(argv[2]));
  }
  if (strcmp(m, "samedev") == 0) {
    return samedev();
  }
  if (strcmp(m, "initall") == 0 && argc == 3) {
    return initall((int)strtol(argv[2], NULL, 0));
  }
  if (strcmp(m, "env") == 0) {
    return env();
  }
  if (strcmp(m, "abortonly") == 0) {
    return abortonly();
  }
  if (strcmp(m, "sigwait") == 0) {
    return sigwaiter();
  }
  if (strcmp(m, "simgroup") == 0) {
    return simgroup();
  }
  if ((strcmp(m, "selector") == 0 || strcmp(m, "register") == 0 || strcmp(m, "execute") == 0) && argc == 3) {
    return custom(m, argv[2]);
  }
  fprintf(stderr, "hostile: unknown mode %s or wrong arguments\n", m);
  return 2;
}
