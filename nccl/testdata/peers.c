/*
 * peers: a C caller whose peers come late, leave, abort or loop, for
 * peers_test.go (issue 44's late and lost peers, aborts, crashes and
 * leaks). Each mode prints what the library answered:
 *
 *   rank R: WHAT -> CODE [in S s]   the ncclResult_t of a call, and its time
 *   rank R: WHAT error: MSG         the calling thread's last error
 *
 * and exits 0 unless it could not set the case up. Modes of a job of
 * processes read RANK and WORLD_SIZE, and hand the unique id over in the
 * file PEERS_ID_FILE. Buffers are the emulated device's shared memory
 * (mscclgoEmuMalloc) in its build, host memory otherwise (run those with
 * MSCCLGO_NCCL_HOSTMEM=1).
 *
 *   peers late WHERE MS CALLS     the last rank sleeps MS before its init (WHERE init)
 *                                 or before its second call (WHERE call); every rank
 *                                 makes CALLS allreduces of 1024 floats and checks them
 *   peers lost HOW AT QUEUED      processes: rank 1 leaves after AT calls (HOW destroy,
 *                                 abort or kill: SIGKILL of itself); rank 0 makes AT
 *                                 calls, then QUEUED more, then synchronizes its stream
 *   peers mismatch AT             processes: AT matching allreduces, then rank 0 calls
 *                                 an allreduce and the others an allgather
 *   peers abortsteady N MS WHICH  threads: N ranks make steady allreduces; after MS
 *                                 the main thread aborts every communicator (WHICH
 *                                 all), or rank 0's, and the others MS later (one);
 *                                 async: all, the ranks synchronizing every 64 calls
 *   peers abortsignal MODE        threads: 2 ranks; rank 0 calls (rank 1 never does,
 *                                 MODE wait) or both make steady calls (MODE steady);
 *                                 a thread that waits for SIGUSR1 with sigwait aborts
 *                                 both communicators when it comes
 *   peers cycles N [abort]        threads: N cycles of a 2-rank ncclCommInitAll, one
 *                                 allreduce and ncclCommDestroy (or ncclCommAbort);
 *                                 prints the RSS, the descriptors and the threads
 *   peers sigstorm CALLS          threads: 2 ranks make CALLS allreduces, each checked,
 *                                 while the main thread sends their threads SIGUSR2 (a
 *                                 handler without SA_RESTART or SA_ONSTACK) every
 *                                 millisecond
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclgo.h"
#include "nccl.h"

#define JOB_PROG "peers"
#include "jobid.h"

enum { COUNT = 1024 };

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* report prints what call WHAT of rank answered, how long it took since
 * start, and its error. */
static ncclResult_t report(int rank, const char *what, ncclResult_t r, double start) {
  pthread_mutex_lock(&out_mu);
  printf("rank %d: %s -> %d in %.2f s\n", rank, what, (int)r, now() - start);
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

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v == NULL ? -1 : atoi(v);
}

/* The emulated device's stand-ins, found at run time (NULL in the host
 * build). */
static int (*emu_malloc)(uintptr_t *, size_t);
static int (*emu_sync)(int, void *);

static void find_emu(void) {
  *(void **)(&emu_malloc) = dlsym(RTLD_DEFAULT, "mscclgoEmuMalloc");
  *(void **)(&emu_sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
}

static float *alloc_floats(size_t n) {
  if (emu_malloc != NULL) {
    uintptr_t p = 0;
    if (emu_malloc(&p, n * sizeof(float)) != 0) {
      fprintf(stderr, "peers: mscclgoEmuMalloc: %s\n", mscclgoGetLastError());
      exit(2);
    }
    return (float *)p;
  }
  float *p = calloc(n, sizeof(float));
  if (p == NULL) {
    exit(2);
  }
  return p;
}

/* sync waits for the stream's work on the emulated device; 0 elsewhere
 * (host-memory calls return when they are done). */
static ncclResult_t sync_stream(int dev) {
  if (getenv("RANK") != NULL) {
    dev = 0; /* a process's rank is on its device 0 */
  }
  if (emu_sync == NULL) {
    return ncclSuccess;
  }
  return emu_sync(dev, NULL) == 0 ? ncclSuccess : ncclInternalError;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------------ */
/* A job of processes. */

/* join makes this process's rank of the job; delay_ms is slept first
 * (after rank 0 published the id). */
static int join(ncclComm_t *comm, int *rank, int *n, int delay_ms, double start) {
  *rank = env_int("RANK");
  *n = env_int("WORLD_SIZE");
  const char *file = getenv("PEERS_ID_FILE");
  if (*rank < 0 || *n < 1 || file == NULL) {
    fprintf(stderr, "peers: RANK, WORLD_SIZE and PEERS_ID_FILE must be set\n");
    return 2;
  }
  ncclUniqueId id;
  if (*rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess || put_id(file, &id) != 0) {
      return 2;
    }
  } else if (get_id(file, *rank, &id) != 0) {
    return 2;
  }
  if (delay_ms > 0) {
    sleep_ms(delay_ms);
  }
  if (report(*rank, "ncclCommInitRank", ncclCommInitRank(comm, *n, id, *rank), start) != ncclSuccess) {
    return 1;
  }
  return 0;
}

static void fill(float *b, int rank) {
  for (int i = 0; i < COUNT; i++) {
    b[i] = (float)(rank + 1) + (float)(i % 7);
  }
}

/* check says whether b holds the sum of fill over n ranks. */
static int check(const float *b, int n) {
  for (int i = 0; i < COUNT; i++) {
    float want = (float)(n * (n + 1) / 2) + (float)(n * (i % 7));
    if (b[i] != want) {
      return 0;
    }
  }
  return 1;
}

static int late(const char *where, int ms, int calls) {
  double start = now();
  int rank = env_int("RANK"), n = env_int("WORLD_SIZE");
  int me_late = rank == n - 1;
  ncclComm_t comm;
  int bad = join(&comm, &rank, &n, me_late && strcmp(where, "init") == 0 ? ms : 0, start);
  if (bad != 0) {
    return bad;
  }
  float *buf = alloc_floats(COUNT);
  int failed = 0;
  for (int k = 0; k < calls; k++) {
    if (me_late && k == 1 && strcmp(where, "call") == 0) {
      sleep_ms(ms);
    }
    fill(buf, rank);
    char what[64];
    snprintf(what, sizeof what, "allreduce %d", k);
    double t0 = now();
    ncclResult_t r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (r == ncclSuccess) {
      r = sync_stream(rank);
    }
    report(rank, what, r, t0);
    if (r != ncclSuccess) {
      failed = 1;
      break;
    }
    if (!check(buf, n)) {
      say("rank %d: allreduce %d WRONG\n", rank, k);
    }
  }
  if (!failed) {
    say("rank %d: %d calls right\n", rank, calls);
  }
  report(rank, "ncclCommDestroy", ncclCommDestroy(comm), start);
  return 0;
}

/* matched_file is PEERS_ID_FILE's name with ".matched": rank 0 creates
 * it once its matching calls of lost() returned, and rank 1 waits for it
 * (at most 30 s) before it is lost. A call of rank 1 can return before
 * rank 0's has (its part done), and a loss then would fail rank 0's
 * matching call, not the queued ones the case is about. */
static int matched_file(char *path, size_t size) {
  const char *file = getenv("PEERS_ID_FILE");
  if (file == NULL) {
    return 0;
  }
  snprintf(path, size, "%s.matched", file);
  return 1;
}

static int lost(const char *how, int at, int queued) {
  double start = now();
  int rank, n;
  ncclComm_t comm;
  int bad = join(&comm, &rank, &n, 0, start);
  if (bad != 0) {
    return bad;
  }
  float *buf = alloc_floats(COUNT);
  for (int k = 0; k < at; k++) {
    fill(buf, rank);
    ncclResult_t r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (r == ncclSuccess) {
      r = sync_stream(rank);
    }
    if (r != ncclSuccess) {
      report(rank, "a matching call", r, start);
      return 1;
    }
  }
  say("rank %d: %d calls done\n", rank, at);
  char matched[4096];
  int handshake = matched_file(matched, sizeof matched);
  if (handshake && rank == 0) {
    int fd = open(matched, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      close(fd);
    }
  }
  if (rank == 1) {
    for (int waited = 0; handshake && access(matched, F_OK) != 0; waited += 10) {
      if (waited >= 30000) {
        say("rank 1: waited 30 s for rank 0's matching calls to return (%s)\n", matched);
        return 1;
      }
      sleep_ms(10);
    }
    if (strcmp(how, "kill") == 0) {
      raise(SIGKILL);
    } else if (strcmp(how, "abort") == 0) {
      report(rank, "ncclCommAbort", ncclCommAbort(comm), start);
    } else {
      report(rank, "ncclCommDestroy", ncclCommDestroy(comm), start);
    }
    return 0;
  }
  if (rank != 0) {
    /* Ranks past 1 wait for rank 0 in their next call. */
    report(rank, "the call after the loss", ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL), start);
    report(rank, "its sync", sync_stream(rank), start);
    report(rank, "ncclCommAbort", ncclCommAbort(comm), start);
    return 0;
  }
  double t0 = now();
  int refused = 0, first = -1;
  for (int k = 0; k < queued; k++) {
    ncclResult_t r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (r != ncclSuccess) {
      if (first < 0) {
        first = k;
        report(rank, "a queued call", r, t0);
      }
      refused++;
    }
  }
  say("rank 0: %d of %d queued calls refused (the first at %d) in %.2f s\n", refused, queued, first, now() - t0);
  report(rank, "its sync", sync_stream(rank), t0);
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  say("rank 0: async error %d: %s\n", (int)async, ncclGetLastError(comm));
  report(rank, "ncclCommAbort", ncclCommAbort(comm), t0);
  return 0;
}

static int mismatch(int at) {
  double start = now();
  int rank, n;
  ncclComm_t comm;
  int bad = join(&comm, &rank, &n, 0, start);
  if (bad != 0) {
    return bad;
  }
  float *buf = alloc_floats((size_t)COUNT * (size_t)n);
  for (int k = 0; k < at; k++) {
    fill(buf, rank);
    ncclResult_t r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (r == ncclSuccess) {
      r = sync_stream(rank);
    }
    if (r != ncclSuccess) {
      report(rank, "a matching call", r, start);
      return 1;
    }
  }
  say("rank %d: %d matching calls done\n", rank, at);
  double t0 = now();
  ncclResult_t r;
  if (rank == 0) {
    r = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, NULL);
  } else {
    r = ncclAllGather(buf, buf, COUNT, ncclFloat, comm, NULL);
  }
  if (r == ncclSuccess) {
    r = sync_stream(rank);
  }
  if (r == ncclSuccess) {
    ncclCommGetAsyncError(comm, &r);
  }
  report(rank, "the mismatched call", r, t0);
  report(rank, "ncclCommAbort", ncclCommAbort(comm), t0);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Ranks as threads. */

struct steady_arg {
  ncclComm_t comm;
  int rank;
  float *buf;
  volatile int *stop;
  int calls;
  ncclResult_t last;
  int nosync; /* synchronize every 64 calls only: launches queue */
  char err[768]; /* the failed call's error (the thread's own) */
};

/* steady_say prints how the rank's steady calls ended. */
static void steady_say(const struct steady_arg *a) {
  if (a->last == ncclSuccess) {
    say("rank %d: %d steady calls, the last -> 0\n", a->rank, a->calls);
  } else {
    say("rank %d: %d steady calls, the last -> %d: %s\n", a->rank, a->calls, (int)a->last, a->err);
  }
}

static void *steady_main(void *p) {
  struct steady_arg *a = p;
  while (!*a->stop) {
    ncclResult_t r = ncclAllReduce(a->buf, a->buf, COUNT, ncclFloat, ncclSum, a->comm, NULL);
    if (r == ncclSuccess && (!a->nosync || a->calls % 64 == 63)) {
      r = sync_stream(a->rank);
    }
    a->last = r;
    if (r != ncclSuccess) {
      snprintf(a->err, sizeof a->err, "%s", mscclgoGetLastError());
      break;
    }
    a->calls++;
  }
  return NULL;
}

/* spawn runs f(arg) on a new thread with a 1 MiB stack (the default
 * stack, RLIMIT_STACK's 8 MiB, is address space a ulimit -v case needs
 * for the library's allocations); a thread the system refuses (a
 * resource limit) ends the program: the case could not be set up. */
static void spawn(pthread_t *t, void *(*f)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  int e = pthread_create(t, &attr, f, arg);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    fprintf(stderr, "peers: pthread_create: %s\n", strerror(e));
    exit(2);
  }
}

static int init_all(ncclComm_t *comms, int n, double start) {
  int *devs = calloc((size_t)n, sizeof *devs);
  for (int i = 0; i < n; i++) {
    devs[i] = i;
  }
  ncclResult_t r = ncclCommInitAll(comms, n, devs);
  free(devs);
  if (r != ncclSuccess) {
    report(-1, "ncclCommInitAll", r, start);
    return 1;
  }
  return 0;
}

static int abortsteady(int n, int ms, int one, int async) {
  double start = now();
  ncclComm_t comms[8];
  if (n < 1 || n > 8 || init_all(comms, n, start) != 0) {
    return 2;
  }
  volatile int stop = 0;
  struct steady_arg args[8];
  pthread_t ts[8];
  for (int r = 0; r < n; r++) {
    args[r] = (struct steady_arg){comms[r], r, alloc_floats(COUNT), &stop, 0, ncclSuccess, async, ""};
    spawn(&ts[r], steady_main, &args[r]);
  }
  sleep_ms(ms);
  double t0 = now();
  for (int r = 0; r < n; r++) {
    report(r, "ncclCommAbort", ncclCommAbort(comms[r]), t0);
    if (r == 0 && one) {
      /* The other ranks go on calling a while, their peer gone. */
      sleep_ms(ms);
    }
  }
  stop = 1;
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
  }
  int calls = 0;
  for (int r = 0; r < n; r++) {
    calls += args[r].calls;
    steady_say(&args[r]);
  }
  say("all ranks returned in %.2f s after %d calls\n", now() - t0, calls);
  return 0;
}

struct sig_arg {
  ncclComm_t *comms;
  sigset_t set;
};

static void *signal_main(void *p) {
  struct sig_arg *a = p;
  int sig = 0;
  sigwait(&a->set, &sig);
  double t0 = now();
  report(0, "ncclCommAbort from the signal thread", ncclCommAbort(a->comms[0]), t0);
  report(1, "ncclCommAbort from the signal thread", ncclCommAbort(a->comms[1]), t0);
  return NULL;
}

static int abortsignal(const char *mode) {
  double start = now();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  ncclComm_t comms[2];
  if (init_all(comms, 2, start) != 0) {
    return 2;
  }
  struct sig_arg sa = {comms, set};
  pthread_t sigt;
  spawn(&sigt, signal_main, &sa);
  volatile int stop = 0;
  struct steady_arg args[2];
  pthread_t ts[2];
  int ranks = strcmp(mode, "wait") == 0 ? 1 : 2;
  for (int r = 0; r < ranks; r++) {
    args[r] = (struct steady_arg){comms[r], r, alloc_floats(COUNT), &stop, 0, ncclSuccess, 0, ""};
    spawn(&ts[r], steady_main, &args[r]);
  }
  sleep_ms(500);
  double t0 = now();
  /* To the signal thread itself: the runtime's own threads may not keep
   * the mask (a separate issue). */
  pthread_kill(sigt, SIGUSR1);
  pthread_join(sigt, NULL);
  stop = 1;
  for (int r = 0; r < ranks; r++) {
    pthread_join(ts[r], NULL);
  }
  say("all ranks returned in %.2f s after the signal\n", now() - t0);
  return 0;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) {
    return -1;
  }
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
      break;
    }
  }
  fclose(f);
  return kib;
}

/* count_fds is the number of the process's open descriptors. */
static int count_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 4096; fd++) {
    if (fcntl(fd, F_GETFD) != -1) {
      n++;
    }
  }
  return n;
}

/* threads is the process's thread count. */
static long threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) {
    return -1;
  }
  char line[256];
  long n = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "Threads: %ld", &n) == 1) {
      break;
    }
  }
  fclose(f);
  return n;
}

struct cycle_arg {
  ncclComm_t comm;
  int rank;
  float *buf;
  ncclResult_t r;
};

static void *cycle_main(void *p) {
  struct cycle_arg *a = p;
  fill(a->buf, a->rank);
  a->r = ncclAllReduce(a->buf, a->buf, COUNT, ncclFloat, ncclSum, a->comm, NULL);
  if (a->r == ncclSuccess) {
    a->r = sync_stream(a->rank);
  }
  return NULL;
}

static int cycles(int n, int abort) {
  double start = now();
  float *bufs[2] = {alloc_floats(COUNT), alloc_floats(COUNT)};
  long warm = 0, warm_threads = 0;
  int warm_fds = 0;
  int warmup = n / 6 > 0 ? n / 6 : 1;
  for (int i = 0; i < n + warmup; i++) {
    if (i == warmup) {
      warm = rss_kib();
      warm_fds = count_fds();
      warm_threads = threads();
    }
    ncclComm_t comms[2];
    if (init_all(comms, 2, start) != 0) {
      return 1;
    }
    struct cycle_arg args[2];
    pthread_t ts[2];
    for (int r = 0; r < 2; r++) {
      args[r] = (struct cycle_arg){comms[r], r, bufs[r], ncclSuccess};
      spawn(&ts[r], cycle_main, &args[r]);
    }
    for (int r = 0; r < 2; r++) {
      pthread_join(ts[r], NULL);
      if (args[r].r != ncclSuccess) {
        report(r, "allreduce", args[r].r, start);
        return 1;
      }
      if (!check(bufs[r], 2)) {
        say("rank %d: cycle %d WRONG\n", r, i);
      }
    }
    for (int r = 0; r < 2; r++) {
      ncclResult_t e = abort ? ncclCommAbort(comms[r]) : ncclCommDestroy(comms[r]);
      if (e != ncclSuccess) {
        report(r, abort ? "ncclCommAbort" : "ncclCommDestroy", e, start);
      }
    }
  }
  long end = rss_kib();
  say("%d cycles after %d: RSS %ld KiB before, %ld KiB after, %ld KiB more\n", n, warmup, warm, end, end - warm);
  int end_fds = count_fds();
  long end_threads = threads();
  say("%d cycles: %d descriptors before, %d after, %d more; %ld threads before, %ld after, %ld more\n", n, warm_fds, end_fds,
      end_fds - warm_fds, warm_threads, end_threads, end_threads - warm_threads);
  if (getenv("PEERS_SMAPS") != NULL) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "grep -E 'Rss(Anon|Shmem|File)' /proc/%d/status; awk '/^[0-9a-f]+-/{r=$0} /^Rss:/{if ($2>8000) print $2, r}' /proc/%d/smaps | sort -rn | head -12", (int)getpid(), (int)getpid());
    if (system(cmd) != 0) {
      say("no smaps\n");
    }
  }
  return 0;
}

static volatile sig_atomic_t storm_got;

static void storm_handler(int sig) {
  (void)sig;
  storm_got++;
}

struct storm_arg {
  ncclComm_t comm;
  int rank;
  float *buf;
  volatile int done;
  int calls, wrong;
  ncclResult_t last;
  char err[768];
};

static int storm_calls;

static void *storm_main(void *p) {
  struct storm_arg *a = p;
  for (int k = 0; k < storm_calls; k++) {
    fill(a->buf, a->rank);
    ncclResult_t r = ncclAllReduce(a->buf, a->buf, COUNT, ncclFloat, ncclSum, a->comm, NULL);
    if (r == ncclSuccess) {
      r = sync_stream(a->rank);
    }
    a->last = r;
    if (r != ncclSuccess) {
      snprintf(a->err, sizeof a->err, "%s", mscclgoGetLastError());
      break;
    }
    if (!check(a->buf, 2)) {
      a->wrong++;
    }
    a->calls++;
  }
  a->done = 1;
  return NULL;
}

static int sigstorm(int calls) {
  double start = now();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = storm_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: interrupted system calls fail with EINTR */
  sigaction(SIGUSR2, &sa, NULL);
  ncclComm_t comms[2];
  if (init_all(comms, 2, start) != 0) {
    return 2;
  }
  storm_calls = calls;
  struct storm_arg args[2];
  pthread_t ts[2];
  for (int r = 0; r < 2; r++) {
    args[r] = (struct storm_arg){comms[r], r, alloc_floats(COUNT), 0, 0, 0, ncclSuccess, ""};
    spawn(&ts[r], storm_main, &args[r]);
  }
  int sent = 0;
  while (!args[0].done || !args[1].done) {
    for (int r = 0; r < 2; r++) {
      if (!args[r].done && pthread_kill(ts[r], SIGUSR2) == 0) {
        sent++;
      }
    }
    sleep_ms(1);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(ts[r], NULL);
    if (args[r].wrong > 0) {
      say("rank %d: %d of %d calls WRONG\n", r, args[r].wrong, args[r].calls);
    }
    if (args[r].last == ncclSuccess) {
      say("rank %d: %d calls right\n", r, args[r].calls - args[r].wrong);
    } else {
      say("rank %d: %d calls, then -> %d: %s\n", r, args[r].calls, (int)args[r].last, args[r].err);
    }
  }
  say("%d signals sent, %d handled\n", sent, (int)storm_got);
  for (int r = 0; r < 2; r++) {
    report(r, "ncclCommDestroy", ncclCommDestroy(comms[r]), start);
  }
  return 0;
}

int main(int argc, char **argv) {
  find_emu();
  const char *m = argc > 1 ? argv[1] : "";
  if (strcmp(m, "late") == 0 && argc == 5) {
    return late(argv[2], atoi(argv[3]), atoi(argv[4]));
  }
  if (strcmp(m, "lost") == 0 && argc == 5) {
    return lost(argv[2], atoi(argv[3]), atoi(argv[4]));
  }
  if (strcmp(m, "mismatch") == 0 && argc == 3) {
    return mismatch(atoi(argv[2]));
  }
  if (strcmp(m, "abortsteady") == 0 && argc == 5) {
    return abortsteady(atoi(argv[2]), atoi(argv[3]), strcmp(argv[4], "one") == 0, strcmp(argv[4], "async") == 0);
  }
  if (strcmp(m, "abortsignal") == 0 && argc == 3) {
    return abortsignal(argv[2]);
  }
  if (strcmp(m, "cycles") == 0 && (argc == 3 || (argc == 4 && strcmp(argv[3], "abort") == 0))) {
    return cycles(atoi(argv[2]), argc == 4);
  }
  if (strcmp(m, "sigstorm") == 0 && argc == 3) {
    return sigstorm(atoi(argv[2]));
  }
  fprintf(stderr, "usage: peers late init|call MS CALLS | lost destroy|abort|kill AT QUEUED | mismatch AT | abortsteady N MS all|one|async | abortsignal wait|steady | cycles N [abort] | sigstorm CALLS\n");
  return 2;
}
