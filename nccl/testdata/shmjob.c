/*
 * shmjob: one rank of a job of processes for shm_test.go (issue 44's
 * shared memory: a small /dev/shm, the files of killed jobs).
 *
 *   shmjob COUNT HOLD_MS
 *
 * reads RANK, WORLD_SIZE and SHMJOB_ID_FILE (rank 0 writes the unique id
 * there), makes its rank, and then every rank but the last calls at once
 * while the last sleeps HOLD_MS first (so that the others hold their
 * shared memory, made for the call, while they wait for it); then one
 * in-place sum allreduce of COUNT floats, checked. Buffers are the
 * emulated device's (mscclgoEmuMalloc) in its build, host memory
 * otherwise (run with MSCCLGO_NCCL_HOSTMEM=1). It prints
 *
 *   rank R: pid P
 *   rank R: WHAT -> CODE
 *   rank R: WHAT error: MSG
 *   rank R: allreduce right   (or WRONG)
 *
 * and exits 0 unless it could not set the job up.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mscclgo.h"
#include "nccl.h"

#define JOB_PROG "shmjob"
#include "jobid.h"

static ncclResult_t report(int rank, const char *what, ncclResult_t r) {
  printf("rank %d: %s -> %d\n", rank, what, (int)r);
  if (r != ncclSuccess) {
    printf("rank %d: %s error: %s\n", rank, what, mscclgoGetLastError());
  }
  fflush(stdout);
  return r;
}

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v == NULL ? -1 : atoi(v);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int main(int argc, char **argv) {
  int rank = env_int("RANK"), n = env_int("WORLD_SIZE");
  const char *file = getenv("SHMJOB_ID_FILE");
  if (argc != 3 || rank < 0 || n < 1 || file == NULL) {
    fprintf(stderr, "usage: RANK=R WORLD_SIZE=N SHMJOB_ID_FILE=F shmjob COUNT HOLD_MS\n");
    return 2;
  }
  size_t count = (size_t)strtoull(argv[1], NULL, 0);
  int hold = atoi(argv[2]);
  printf("rank %d: pid %d\n", rank, (int)getpid());
  fflush(stdout);
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess || put_id(file, &id) != 0) {
      return 2;
    }
  } else if (get_id(file, rank, &id) != 0) {
    return 2;
  }
  ncclComm_t comm;
  if (report(rank, "ncclCommInitRank", ncclCommInitRank(&comm, n, id, rank)) != ncclSuccess) {
    return 0;
  }
  int (*emu_malloc)(uintptr_t *, size_t);
  int (*emu_sync)(int, void *);
  *(void **)(&emu_malloc) = dlsym(RTLD_DEFAULT, "mscclgoEmuMalloc");
  *(void **)(&emu_sync) = dlsym(RTLD_DEFAULT, "mscclgoEmuStreamSynchronize");
  float *buf;
  if (emu_malloc != NULL) {
    uintptr_t p = 0;
    if (emu_malloc(&p, count * sizeof(float)) != 0) {
      fprintf(stderr, "shmjob: mscclgoEmuMalloc: %s\n", mscclgoGetLastError());
      return 2;
    }
    buf = (float *)p;
  } else if ((buf = calloc(count, sizeof(float))) == NULL) {
    return 2;
  }
  for (size_t i = 0; i < count; i++) {
    buf[i] = (float)(rank + 1) + (float)(i % 5);
  }
  if (rank == n - 1 && hold > 0) {
    sleep_ms(hold);
  }
  ncclResult_t r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  if (r == ncclSuccess && emu_sync != NULL && emu_sync(0, NULL) != 0) {
    r = ncclInternalError;
  }
  if (report(rank, "ncclAllReduce", r) == ncclSuccess) {
    int right = 1;
    for (size_t i = 0; i < count && right; i++) {
      right = buf[i] == (float)(n * (n + 1) / 2) + (float)(n * (int)(i % 5));
    }
    printf("rank %d: allreduce %s\n", rank, right ? "right" : "WRONG");
  }
  report(rank, "ncclCommDestroy", ncclCommDestroy(comm));
  return 0;
}
