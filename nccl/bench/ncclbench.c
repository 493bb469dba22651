/*
 * ncclbench: the host time of a library call until it returns, as a
 * framework's thread sees it (make nccl-bench). One run prints one row:
 *
 *   ncclbench threads N BYTES ITERS   N ranks as threads (ncclCommInitAll)
 *   ncclbench procs N BYTES ITERS     N ranks as processes of this host
 *                                     (ncclCommInitRank, the unique id
 *                                     through a file)
 *
 * Each rank makes ITERS in-place float sum ncclAllReduce calls of BYTES
 * on its default stream and, as a no-op reference, as many
 * ncclCommGetAsyncError calls. Only the call is timed: after each
 * allreduce the rank waits for its stream (untimed), so the kernel's
 * time on the (emulated) device is excluded, and the next call is the
 * steady state. Buffers are the emulated device's shareable memory
 * (mscclgoEmuMalloc) where the library has it, else host memory. The row
 * gives, for the allreduce, the mean over ranks of each rank's median
 * time per call, the slowest rank's median, and the mean over ranks of
 * the means (a shared machine's preemptions weigh on means), and the
 * mean over ranks of each rank's median CPU time of the calling thread
 * per call (CLOCK_THREAD_CPUTIME_ID: the call's own work, without the
 * time the thread waited for a core while other ranks' processes and
 * the emulated kernels ran); for the no-op, the mean. A last allreduce on known data is checked. MSCCLGO_NCCL_MEET_EVERY_CALL=1 in the environment
 * measures the old per-call meeting (the baseline).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

extern char **environ;

#define WARMUP 20

static double clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static double cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* clock_cost is the median CPU time between two readings of the thread's
 * CPU clock (a system call, unlike the monotonic clock): what a call's
 * bracket adds to its CPU time. */
static double clock_cost(void) {
  enum { N = 201 };
  double d[N];
  for (int i = 0; i < N; i++) {
    double a = cpu_ns();
    d[i] = cpu_ns() - a;
  }
  qsort(d, N, sizeof d[0], cmp_double);
  return d[N / 2];
}

/* result is one rank's median and mean ns per call. */
struct result {
  double allreduce, mean, cpu, noop;
  int failed;
};


static int stream_sync(ncclComm_t comm) {
  int dev = 0;
  ncclCommCuDevice(comm, &dev);
  int (*sync)(int, void *) = NULL;
  *(void **)(&sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
  return sync == NULL ? 0 : sync(dev, NULL);
}

static void *buf_alloc(size_t bytes) {
  int (*emu_malloc)(uintptr_t *, size_t) = NULL;
  *(void **)(&emu_malloc) = dlsym(RTLD_DEFAULT, "mscclgoEmuMalloc");
  if (emu_malloc == NULL) {
    return calloc(1, bytes);
  }
  uintptr_t p = 0;
  return emu_malloc(&p, bytes) == 0 ? (void *)p : NULL;
}

static void buf_free(void *p) {
  void (*emu_free)(uintptr_t) = NULL;
  *(void **)(&emu_free) = dlsym(RTLD_DEFAULT, "mscclgoEmuFree");
  if (emu_free == NULL) {
    free(p);
  } else {
    emu_free((uintptr_t)p);
  }
}

static int check(int rank, const char *what, ncclResult_t r, ncclComm_t comm) {
  if (r != ncclSuccess) {
    fprintf(stderr, "ncclbench: rank %d: %s: %s: %s\n", rank, what, ncclGetErrorString(r), ncclGetLastError(comm));
    return 1;
  }
  return 0;
}

/* measure runs one rank's calls. */
static struct result measure(ncclComm_t comm, int rank, size_t bytes, int iters) {
  struct result res = {0, 0, 0, 0, 1};
  size_t count = bytes / sizeof(float);
  float *buf = buf_alloc(bytes);
  if (buf == NULL) {
    fprintf(stderr, "ncclbench: rank %d: no memory for %zu bytes\n", rank, bytes);
    return res;
  }
  double total = 0;
  double *times = calloc((size_t)iters, sizeof *times);
  double *cpus = calloc((size_t)iters, sizeof *cpus);
  for (int i = 0; i < WARMUP + iters; i++) {
    double c0 = cpu_ns();
    double t0 = now_ns();
    ncclResult_t r = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    double t1 = now_ns();
    double c1 = cpu_ns();
    if (check(rank, "ncclAllReduce", r, comm) != 0) {
      goto out;
    }
    if (stream_sync(comm) != 0) {
      fprintf(stderr, "ncclbench: rank %d: stream: %s\n", rank, ncclGetLastError(comm));
      goto out;
    }
    if (i >= WARMUP) {
      total += t1 - t0;
      times[i - WARMUP] = t1 - t0;
      cpus[i - WARMUP] = c1 - c0;
    }
  }
  /* One more call on known data, checked (the emulated device's memory
   * is host memory): the timed calls were right too, or this is wrong. */
  int n = 0;
  ncclCommCount(comm, &n);
  for (size_t i = 0; i < count; i++) {
    buf[i] = (float)(rank + 1);
  }
  if (check(rank, "ncclAllReduce (checked)", ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL), comm) != 0 ||
      stream_sync(comm) != 0) {
    goto out;
  }
  for (size_t i = 0; i < count; i++) {
    if (buf[i] != (float)(n * (n + 1) / 2)) {
      fprintf(stderr, "ncclbench: rank %d: WRONG: element %zu is %g, want %d\n", rank, i, (double)buf[i], n * (n + 1) / 2);
      goto out;
    }
  }
  qsort(times, (size_t)iters, sizeof *times, cmp_double);
  res.allreduce = times[iters / 2];
  qsort(cpus, (size_t)iters, sizeof *cpus, cmp_double);
  res.cpu = cpus[iters / 2] - clock_cost();
  res.mean = total / iters;
  ncclResult_t async = ncclSuccess;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    ncclCommGetAsyncError(comm, &async);
  }
  res.noop = (now_ns() - t0) / iters;
  if (check(rank, "async error", async, comm) == 0) {
    res.failed = 0;
  }
out:
  free(times);
  free(cpus);
  buf_free(buf);
  return res;
}

struct rank_arg {
  ncclComm_t comm;
  int rank, iters;
  size_t bytes;
  struct result res;
};

static void *rank_main(void *p) {
  struct rank_arg *a = p;
  a->res = measure(a->comm, a->rank, a->bytes, a->iters);
  ncclCommDestroy(a->comm);
  return NULL;
}

static void row(const char *mode, int n, size_t bytes, const struct result *rs) {
  double sum = 0, mean = 0, worst = 0, cpu = 0, noop = 0;
  for (int r = 0; r < n; r++) {
    if (rs[r].failed) {
      printf("%-7s  %-15s  %d  %5zu  rank %d failed\n", mode, getenv("MSCCLGO_NCCL_MEET_EVERY_CALL") ? "meet every call" : "mailbox", n, bytes, r);
      return;
    }
    sum += rs[r].allreduce;
    mean += rs[r].mean;
    cpu += rs[r].cpu;
    noop += rs[r].noop;
    if (rs[r].allreduce > worst) {
      worst = rs[r].allreduce;
    }
  }
  const char *how = getenv("MSCCLGO_NCCL_MEET_EVERY_CALL") != NULL ? "meet every call" : "mailbox";
  printf("%-7s  %-15s  %d  %5zu  %10.2f  %10.2f  %10.2f  %8.2f  %8.3f\n", mode, how, n, bytes, sum / n / 1e3, worst / 1e3,
         mean / n / 1e3, cpu / n / 1e3, noop / n / 1e3);
}

static int threads(int n, size_t bytes, int iters) {
  ncclComm_t *comms = calloc((size_t)n, sizeof *comms);
  if (check(-1, "ncclCommInitAll", ncclCommInitAll(comms, n, NULL), NULL) != 0) {
    return 1;
  }
  struct rank_arg *args = calloc((size_t)n, sizeof *args);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  for (int r = 0; r < n; r++) {
    args[r] = (struct rank_arg){comms[r], r, iters, bytes, {0, 0, 0, 0, 1}};
    pthread_create(&ts[r], NULL, rank_main, &args[r]);
  }
  struct result *rs = calloc((size_t)n, sizeof *rs);
  for (int r = 0; r < n; r++) {
    pthread_join(ts[r], NULL);
    rs[r] = args[r].res;
  }
  row("threads", n, bytes, rs);
  return 0;
}

/* child is one rank of procs: it prints its result as one line. */
static int child(int rank, int n, size_t bytes, int iters, const char *file) {
  ncclUniqueId id;
  if (rank == 0) {
    if (check(rank, "ncclGetUniqueId", ncclGetUniqueId(&id), NULL) != 0) {
      return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, file) != 0) {
      perror("ncclbench: writing the unique id");
      return 1;
    }
  } else {
    for (int waited = 0;; waited++) {
      FILE *f = fopen(file, "rb");
      if (f != NULL) {
        size_t got = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (got == 1) {
          break;
        }
      }
      if (waited > 3000) {
        fprintf(stderr, "ncclbench: rank %d: no unique id in %s after 30 s\n", rank, file);
        return 1;
      }
      usleep(10000);
    }
  }
  ncclComm_t comm;
  if (check(rank, "ncclCommInitRank", ncclCommInitRank(&comm, n, id, rank), NULL) != 0) {
    return 1;
  }
  struct result res = measure(comm, rank, bytes, iters);
  ncclCommDestroy(comm);
  printf("%d %.3f %.3f %.3f %.3f\n", res.failed, res.allreduce, res.mean, res.cpu, res.noop);
  return 0;
}

static int procs(const char *self, int n, size_t bytes, int iters) {
  char file[] = "/tmp/ncclbench-A-XXXXXX";
  int fd = mkstemp(file);
  if (fd < 0) {
    perror("ncclbench: mkstemp");
    return 1;
  }
  close(fd);
  unlink(file);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  FILE **outs = calloc((size_t)n, sizeof *outs);
  for (int r = 0; r < n; r++) {
    int p[2];
    if (pipe(p) != 0) {
      perror("ncclbench: pipe");
      return 1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    char rs[16], ns[16], bs[32], is[16];
    snprintf(rs, sizeof rs, "%d", r);
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(bs, sizeof bs, "%zu", bytes);
    snprintf(is, sizeof is, "%d", iters);
    char *argv[] = {(char *)self, "child", rs, ns, bs, is, file, NULL};
    if (posix_spawn(&pids[r], self, &fa, NULL, argv, environ) != 0) {
      perror("ncclbench: spawn");
      return 1;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    outs[r] = fdopen(p[0], "r");
  }
  struct result *res = calloc((size_t)n, sizeof *res);
  int bad = 0;
  for (int r = 0; r < n; r++) {
    res[r].failed = 1;
    if (fscanf(outs[r], "%d %lf %lf %lf %lf", &res[r].failed, &res[r].allreduce, &res[r].mean, &res[r].cpu, &res[r].noop) != 5) {
      res[r].failed = 1;
    }
    fclose(outs[r]);
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      bad = 1;
    }
  }
  unlink(file);
  row("procs", n, bytes, res);
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "header") == 0) {
    printf("%-7s  %-15s  %s  %5s  %10s  %10s  %10s  %8s  %8s\n", "ranks", "peers meet", "n", "bytes", "median us", "slowest",
           "mean us", "cpu us", "noop us");
    return 0;
  }
  if (argc == 7 && strcmp(argv[1], "child") == 0) {
    return child(atoi(argv[2]), atoi(argv[3]), (size_t)atoll(argv[4]), atoi(argv[5]), argv[6]);
  }
  if (argc != 5 || (strcmp(argv[1], "threads") != 0 && strcmp(argv[1], "procs") != 0)) {
    fprintf(stderr, "usage: ncclbench threads|procs N BYTES ITERS\n");
    return 2;
  }
  int n = atoi(argv[2]), iters = atoi(argv[4]);
  size_t bytes = (size_t)atoll(argv[3]);
  if (n < 1 || iters < 1 || bytes < sizeof(float)) {
    fprintf(stderr, "ncclbench: N, BYTES and ITERS must be positive\n");
    return 2;
  }
  if (strcmp(argv[1], "threads") == 0) {
    return threads(n, bytes, iters);
  }
  return procs(argv[0], n, bytes, iters);
}
