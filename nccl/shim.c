/*
 * shim.c: the C face of mscclgo's NCCL library. Every function of NCCL
 * 2.22's API with its exact prototype, and the later releases' to 2.29.7
 * (include/nccl.h's last section); the fallback NCCL (the real
 * library, loaded with dlopen and used for every call mscclgo does not
 * take); the last error; the INFO log. Communicators and the choice of a
 * plan per call are the Go side's (shim.h).
 *
 * A communicator (struct ncclComm) holds the Go communicator's handle and,
 * when a fallback is loaded, the fallback's communicator, created beside
 * it at init and destroyed after it. Destroyed communicators are marked
 * and kept (a few dozen bytes each), so that a later use is named instead
 * of reading freed memory.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COMM_LIVE 0x6d7363636c676f31ULL /* "msccl go1" */
#define COMM_DEAD 0x6d7363636c676f30ULL
#define COMM_PENDING 0x6d7363636c676f32ULL
#define COMM_ENDING 0x6d7363636c676f33ULL /* a destroy or abort is under way */
#define COMM_STARTING 0x6d7363636c676f34ULL /* a nonblocking init is under way */

/* The states of a nonblocking init (ncclConfig_t blocking 0, outside a
 * group), which runs on a thread of its own after the call returned
 * ncclInProgress; INIT_NONE for every other communicator. */
enum { INIT_NONE, INIT_RUNNING, INIT_OK, INIT_FAILED, INIT_FAILED_ENDED };

struct ncclComm {
  uint64_t magic;
  uintptr_t ours;       /* the Go communicator; 0 once destroyed */
  ncclComm_t real;      /* the fallback's communicator, or NULL */
  int rank, nranks, dev;
  const char *ended_by; /* "ncclCommDestroy" or "ncclCommAbort" (atomic) */
  int init_state;       /* INIT_* (atomic) */
  ncclResult_t init_result; /* a nonblocking init's result, once it is not INIT_RUNNING */
  int abort_init;       /* set (atomically) by an ncclCommAbort during the nonblocking init */
};

/* The magic and ended_by are read and changed atomically: ends race. */
static uint64_t comm_magic(const struct ncclComm *c) { return __atomic_load_n(&c->magic, __ATOMIC_ACQUIRE); }

static const char *comm_ended_by(const struct ncclComm *c) {
  const char *e = __atomic_load_n(&c->ended_by, __ATOMIC_ACQUIRE);
  return e != NULL ? e : "another thread's ncclCommDestroy or ncclCommAbort";
}

/* Exported so that the fallback search recognises this library (or a copy
 * of it) and never loads it as the real NCCL. */
const char mscclgo_nccl_marker[] = "mscclgo NCCL library";

/* ------------------------------------------------------------------ */
/* Logging and the last error. */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_info;
int mscclgo_log_state = -1;

static void log_init(void) {
  const char *v = getenv("MSCCLGO_NCCL_DEBUG");
  int on = v != NULL && (strcasecmp(v, "INFO") == 0 || strcasecmp(v, "TRACE") == 0);
  __atomic_store_n(&log_info, on, __ATOMIC_RELEASE);
  __atomic_store_n(&mscclgo_log_state, on, __ATOMIC_RELEASE);
}

int mscclgo_log_enabled(void) {
  pthread_once(&log_once, log_init);
  return __atomic_load_n(&log_info, __ATOMIC_ACQUIRE);
}

void mscclgo_log(const char *msg) {
  if (mscclgo_log_enabled()) {
    fprintf(stderr, "mscclgo-nccl INFO %s\n", msg);
  }
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
  if (!mscclgo_log_enabled()) {
    return;
  }
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mscclgo_log(buf);
}

static pthread_mutex_t error_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_error[2048];
static int last_error_is_real; /* the last failure was the fallback's */

/* Besides the process's last error, which ncclGetLastError gives as
 * NCCL's does, each thread keeps the last error set on it, for
 * mscclgoGetLastError: ranks run as threads of one process each read
 * their own. It is kept under a pthread key rather than in __thread
 * storage, for which a library loaded by dlopen (ctypes) may find no
 * static TLS room beside the Go runtime's. */
static pthread_key_t thread_error_key;
static pthread_once_t thread_error_once = PTHREAD_ONCE_INIT;
static int thread_error_ok;

static void make_thread_error_key(void) {
  thread_error_ok = pthread_key_create(&thread_error_key, free) == 0;
}

/* thread_error returns the calling thread's message buffer (of the size
 * of last_error), or NULL when there is none and create is not set or it
 * cannot be made. */
static char *thread_error(int create) {
  pthread_once(&thread_error_once, make_thread_error_key);
  if (!thread_error_ok) {
    return NULL;
  }
  char *e = pthread_getspecific(thread_error_key);
  if (e == NULL && create) {
    e = calloc(1, sizeof last_error);
    if (e != NULL && pthread_setspecific(thread_error_key, e) != 0) {
      free(e);
      e = NULL;
    }
  }
  return e;
}

void mscclgo_set_error(const char *msg, int log) {
  char *mine = thread_error(1);
  if (mine != NULL) {
    snprintf(mine, sizeof last_error, "%s", msg);
  }
  pthread_mutex_lock(&error_mu);
  snprintf(last_error, sizeof last_error, "%s", msg);
  last_error_is_real = 0;
  pthread_mutex_unlock(&error_mu);
  if (log) {
    logf_("error: %s", msg);
  }
}

static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
  char buf[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mscclgo_set_error(buf, 1);
  return r;
}

/* forwarded notes a forwarded call's failure, so that ncclGetLastError
 * asks the fallback. */
static ncclResult_t forwarded(ncclResult_t r) {
  if (r != ncclSuccess && r != ncclInProgress) {
    pthread_mutex_lock(&error_mu);
    last_error_is_real = 1;
    pthread_mutex_unlock(&error_mu);
  }
  return r;
}

/* ------------------------------------------------------------------ */
/* The fallback NCCL. */

/* The structures of NCCL's nccl_device.h (2.28 on) that its host
 * functions take or give by value, with its layouts: a team (ncclTeam_t)
 * and a multimem handle (ncclMultimemHandle_t). nccl.h does not declare
 * them, nor those functions: a program that calls them includes
 * nccl_device.h, which defines them. */
struct device_team {
  int nRanks, rank, stride;
};
struct device_multimem {
  void *mcBasePtr;
};

struct real_nccl {
  void *lib;
  char path[4096];
  char why[1024]; /* why there is none, when lib is NULL */
  ncclResult_t (*MemAlloc)(void **, size_t);
  ncclResult_t (*MemFree)(void *);
  ncclResult_t (*GetVersion)(int *);
  ncclResult_t (*GetUniqueId)(ncclUniqueId *);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
  ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
  ncclResult_t (*CommFinalize)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
  const char *(*GetLastError)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*CommRegister)(const ncclComm_t, void *, size_t, void **);
  ncclResult_t (*CommDeregister)(const ncclComm_t, void *);
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t *, void *, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t);
  ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Bcast)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*GroupSimulateEnd)(ncclSimInfo_t *);
  /* Later releases' (NULL where the fallback is older). */
  ncclResult_t (*CommWindowRegister)(ncclComm_t, void *, size_t, ncclWindow_t *, int);
  ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t);
  ncclResult_t (*DevCommCreate)(ncclComm_t, ncclDevCommRequirements_t const *, ncclDevComm_t *);
  ncclResult_t (*DevCommDestroy)(ncclComm_t, ncclDevComm_t const *);
  ncclResult_t (*GetLsaMultimemDevicePointer)(ncclWindow_t, size_t, void **);
  ncclResult_t (*Signal)(int, int, int, unsigned int, ncclComm_t, cudaStream_t);
  ncclResult_t (*WaitSignal)(int, ncclWaitSignalDesc_t *, ncclComm_t, cudaStream_t);
  ncclResult_t (*CommSuspend)(ncclComm_t, int);
  ncclResult_t (*CommResume)(ncclComm_t);
  ncclResult_t (*CommMemStats)(ncclComm_t, ncclCommMemStat_t, uint64_t *);
  void (*ResetDebugInit)(void);
  ncclResult_t (*AlltoAll)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Gather)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Scatter)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*CommRevoke)(ncclComm_t, int);
  ncclResult_t (*PutSignal)(const void *, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int,
                            ncclComm_t, cudaStream_t);
  ncclResult_t (*WinGetUserPtr)(ncclComm_t, ncclWindow_t, void **);
  ncclResult_t (*CommQueryProperties)(ncclComm_t, ncclCommProperties_t *);
  ncclResult_t (*GetLsaDevicePointer)(ncclWindow_t, size_t, int, void **);
  ncclResult_t (*GetPeerDevicePointer)(ncclWindow_t, size_t, int, void **);
  /* nccl_device.h's host functions that take or give its structures by
   * value (struct device_team below); their handles and requirements
   * pass by pointer. */
  struct device_team (*TeamWorld)(ncclComm_t);
  struct device_team (*TeamLsa)(ncclComm_t);
  struct device_team (*TeamRail)(ncclComm_t);
  int (*TeamRankToWorld)(ncclComm_t, struct device_team, int);
  int (*TeamRankToLsa)(ncclComm_t, struct device_team, int);
  ncclResult_t (*LsaBarrierCreateRequirement)(struct device_team, int, void *, void *);
  ncclResult_t (*GinBarrierCreateRequirement)(ncclComm_t, struct device_team, int, void *, void *);
  ncclResult_t (*GetMultimemDevicePointer)(ncclWindow_t, size_t, struct device_multimem, void **);
  int (*LLA2ACalcSlots)(int, int);
  ncclResult_t (*LLA2ACreateRequirement)(int, int, void *, void *);
};

static struct real_nccl real;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* same_file reports whether a and b are the same file. */
static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* carries_marker reports whether the file at path holds this library's
 * marker symbol name: it is mscclgo's own library, or a copy of it. The
 * file is searched, not loaded (loading a copy would start a second Go
 * runtime in the process). */
static int carries_marker(const char *path) {
  /* Non-blocking: a FIFO's open would wait for a writer. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return 0;
  }
  struct stat st;
  int found = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      const char *name = "mscclgo_nccl_marker";
      found = memmem(p, (size_t)st.st_size, name, strlen(name)) != NULL;
      munmap(p, (size_t)st.st_size);
    }
  }
  close(fd);
  return found;
}

#define RESOLVE(field, sym) real.field = (__typeof__(real.field))dlsym(real.lib, sym)

/* try_load loads path as the fallback, unless it is this library. It
 * returns 1 on success; otherwise it appends why to skipped. */
static int try_load(const char *path, const char *self, char *skipped, size_t cap) {
  size_t used = strlen(skipped);
  if (strchr(path, '/') != NULL) {
    struct stat st;
    if (stat(path, &st) != 0) {
      snprintf(skipped + used, cap - used, "%s%s: %s", used ? "; " : "", path, strerror(errno));
      return 0;
    }
    if (!S_ISREG(st.st_mode)) {
      snprintf(skipped + used, cap - used, "%s%s: not a regular file (a shared library is one)", used ? "; " : "", path);
      return 0;
    }
    if ((self != NULL && same_file(path, self)) || carries_marker(path)) {
      snprintf(skipped + used, cap - used, "%s%s: is mscclgo's own library", used ? "; " : "", path);
      return 0;
    }
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(skipped + used, cap - used, "%s%s: %s", used ? "; " : "", path, e ? e : "dlopen failed");
    return 0;
  }
  void *theirs = dlsym(h, "ncclAllReduce");
  if (theirs == (void *)&ncclAllReduce || dlsym(h, "mscclgo_nccl_marker") != NULL) {
    /* The loader answered with this library (a bare name it already has). */
    dlclose(h);
    snprintf(skipped + used, cap - used, "%s%s: is mscclgo's own library", used ? "; " : "", path);
    return 0;
  }
  if (theirs == NULL || dlsym(h, "ncclGetUniqueId") == NULL || dlsym(h, "ncclCommDestroy") == NULL ||
      (dlsym(h, "ncclCommInitRankConfig") == NULL && dlsym(h, "ncclCommInitRank") == NULL)) {
    dlclose(h);
    snprintf(skipped + used, cap - used, "%s%s: not an NCCL library (ncclAllReduce, ncclGetUniqueId, ncclCommInitRank or ncclCommDestroy missing)",
             used ? "; " : "", path);
    return 0;
  }
  real.lib = h;
  snprintf(real.path, sizeof real.path, "%s", path);
  RESOLVE(MemAlloc, "ncclMemAlloc");
  RESOLVE(MemFree, "ncclMemFree");
  RESOLVE(GetVersion, "ncclGetVersion");
  RESOLVE(GetUniqueId, "ncclGetUniqueId");
  RESOLVE(CommInitRankConfig, "ncclCommInitRankConfig");
  RESOLVE(CommInitRank, "ncclCommInitRank");
  RESOLVE(CommInitAll, "ncclCommInitAll");
  RESOLVE(CommFinalize, "ncclCommFinalize");
  RESOLVE(CommDestroy, "ncclCommDestroy");
  RESOLVE(CommAbort, "ncclCommAbort");
  RESOLVE(CommSplit, "ncclCommSplit");
  RESOLVE(GetLastError, "ncclGetLastError");
  RESOLVE(CommGetAsyncError, "ncclCommGetAsyncError");
  RESOLVE(CommRegister, "ncclCommRegister");
  RESOLVE(CommDeregister, "ncclCommDeregister");
  RESOLVE(RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
  RESOLVE(RedOpDestroy, "ncclRedOpDestroy");
  RESOLVE(Reduce, "ncclReduce");
  RESOLVE(Bcast, "ncclBcast");
  RESOLVE(Broadcast, "ncclBroadcast");
  RESOLVE(AllReduce, "ncclAllReduce");
  RESOLVE(ReduceScatter, "ncclReduceScatter");
  RESOLVE(AllGather, "ncclAllGather");
  RESOLVE(Send, "ncclSend");
  RESOLVE(Recv, "ncclRecv");
  RESOLVE(GroupStart, "ncclGroupStart");
  RESOLVE(GroupEnd, "ncclGroupEnd");
  RESOLVE(GroupSimulateEnd, "ncclGroupSimulateEnd");
  RESOLVE(CommWindowRegister, "ncclCommWindowRegister");
  RESOLVE(CommWindowDeregister, "ncclCommWindowDeregister");
  RESOLVE(DevCommCreate, "ncclDevCommCreate");
  RESOLVE(DevCommDestroy, "ncclDevCommDestroy");
  RESOLVE(GetLsaMultimemDevicePointer, "ncclGetLsaMultimemDevicePointer");
  RESOLVE(Signal, "ncclSignal");
  RESOLVE(WaitSignal, "ncclWaitSignal");
  RESOLVE(CommSuspend, "ncclCommSuspend");
  RESOLVE(CommResume, "ncclCommResume");
  RESOLVE(CommMemStats, "ncclCommMemStats");
  RESOLVE(ResetDebugInit, "ncclResetDebugInit");
  RESOLVE(AlltoAll, "ncclAlltoAll");
  RESOLVE(Gather, "ncclGather");
  RESOLVE(Scatter, "ncclScatter");
  RESOLVE(CommRevoke, "ncclCommRevoke");
  RESOLVE(PutSignal, "ncclPutSignal");
  RESOLVE(WinGetUserPtr, "ncclWinGetUserPtr");
  RESOLVE(CommQueryProperties, "ncclCommQueryProperties");
  RESOLVE(GetLsaDevicePointer, "ncclGetLsaDevicePointer");
  RESOLVE(GetPeerDevicePointer, "ncclGetPeerDevicePointer");
  RESOLVE(TeamWorld, "ncclTeamWorld");
  RESOLVE(TeamLsa, "ncclTeamLsa");
  RESOLVE(TeamRail, "ncclTeamRail");
  RESOLVE(TeamRankToWorld, "ncclTeamRankToWorld");
  RESOLVE(TeamRankToLsa, "ncclTeamRankToLsa");
  RESOLVE(LsaBarrierCreateRequirement, "ncclLsaBarrierCreateRequirement");
  RESOLVE(GinBarrierCreateRequirement, "ncclGinBarrierCreateRequirement");
  RESOLVE(GetMultimemDevicePointer, "ncclGetMultimemDevicePointer");
  RESOLVE(LLA2ACalcSlots, "ncclLLA2ACalcSlots");
  RESOLVE(LLA2ACreateRequirement, "ncclLLA2ACreateRequirement");
  return 1;
}

static void real_load(void) {
  Dl_info info;
  const char *self = NULL;
  if (dladdr((void *)&ncclGetVersion, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] == '/') {
    self = info.dli_fname;
  }
  char skipped[sizeof real.why - 64] = "";
  const char *env = getenv("MSCCLGO_NCCL_FALLBACK");
  if (env != NULL && env[0] != '\0') {
    if (strcasecmp(env, "none") == 0 || strcmp(env, "0") == 0 || strcasecmp(env, "off") == 0) {
      snprintf(real.why, sizeof real.why, "MSCCLGO_NCCL_FALLBACK=%s turns the fallback off", env);
    } else if (try_load(env, self, skipped, sizeof skipped)) {
      logf_("fallback NCCL: %s (MSCCLGO_NCCL_FALLBACK)", real.path);
      return;
    } else {
      snprintf(real.why, sizeof real.why, "MSCCLGO_NCCL_FALLBACK=%s cannot be used: %s", env, skipped);
    }
    logf_("no fallback NCCL: %s", real.why);
    return;
  }
  /* The usual places: LD_LIBRARY_PATH's directories, the CUDA and system
   * library directories, then the loader's own search. */
  char candidate[4096];
  const char *llp = getenv("LD_LIBRARY_PATH");
  if (llp != NULL) {
    const char *p = llp;
    while (*p != '\0') {
      size_t n = strcspn(p, ":");
      if (n > 0 && n < sizeof candidate - 32) {
        snprintf(candidate, sizeof candidate, "%.*s/libnccl.so.2", (int)n, p);
        if (access(candidate, F_OK) == 0 && try_load(candidate, self, skipped, sizeof skipped)) {
          logf_("fallback NCCL: %s (LD_LIBRARY_PATH)", real.path);
          return;
        }
      }
      p += n;
      if (*p == ':') {
        p++;
      }
    }
  }
  static const char *const dirs[] = {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                     "/usr/lib64", "/usr/local/lib", "/usr/lib"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(candidate, sizeof candidate, "%s/libnccl.so.2", dirs[i]);
    if (access(candidate, F_OK) == 0 && try_load(candidate, self, skipped, sizeof skipped)) {
      logf_("fallback NCCL: %s", real.path);
      return;
    }
  }
  if (try_load("libnccl.so.2", self, skipped, sizeof skipped)) {
    logf_("fallback NCCL: %s (the loader's search)", real.path);
    return;
  }
  snprintf(real.why, sizeof real.why,
           "no fallback NCCL found (set MSCCLGO_NCCL_FALLBACK to the real libnccl.so.2); tried: %s", skipped);
  logf_("no fallback NCCL: %s", real.why);
}

static int have_real(void) {
  pthread_once(&real_once, real_load);
  return real.lib != NULL;
}

const char *mscclgo_fallback_why(void) {
  pthread_once(&real_once, real_load);
  return real.lib != NULL ? "" : real.why;
}

/* no_fallback answers a call that only the fallback could take. */
static ncclResult_t no_fallback(const char *fn, const char *what) {
  if (real.lib != NULL) {
    return fail(ncclInvalidUsage, "mscclgo: %s: %s, and the fallback NCCL %s lacks %s", fn, what, real.path, fn);
  }
  return fail(ncclInvalidUsage, "mscclgo: %s: %s, and there is no fallback NCCL: %s", fn, what, real.why);
}

/* ------------------------------------------------------------------ */
/* Communicators. */

static __thread int group_depth;

static ncclResult_t check_comm(const struct ncclComm *comm, const char *fn) {
  if (comm == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: the communicator is NULL", fn);
  }
  uint64_t magic = comm_magic(comm);
  if (magic == COMM_DEAD || magic == COMM_ENDING) {
    return fail(ncclInvalidUsage, "mscclgo: %s: communicator %p (rank %d of %d) was used after %s", fn, (const void *)comm,
                comm->rank, comm->nranks, comm_ended_by(comm));
  }
  if (magic == COMM_PENDING) {
    return fail(ncclInvalidUsage, "mscclgo: %s: communicator %p (rank %d of %d) was used before the ncclGroupEnd that creates it",
                fn, (const void *)comm, comm->rank, comm->nranks);
  }
  if (magic == COMM_STARTING) {
    return fail(ncclInvalidUsage,
                "mscclgo: %s: communicator %p (rank %d of %d) was used before its nonblocking ncclCommInitRank finished "
                "(ncclCommGetAsyncError gives ncclInProgress until it has)",
                fn, (const void *)comm, comm->rank, comm->nranks);
  }
  if (magic != COMM_LIVE) {
    return fail(ncclInvalidArgument, "mscclgo: %s: %p is not a communicator of this library", fn, (const void *)comm);
  }
  return ncclSuccess;
}

/* check_query is check_comm for the queries of a communicator's place
 * (ncclCommCount, ncclCommUserRank, ncclCommCuDevice), which a
 * communicator still in its nonblocking init answers too. */
static ncclResult_t check_query(const struct ncclComm *comm, const char *fn) {
  if (comm != NULL && comm_magic(comm) == COMM_STARTING) {
    return ncclSuccess;
  }
  return check_comm(comm, fn);
}

/* check_end is check_comm for the calls that end a communicator
 * (ncclCommFinalize, ncclCommDestroy, ncclCommAbort): on one that was
 * ended, or is being ended by another thread, they are refused with
 * ncclInvalidUsage (a call in the wrong state, as every use after the
 * end). */
static ncclResult_t check_end(const struct ncclComm *comm, const char *fn) {
  if (comm != NULL) {
    /* The magic is read once: another thread's end may change it. */
    uint64_t magic = comm_magic(comm);
    if (magic == COMM_LIVE) {
      return ncclSuccess;
    }
    if (magic == COMM_DEAD || magic == COMM_ENDING) {
      return fail(ncclInvalidUsage, "mscclgo: %s: communicator %p (rank %d of %d) was ended already by %s", fn,
                  (const void *)comm, comm->rank, comm->nranks, comm_ended_by(comm));
    }
  }
  return check_comm(comm, fn);
}

static ncclComm_t new_comm(uintptr_t ours, ncclComm_t theirs, int rank, int nranks, int dev) {
  struct ncclComm *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return NULL;
  }
  c->magic = COMM_LIVE;
  c->ours = ours;
  c->real = theirs;
  c->rank = rank;
  c->nranks = nranks;
  c->dev = dev;
  return c;
}

/* mscclgo_current_device is the calling thread's current device, as
 * NCCL takes it at init: the CUDA runtime's current device when the
 * process has the runtime loaded (PyTorch has); without the runtime, the
 * device of the thread's current context, when the process has the
 * driver loaded (a program of the driver API alone: cuCtxSetCurrent or
 * cuCtxPushCurrent chose the device); else 0. cuCtxGetDevice's CUdevice
 * is an int; it fails (no context is current, or the driver was not
 * initialised) with a nonzero CUresult, and the device is then 0. */
int mscclgo_current_device(void) {
  int dev = 0;
  int (*runtime)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaGetDevice");
  if (runtime != NULL) {
    return runtime(&dev) == 0 ? dev : 0;
  }
  int (*driver)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cuCtxGetDevice");
  if (driver != NULL && driver(&dev) == 0 && dev >= 0) {
    return dev;
  }
  return 0;
}

static ncclResult_t check_config(const ncclConfig_t *config, const char *fn) {
  if (config != NULL && config->magic != 0xcafebeef) {
    return fail(ncclInvalidArgument, "mscclgo: %s: the config's magic is 0x%x: initialise it with NCCL_CONFIG_INITIALIZER", fn,
                config->magic);
  }
  return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version) {
  if (version == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: ncclGetVersion: version is NULL");
  }
  if (have_real() && real.GetVersion != NULL) {
    return forwarded(real.GetVersion(version));
  }
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (uniqueId == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: ncclGetUniqueId: uniqueId is NULL");
  }
  return (ncclResult_t)mgoUniqueID(uniqueId->internal);
}

/* One rank's ncclCommInitRank: done at once, or, inside a group, at the
 * outermost ncclGroupEnd of the calling thread, all the group's ranks
 * at once (one thread each, since each waits for its peers). */
struct rank_init {
  struct ncclComm *comm; /* the caller's handle: COMM_PENDING until done */
  int nranks, rank, dev, fb;
  ncclUniqueId id, realID;
  ncclConfig_t *config; /* the caller's, which must live until the group ends */
  int *abort;           /* a nonblocking init's: set when it is to give up; else NULL */
  uintptr_t ours;
  ncclResult_t result;
  struct rank_init *next;
};

static __thread struct rank_init *group_inits; /* this thread's, in call order */

/* init_ours makes the mscclgo half of p (and, on rank 0 with a fallback,
 * the fallback's unique id, which the bootstrap hands to the others). */
static void *init_ours(void *arg) {
  struct rank_init *p = arg;
  if (p->fb && p->rank == 0) {
    p->result = forwarded(real.GetUniqueId(&p->realID));
    if (p->result != ncclSuccess) {
      return NULL;
    }
  }
  if (p->abort != NULL) {
    p->result = (ncclResult_t)mgoCommInitAbortable(p->nranks, p->rank, p->id.internal, p->dev, p->fb, p->realID.internal,
                                                   p->abort, &p->ours);
  } else {
    p->result = (ncclResult_t)mgoCommInit(p->nranks, p->rank, p->id.internal, p->dev, p->fb, p->realID.internal, &p->ours);
  }
  return NULL;
}

/* init_theirs makes the fallback's communicator of p, once ours exists. */
static ncclResult_t init_theirs(struct rank_init *p) {
  if (!p->fb) {
    return ncclSuccess;
  }
  if (real.CommInitRankConfig != NULL) {
    return forwarded(real.CommInitRankConfig(&p->comm->real, p->nranks, p->realID, p->rank, p->config));
  }
  return forwarded(real.CommInitRank(&p->comm->real, p->nranks, p->realID, p->rank));
}

/* init_done makes p's communicator live, or, after a failure r, ends
 * both halves and marks it. */
static void init_done(struct rank_init *p, ncclResult_t r) {
  if (r == ncclSuccess || r == ncclInProgress) {
    p->comm->ours = p->ours;
    __atomic_store_n(&p->comm->magic, COMM_LIVE, __ATOMIC_RELEASE);
    logf_("rank %d of %d: communicator %p on device %d%s%s", p->rank, p->nranks, (void *)p->comm, p->dev,
          p->fb ? ", fallback communicator from " : ", no fallback", p->fb ? real.path : "");
    return;
  }
  if (p->ours != 0) {
    mgoCommAbort(p->ours);
  }
  if (p->comm->real != NULL) {
    /* ncclCommDestroy is one of the symbols every fallback has. */
    (real.CommAbort != NULL ? real.CommAbort : real.CommDestroy)(p->comm->real);
  }
  p->comm->real = NULL;
  __atomic_store_n(&p->comm->ended_by, "its failed ncclCommInitRank", __ATOMIC_RELEASE);
  __atomic_store_n(&p->comm->magic, COMM_DEAD, __ATOMIC_RELEASE);
}

/* init_async is a nonblocking init's thread: both halves, then the
 * result, which ncclCommGetAsyncError gives from then on. p and its copy
 * of the config are its own. */
static void *init_async(void *arg) {
  struct rank_init *p = arg;
  struct ncclComm *c = p->comm;
  init_ours(p);
  ncclResult_t r = p->result;
  if (r == ncclSuccess) {
    r = init_theirs(p); /* the fallback's may be in progress itself: its async error says when it is done */
  }
  init_done(p, r);
  int ok = r == ncclSuccess || r == ncclInProgress;
  c->init_result = ok ? ncclSuccess : r;
  __atomic_store_n(&c->init_state, ok ? INIT_OK : INIT_FAILED, __ATOMIC_RELEASE);
  logf_("rank %d of %d: nonblocking ncclCommInitRank of communicator %p: %s", p->rank, p->nranks, (void *)c,
        ok ? "done" : ncclGetErrorString(r));
  free(p->config);
  free(p);
  return NULL;
}

/* copy_config copies the caller's config, of the size it says (a newer
 * nccl.h's is larger; the fallback reads all of it), for a nonblocking
 * init, which uses it after the call returned. NULL: out of memory. */
static ncclConfig_t *copy_config(const ncclConfig_t *config) {
  size_t n = config->size;
  if (n < offsetof(ncclConfig_t, blocking) + sizeof config->blocking || n > 65536) {
    n = sizeof *config; /* not a size: ours */
  }
  ncclConfig_t *c = calloc(1, n > sizeof *c ? n : sizeof *c);
  if (c != NULL) {
    memcpy(c, config, n);
  }
  return c;
}

/* start_async starts p, a nonblocking init: the call returns
 * ncclInProgress at once with the handle, which is COMM_STARTING until
 * the init's thread ends (ncclCommGetAsyncError says when). */
static ncclResult_t start_async(struct rank_init *p, const char *fn) {
  struct ncclComm *c = p->comm;
  ncclResult_t r = (ncclResult_t)mgoCheckInit((char *)fn, p->nranks, p->rank);
  if (r != ncclSuccess) {
    return r;
  }
  ncclConfig_t *mine = copy_config(p->config);
  if (mine == NULL) {
    return fail(ncclSystemError, "mscclgo: %s: out of memory", fn);
  }
  p->config = mine;
  p->abort = &c->abort_init;
  c->magic = COMM_STARTING;
  c->init_state = INIT_RUNNING;
  pthread_attr_t attr;
  pthread_t t;
  int e = pthread_attr_init(&attr);
  if (e == 0) {
    e = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (e == 0) {
      e = pthread_create(&t, &attr, init_async, p);
    }
    pthread_attr_destroy(&attr);
  }
  if (e != 0) {
    p->config = NULL;
    free(mine);
    return fail(ncclSystemError, "mscclgo: %s: rank %d of %d: cannot start the nonblocking init's thread: %s", fn, p->rank,
                p->nranks, strerror(e));
  }
  logf_("rank %d of %d: nonblocking ncclCommInitRank: ncclInProgress, communicator %p initialises in the background",
        p->rank, p->nranks, (void *)c);
  return ncclInProgress;
}

/* await_init waits for comm's nonblocking init to end, if one runs: a
 * destroy or finalize of a communicator still initialising
 * (ncclInProgress) takes effect once it is done, at most the set-up's
 * timeout (MSCCLGO_NCCL_TIMEOUT) later; an abort tells the init to give
 * up first (end). */
static void await_init(const struct ncclComm *comm) {
  if (comm == NULL) {
    return;
  }
  while (__atomic_load_n(&comm->init_state, __ATOMIC_ACQUIRE) == INIT_RUNNING) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
  const char *fn = "ncclCommInitRank";
  if (comm == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: comm is NULL", fn);
  }
  *comm = NULL;
  ncclResult_t r = check_config(config, fn);
  if (r != ncclSuccess) {
    return r;
  }
  struct rank_init *p = calloc(1, sizeof *p);
  struct ncclComm *c = calloc(1, sizeof *c);
  if (p == NULL || c == NULL) {
    free(p);
    free(c);
    return fail(ncclSystemError, "mscclgo: %s: out of memory", fn);
  }
  c->magic = COMM_PENDING;
  c->rank = rank;
  c->nranks = nranks;
  c->dev = mscclgo_current_device();
  c->ended_by = "ncclGroupEnd";
  *p = (struct rank_init){.comm = c, .nranks = nranks, .rank = rank, .dev = c->dev, .fb = have_real(), .id = commId, .config = config};
  if (group_depth > 0) {
    struct rank_init **tail = &group_inits;
    while (*tail != NULL) {
      tail = &(*tail)->next;
    }
    *tail = p;
    *comm = c;
    logf_("rank %d of %d: ncclCommInitRank deferred to ncclGroupEnd", rank, nranks);
    return ncclSuccess;
  }
  if (config != NULL && config->blocking == 0) {
    r = start_async(p, fn);
    if (r != ncclInProgress) {
      free(p);
      free(c);
      return r;
    }
    *comm = c;
    return r;
  }
  init_ours(p);
  r = p->result;
  if (r == ncclSuccess) {
    r = init_theirs(p);
  }
  init_done(p, r);
  free(p);
  if (r != ncclSuccess && r != ncclInProgress) {
    /* The handle was never the caller's: nothing refers to it. */
    free(c);
    return r;
  }
  *comm = c;
  return r;
}

/* finish_inits does the ranks initialised in this thread's group: every
 * mscclgo half at once, then, inside the fallback's group that is still
 * open, the fallback halves. It returns the first failure. */
static ncclResult_t finish_inits(struct rank_init *list) {
  int n = 0;
  for (struct rank_init *p = list; p != NULL; p = p->next) {
    n++;
  }
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  int *started = calloc((size_t)n, sizeof *started);
  if (ts == NULL || started == NULL) {
    free(ts);
    free(started);
    for (struct rank_init *p = list; p != NULL; p = p->next) {
      p->result = ncclSystemError;
    }
    return fail(ncclSystemError, "mscclgo: ncclGroupEnd: out of memory");
  }
  int i = 0;
  for (struct rank_init *p = list; p != NULL; p = p->next, i++) {
    started[i] = pthread_create(&ts[i], NULL, init_ours, p) == 0;
    if (!started[i]) {
      p->result = fail(ncclSystemError, "mscclgo: ncclGroupEnd: cannot start a thread for rank %d's init", p->rank);
    }
  }
  for (i = 0; i < n; i++) {
    if (started[i]) {
      pthread_join(ts[i], NULL);
    }
  }
  free(ts);
  free(started);
  ncclResult_t r = ncclSuccess;
  for (struct rank_init *p = list; p != NULL; p = p->next) {
    if (p->result != ncclSuccess && r == ncclSuccess) {
      r = p->result;
    }
  }
  for (struct rank_init *p = list; p != NULL && r == ncclSuccess; p = p->next) {
    p->result = init_theirs(p);
    if (p->result != ncclSuccess && p->result != ncclInProgress) {
      r = p->result;
    }
  }
  return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  const char *fn = "ncclCommInitAll";
  if (comm == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: comm is NULL", fn);
  }
  if (ndev < 1) {
    return fail(ncclInvalidArgument, "mscclgo: %s: ndev %d: must be at least 1", fn, ndev);
  }
  /* Bounded before anything is allocated for ndev ranks. */
  ncclResult_t rc = (ncclResult_t)mgoCheckRanks((char *)fn, "ndev", ndev);
  if (rc != ncclSuccess) {
    return rc;
  }
  int *devs = calloc((size_t)ndev, sizeof *devs);
  uintptr_t *ours = calloc((size_t)ndev, sizeof *ours);
  ncclComm_t *theirs = calloc((size_t)ndev, sizeof *theirs);
  ncclResult_t r = ncclSuccess;
  if (devs == NULL || ours == NULL || theirs == NULL) {
    r = fail(ncclSystemError, "mscclgo: %s: out of memory", fn);
    goto out;
  }
  for (int i = 0; i < ndev; i++) {
    devs[i] = devlist != NULL ? devlist[i] : i;
  }
  r = (ncclResult_t)mgoCommInitAll(ndev, devs, ours);
  if (r != ncclSuccess) {
    goto out;
  }
  int fb = have_real();
  if (fb) {
    if (real.CommInitAll == NULL) {
      r = no_fallback(fn, "a fallback communicator is needed");
    } else {
      r = forwarded(real.CommInitAll(theirs, ndev, devlist));
    }
    if (r != ncclSuccess) {
      for (int i = 0; i < ndev; i++) {
        mgoCommAbort(ours[i]);
      }
      goto out;
    }
  }
  for (int i = 0; i < ndev; i++) {
    comm[i] = new_comm(ours[i], theirs[i], i, ndev, devs[i]);
    if (comm[i] == NULL) {
      r = fail(ncclSystemError, "mscclgo: %s: out of memory", fn);
      goto out;
    }
  }
  logf_("%d communicators in one process%s%s", ndev, fb ? ", fallback communicators from " : ", no fallback",
        fb ? real.path : "");
out:
  free(devs);
  free(ours);
  free(theirs);
  return r;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  const char *fn = "ncclCommSplit";
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  if (newcomm == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: newcomm is NULL", fn);
  }
  *newcomm = NULL;
  if ((r = check_config(config, fn)) != ncclSuccess) {
    return r;
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return fail(ncclInvalidArgument, "mscclgo: %s: color %d: must be non-negative or NCCL_SPLIT_NOCOLOR", fn, color);
  }
  uintptr_t ours = 0;
  int rank = -1, size = 0;
  r = (ncclResult_t)mgoCommSplit(comm->ours, color, key, comm->dev, &ours, &rank, &size);
  if (r != ncclSuccess) {
    return r;
  }
  ncclComm_t theirs = NULL;
  if (comm->real != NULL) {
    if (real.CommSplit == NULL) {
      r = no_fallback(fn, "a fallback communicator is needed");
    } else {
      r = forwarded(real.CommSplit(comm->real, color, key, &theirs, config));
    }
    if (r != ncclSuccess && r != ncclInProgress) {
      if (ours != 0) {
        mgoCommAbort(ours);
      }
      return r;
    }
  }
  if (ours == 0) {
    return r; /* NCCL_SPLIT_NOCOLOR: no communicator */
  }
  *newcomm = new_comm(ours, theirs, rank, size, comm->dev);
  if (*newcomm == NULL) {
    mgoCommAbort(ours);
    return fail(ncclSystemError, "mscclgo: %s: out of memory", fn);
  }
  logf_("split of %p (color %d, key %d): rank %d of %d, communicator %p", (void *)comm, color, key, rank, size,
        (void *)*newcomm);
  return r;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  await_init(comm);
  ncclResult_t r = check_end(comm, "ncclCommFinalize");
  if (r != ncclSuccess) {
    return r;
  }
  r = (ncclResult_t)mgoCommFinalize(comm->ours);
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real != NULL && real.CommFinalize != NULL) {
    return forwarded(real.CommFinalize(comm->real));
  }
  return ncclSuccess;
}

/* end destroys or aborts comm: the mscclgo communicator first, then the
 * fallback's (which may still have work of this communicator queued). */
static ncclResult_t end(ncclComm_t comm, const char *fn, int abort) {
  if (abort && comm != NULL && __atomic_load_n(&comm->init_state, __ATOMIC_ACQUIRE) == INIT_RUNNING) {
    __atomic_store_n(&comm->abort_init, 1, __ATOMIC_RELEASE);
  }
  await_init(comm);
  int failed = INIT_FAILED;
  if (comm != NULL &&
      __atomic_compare_exchange_n(&comm->init_state, &failed, INIT_FAILED_ENDED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    /* A nonblocking init that failed left nothing to end but the handle. */
    __atomic_store_n(&comm->ended_by, fn, __ATOMIC_RELEASE);
    logf_("rank %d of %d: communicator %p (its nonblocking init failed) ended by %s", comm->rank, comm->nranks, (void *)comm, fn);
    return ncclSuccess;
  }
  ncclResult_t r = check_end(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  if (abort && comm->real != NULL && real.CommAbort == NULL) {
    /* Checked before anything ends: the caller may still destroy it. */
    return fail(ncclInvalidUsage, "mscclgo: %s: the fallback NCCL %s lacks ncclCommAbort, so its communicator cannot be aborted; "
                "ncclCommDestroy ends it", fn, real.path);
  }
  /* One end wins; the others, concurrent or later, are refused. */
  uint64_t live = COMM_LIVE;
  if (!__atomic_compare_exchange_n(&comm->magic, &live, COMM_ENDING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return check_end(comm, fn);
  }
  __atomic_store_n(&comm->ended_by, fn, __ATOMIC_RELEASE);
  r = (ncclResult_t)(abort ? mgoCommAbort(comm->ours) : mgoCommDestroy(comm->ours));
  if (comm->real != NULL) {
    ncclResult_t rr = forwarded(abort ? real.CommAbort(comm->real) : real.CommDestroy(comm->real));
    if (r == ncclSuccess) {
      r = rr;
    }
  }
  comm->real = NULL;
  __atomic_store_n(&comm->magic, COMM_DEAD, __ATOMIC_RELEASE);
  logf_("rank %d of %d: communicator %p ended by %s", comm->rank, comm->nranks, (void *)comm, fn);
  return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return end(comm, "ncclCommDestroy", 0); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return end(comm, "ncclCommAbort", 1); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (comm != NULL && asyncError != NULL) {
    /* A nonblocking init: in progress, or failed (its error stays the
     * last error, set by the init). */
    int st = __atomic_load_n(&comm->init_state, __ATOMIC_ACQUIRE);
    if (st == INIT_RUNNING) {
      *asyncError = ncclInProgress;
      return ncclSuccess;
    }
    if (st == INIT_FAILED) {
      *asyncError = comm->init_result;
      return ncclSuccess;
    }
  }
  ncclResult_t r = check_comm(comm, "ncclCommGetAsyncError");
  if (r != ncclSuccess) {
    return r;
  }
  if (asyncError == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: ncclCommGetAsyncError: asyncError is NULL");
  }
  int ours = ncclSuccess;
  r = (ncclResult_t)mgoCommAsyncError(comm->ours, &ours);
  if (r != ncclSuccess) {
    return r;
  }
  *asyncError = (ncclResult_t)ours;
  if (ours == ncclSuccess && comm->real != NULL && real.CommGetAsyncError != NULL) {
    return forwarded(real.CommGetAsyncError(comm->real, asyncError));
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  ncclResult_t r = check_query(comm, "ncclCommCount");
  if (r == ncclSuccess && count == NULL) {
    r = fail(ncclInvalidArgument, "mscclgo: ncclCommCount: count is NULL");
  }
  if (r == ncclSuccess) {
    *count = comm->nranks;
  }
  return r;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  ncclResult_t r = check_query(comm, "ncclCommCuDevice");
  if (r == ncclSuccess && device == NULL) {
    r = fail(ncclInvalidArgument, "mscclgo: ncclCommCuDevice: device is NULL");
  }
  if (r == ncclSuccess) {
    *device = comm->dev;
  }
  return r;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  ncclResult_t r = check_query(comm, "ncclCommUserRank");
  if (r == ncclSuccess && rank == NULL) {
    r = fail(ncclInvalidArgument, "mscclgo: ncclCommUserRank: rank is NULL");
  }
  if (r == ncclSuccess) {
    *rank = comm->rank;
  }
  return r;
}

/* ------------------------------------------------------------------ */
/* Errors. */

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with MSCCLGO_NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with MSCCLGO_NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the mscclgo developers";
  case ncclInvalidArgument:
    return "invalid argument (run with MSCCLGO_NCCL_DEBUG=INFO for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with MSCCLGO_NCCL_DEBUG=INFO for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  pthread_mutex_lock(&error_mu);
  int theirs = last_error_is_real;
  pthread_mutex_unlock(&error_mu);
  if (theirs && real.GetLastError != NULL) {
    ncclComm_t rc = NULL;
    if (comm != NULL && comm->magic == COMM_LIVE) {
      rc = comm->real;
    }
    return real.GetLastError(rc);
  }
  return last_error;
}

const char *mscclgoGetLastError(void) {
  const char *mine = thread_error(0);
  if (mine != NULL && mine[0] != '\0') {
    return mine;
  }
  return ncclGetLastError(NULL);
}

/* ------------------------------------------------------------------ */
/* Calls that only the fallback takes: memory, registration, user ops. */

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (have_real() && real.MemAlloc != NULL) {
    return forwarded(real.MemAlloc(ptr, size));
  }
  return no_fallback("ncclMemAlloc", "mscclgo does not allocate device memory itself");
}

ncclResult_t ncclMemFree(void *ptr) {
  if (have_real() && real.MemFree != NULL) {
    return forwarded(real.MemFree(ptr));
  }
  return no_fallback("ncclMemFree", "mscclgo does not allocate device memory itself");
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  ncclResult_t r = check_comm(comm, "ncclCommRegister");
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real != NULL && real.CommRegister != NULL) {
    return forwarded(real.CommRegister(comm->real, buff, size, handle));
  }
  return no_fallback("ncclCommRegister", "buffer registration is the fallback's");
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  ncclResult_t r = check_comm(comm, "ncclCommDeregister");
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real != NULL && real.CommDeregister != NULL) {
    return forwarded(real.CommDeregister(comm->real, handle));
  }
  return no_fallback("ncclCommDeregister", "buffer registration is the fallback's");
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                                      ncclComm_t comm) {
  ncclResult_t r = check_comm(comm, "ncclRedOpCreatePreMulSum");
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real != NULL && real.RedOpCreatePreMulSum != NULL) {
    r = forwarded(real.RedOpCreatePreMulSum(op, scalar, datatype, residence, comm->real));
    if (r == ncclSuccess && op != NULL) {
      mgoRedOp(comm->ours, (int)*op, 1); /* calls of this communicator may name it */
    }
    return r;
  }
  return no_fallback("ncclRedOpCreatePreMulSum", "user-defined reductions are the fallback's");
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ncclResult_t r = check_comm(comm, "ncclRedOpDestroy");
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real != NULL && real.RedOpDestroy != NULL) {
    r = forwarded(real.RedOpDestroy(op, comm->real));
    if (r == ncclSuccess) {
      mgoRedOp(comm->ours, (int)op, 0);
    }
    return r;
  }
  return no_fallback("ncclRedOpDestroy", "user-defined reductions are the fallback's");
}

/* ------------------------------------------------------------------ */
/* Calls of later NCCL releases (2.23 to 2.29) that PyTorch makes when it
 * is built against them. */

/* ncclCommInitRankScalable initialises as ncclCommInitRankConfig with the
 * first id: NCCL's first root is rank 0 (root i is the first rank of the
 * i-th of nId near-equal slices of the ranks, and PyTorch picks its roots
 * the same way), whose ncclGetUniqueId opened mscclgo's bootstrap. The
 * other ids are not used: one listener is enough for mscclgo's bootstrap,
 * and those this process opened are closed. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                      ncclConfig_t *config) {
  const char *fn = "ncclCommInitRankScalable";
  if (newcomm == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: newcomm is NULL", fn);
  }
  *newcomm = NULL;
  if (nId < 1 || (nranks > 0 && nId > nranks)) {
    return fail(ncclInvalidArgument, "mscclgo: %s: nId %d: must be 1 to nranks (%d)", fn, nId, nranks);
  }
  if (commIds == NULL) {
    return fail(ncclInvalidArgument, "mscclgo: %s: commIds is NULL (nId %d)", fn, nId);
  }
  logf_("rank %d of %d: %s with %d unique ids: initialised from the first (rank 0's)", myrank, nranks, fn, nId);
  if (nId > 1) {
    mgoReleaseIDs((char *)(commIds + 1), nId - 1);
  }
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

/* ncclCommShrink is refused: the new communicator would need mscclgo's
 * bootstrap among the remaining ranks, which only the parent's can make,
 * and that needs every rank of the parent, while the excluded ones (often
 * lost) do not call. A communicator of the fallback alone is no
 * communicator of this library, so the fallback's shrink is not used. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                            ncclConfig_t *config, int shrinkFlags) {
  const char *fn = "ncclCommShrink";
  (void)excludeRanksList;
  (void)config;
  if (newcomm != NULL) {
    *newcomm = NULL;
  }
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  return fail(ncclInvalidUsage,
              "mscclgo: %s: rank %d of %d, %d ranks excluded, flags 0x%x: mscclgo cannot shrink a communicator (its "
              "bootstrap needs every rank of the parent, and the excluded ones do not call); make the new one with "
              "ncclCommSplit while every rank is alive, or with ncclCommInitRank",
              fn, comm->rank, comm->nranks, excludeRanksCount, (unsigned)shrinkFlags);
}

/* fallback_comm sets *theirs to the fallback's communicator of comm, for
 * fn, a call only the fallback takes; defined is whether the fallback
 * defines fn, what why mscclgo does not take it. */
static ncclResult_t fallback_comm(ncclComm_t comm, const char *fn, int defined, const char *what, ncclComm_t *theirs) {
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  if (comm->real == NULL || !defined) {
    return no_fallback(fn, what);
  }
  *theirs = comm->real;
  return ncclSuccess;
}

#define WINDOWS "memory windows are the fallback's"
#define DEVICE_API "NCCL's device API is the fallback's"
#define ONE_SIDED "one-sided calls are the fallback's"
#define SUSPEND "suspending a communicator's memory is the fallback's"

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommWindowRegister", real.CommWindowRegister != NULL, WINDOWS, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommWindowRegister(theirs, buff, size, win, winFlags));
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommWindowDeregister", real.CommWindowDeregister != NULL, WINDOWS, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommWindowDeregister(theirs, win));
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclDevCommCreate", real.DevCommCreate != NULL, DEVICE_API, &theirs);
  return r != ncclSuccess ? r : forwarded(real.DevCommCreate(theirs, reqs, outDevComm));
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclDevCommDestroy", real.DevCommDestroy != NULL, DEVICE_API, &theirs);
  return r != ncclSuccess ? r : forwarded(real.DevCommDestroy(theirs, devComm));
}

/* ncclGetLsaMultimemDevicePointer takes a window, which only the fallback
 * makes; there is no communicator to check. */
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr) {
  if (have_real() && real.GetLsaMultimemDevicePointer != NULL) {
    return forwarded(real.GetLsaMultimemDevicePointer(window, offset, outPtr));
  }
  return no_fallback("ncclGetLsaMultimemDevicePointer", WINDOWS);
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclSignal", real.Signal != NULL, ONE_SIDED, &theirs);
  return r != ncclSuccess ? r : forwarded(real.Signal(peer, sigIdx, ctx, flags, theirs, stream));
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclWaitSignal", real.WaitSignal != NULL, ONE_SIDED, &theirs);
  return r != ncclSuccess ? r : forwarded(real.WaitSignal(nDesc, signalDescs, theirs, stream));
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommSuspend", real.CommSuspend != NULL, SUSPEND, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommSuspend(theirs, flags));
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommResume", real.CommResume != NULL, SUSPEND, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommResume(theirs));
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommMemStats", real.CommMemStats != NULL, SUSPEND, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommMemStats(theirs, stat, value));
}

#define GROW "mscclgo cannot grow a communicator (its bootstrap joins the ranks of one unique id once, at init); make a new one with ncclCommInitRank"

/* ncclCommGetUniqueId makes the id of an ncclCommGrow, which is refused:
 * so is the id. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId) {
  const char *fn = "ncclCommGetUniqueId";
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  (void)uniqueId;
  return fail(ncclInvalidUsage, "mscclgo: %s: rank %d of %d: " GROW, fn, comm->rank, comm->nranks);
}

/* ncclCommGrow is refused, as ncclCommShrink is: the new ranks call it
 * without a communicator, and the grown one would need mscclgo's
 * bootstrap among old and new ranks, which the parent's cannot make. A
 * communicator of the fallback alone is not one this library can use. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
                          ncclConfig_t *config) {
  const char *fn = "ncclCommGrow";
  (void)uniqueId;
  (void)config;
  if (newcomm != NULL) {
    *newcomm = NULL;
  }
  if (comm == NULL) {
    return fail(ncclInvalidUsage, "mscclgo: %s: a new rank %d of %d: " GROW, fn, rank, nRanks);
  }
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  return fail(ncclInvalidUsage, "mscclgo: %s: rank %d of %d, to %d ranks: " GROW, fn, comm->rank, comm->nranks, nRanks);
}

/* ncclCommRevoke stops the fallback communicator's work in flight; the
 * launches of mscclgo's plans are not stopped by it (ncclCommAbort stops
 * them). Without a fallback that has it, it is refused. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char *fn = "ncclCommRevoke";
  ncclResult_t r = check_comm(comm, fn);
  if (r != ncclSuccess) {
    return r;
  }
  if (revokeFlags != 0) {
    return fail(ncclInvalidArgument, "mscclgo: %s: revokeFlags 0x%x: must be NCCL_REVOKE_DEFAULT (0)", fn, (unsigned)revokeFlags);
  }
  ncclComm_t theirs = NULL;
  r = fallback_comm(comm, fn, real.CommRevoke != NULL,
                    "revoking is the fallback's (mscclgo's own launches end with ncclCommAbort)", &theirs);
  if (r != ncclSuccess) {
    return r;
  }
  logf_("rank %d of %d: %s forwarded: the fallback's work stops, mscclgo's launches run on", comm->rank, comm->nranks, fn);
  return forwarded(real.CommRevoke(theirs, revokeFlags));
}

ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclPutSignal", real.PutSignal != NULL, ONE_SIDED, &theirs);
  return r != ncclSuccess ? r
                          : forwarded(real.PutSignal(localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx,
                                                     flags, theirs, stream));
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclWinGetUserPtr", real.WinGetUserPtr != NULL, WINDOWS, &theirs);
  return r != ncclSuccess ? r : forwarded(real.WinGetUserPtr(theirs, win, outUserPtr));
}

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclCommQueryProperties", real.CommQueryProperties != NULL, DEVICE_API, &theirs);
  return r != ncclSuccess ? r : forwarded(real.CommQueryProperties(theirs, props));
}

/* Like ncclGetLsaMultimemDevicePointer, these take a window of the
 * fallback's and no communicator. */
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr) {
  if (have_real() && real.GetLsaDevicePointer != NULL) {
    return forwarded(real.GetLsaDevicePointer(window, offset, lsaRank, outPtr));
  }
  return no_fallback("ncclGetLsaDevicePointer", WINDOWS);
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr) {
  if (have_real() && real.GetPeerDevicePointer != NULL) {
    return forwarded(real.GetPeerDevicePointer(window, offset, peer, outPtr));
  }
  return no_fallback("ncclGetPeerDevicePointer", WINDOWS);
}

/* nccl_device.h's host functions (NCCL 2.28 on), which nccl.h does not
 * declare (they take its structures by value; see struct device_team):
 * the device API is the fallback's, so they are forwarded, a team's and
 * a rank's with the fallback's communicator. The teams and ranks cannot
 * carry an error: without the fallback's function they answer what
 * mscclgo knows (the world team is every rank, stride 1; the LSA and
 * rail teams of a rank whose peers are unknown are the rank alone) or -1,
 * and set the last error. */

static struct device_team team_of(ncclComm_t comm, const char *fn, struct device_team (*theirs)(ncclComm_t), int world) {
  if (check_comm(comm, fn) != ncclSuccess) {
    return (struct device_team){0, 0, 0};
  }
  if (comm->real != NULL && theirs != NULL) {
    return theirs(comm->real);
  }
  no_fallback(fn, DEVICE_API);
  return world ? (struct device_team){comm->nranks, comm->rank, 1} : (struct device_team){1, 0, 1};
}

struct device_team ncclTeamWorld(ncclComm_t comm) { return team_of(comm, "ncclTeamWorld", real.TeamWorld, 1); }
struct device_team ncclTeamLsa(ncclComm_t comm) { return team_of(comm, "ncclTeamLsa", real.TeamLsa, 0); }
struct device_team ncclTeamRail(ncclComm_t comm) { return team_of(comm, "ncclTeamRail", real.TeamRail, 0); }

int ncclTeamRankToWorld(ncclComm_t comm, struct device_team team, int rank) {
  ncclComm_t theirs = NULL;
  if (fallback_comm(comm, "ncclTeamRankToWorld", real.TeamRankToWorld != NULL, DEVICE_API, &theirs) != ncclSuccess) {
    return -1;
  }
  return real.TeamRankToWorld(theirs, team, rank);
}

int ncclTeamRankToLsa(ncclComm_t comm, struct device_team team, int rank) {
  ncclComm_t theirs = NULL;
  if (fallback_comm(comm, "ncclTeamRankToLsa", real.TeamRankToLsa != NULL, DEVICE_API, &theirs) != ncclSuccess) {
    return -1;
  }
  return real.TeamRankToLsa(theirs, team, rank);
}

ncclResult_t ncclLsaBarrierCreateRequirement(struct device_team team, int nBarriers, void *outHandle, void *outReq) {
  if (have_real() && real.LsaBarrierCreateRequirement != NULL) {
    return forwarded(real.LsaBarrierCreateRequirement(team, nBarriers, outHandle, outReq));
  }
  return no_fallback("ncclLsaBarrierCreateRequirement", DEVICE_API);
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, struct device_team team, int nBarriers, void *outHandle,
                                             void *outReq) {
  ncclComm_t theirs = NULL;
  ncclResult_t r = fallback_comm(comm, "ncclGinBarrierCreateRequirement", real.GinBarrierCreateRequirement != NULL,
                                 DEVICE_API, &theirs);
  return r != ncclSuccess ? r : forwarded(real.GinBarrierCreateRequirement(theirs, team, nBarriers, outHandle, outReq));
}

ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, struct device_multimem multimem, void **outPtr) {
  if (have_real() && real.GetMultimemDevicePointer != NULL) {
    return forwarded(real.GetMultimemDevicePointer(window, offset, multimem, outPtr));
  }
  return no_fallback("ncclGetMultimemDevicePointer", WINDOWS);
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  if (have_real() && real.LLA2ACalcSlots != NULL) {
    return real.LLA2ACalcSlots(maxElts, maxEltSize);
  }
  no_fallback("ncclLLA2ACalcSlots", DEVICE_API);
  return -1;
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq) {
  if (have_real() && real.LLA2ACreateRequirement != NULL) {
    return forwarded(real.LLA2ACreateRequirement(nBlocks, nSlots, outHandle, outReq));
  }
  return no_fallback("ncclLLA2ACreateRequirement", DEVICE_API);
}

/* ncclResetDebugInit reads the INFO log's setting (MSCCLGO_NCCL_DEBUG)
 * again, and the fallback's (NCCL_DEBUG) where it has the function. */
void ncclResetDebugInit(void) {
  pthread_once(&log_once, log_init);
  log_init();
  if (have_real() && real.ResetDebugInit != NULL) {
    real.ResetDebugInit();
  }
}

/* ------------------------------------------------------------------ */
/* Collectives and point to point: the Go side decides, per call, whether
 * mscclgo answers it (a plan ran, or an error) or the fallback takes it. */

/* A call deferred to the end of this thread's group (MSCCLGO_DEFER). */
struct deferred_call {
  ncclComm_t comm;
  struct mscclgo_call call;
  struct deferred_call *next;
};

static __thread struct deferred_call *group_calls; /* this thread's, in call order */
static __thread struct deferred_call **group_calls_tail; /* NULL: &group_calls */

/* decide returns 1 with *res set when the call is answered (or deferred
 * to the group's end), 0 when it goes to the fallback. */
static int decide(ncclComm_t comm, struct mscclgo_call *c, ncclResult_t *res) {
  *res = check_comm(comm, c->fn);
  if (*res != ncclSuccess) {
    return 1;
  }
  c->has_fallback = comm->real != NULL;
  c->group_depth = group_depth;
  int out = ncclSuccess;
  switch (mgoDecide(comm->ours, c, &out)) {
  case MSCCLGO_DONE:
    *res = (ncclResult_t)out;
    return 1;
  case MSCCLGO_DEFER: {
    struct deferred_call *d = calloc(1, sizeof *d);
    if (d == NULL) {
      *res = fail(ncclSystemError, "mscclgo: %s: out of memory", c->fn);
      return 1;
    }
    d->comm = comm;
    d->call = *c;
    if (group_calls_tail == NULL) {
      group_calls_tail = &group_calls;
    }
    *group_calls_tail = d;
    group_calls_tail = &d->next;
    *res = ncclSuccess;
    return 1;
  }
  default:
    return 0;
  }
}

/* type_bytes is the size of an element of dt; 0 for an unknown type
 * (the Go side refused those before). */
static size_t type_bytes(ncclDataType_t dt) {
  switch (dt) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

/* by_send_recv runs an alltoall, gather or scatter that mscclgo did not
 * take on a fallback NCCL older than 2.28, which lacks the function: as
 * ncclSend and ncclRecv calls in a group of the fallback's, what NCCL
 * 2.28 does inside and PyTorch did before it. A rank sends to and
 * receives from itself too (NCCL takes that), except where the call is
 * in place and the copy would be onto itself. */
static ncclResult_t by_send_recv(ncclComm_t comm, const struct mscclgo_call *c) {
  if (real.Send == NULL || real.Recv == NULL || real.GroupStart == NULL || real.GroupEnd == NULL) {
    return no_fallback(c->fn, "mscclgo does not take this call (and neither ncclSend nor ncclRecv could make it)");
  }
  ncclDataType_t dt = (ncclDataType_t)c->dtype;
  cudaStream_t st = (cudaStream_t)c->stream;
  size_t bytes = c->count * type_bytes(dt);
  const char *send = c->send;
  char *recv = c->recv;
  int n = comm->nranks, me = comm->rank, root = c->peer;
  logf_("rank %d of %d: %s: the fallback NCCL %s lacks %s: made of ncclSend and ncclRecv in a group", me, n, c->fn, real.path,
        c->fn);
  ncclResult_t r = forwarded(real.GroupStart());
  if (r != ncclSuccess) {
    return r;
  }
  switch (c->coll) {
  case MSCCLGO_ALLTOALL:
    for (int p = 0; p < n && r == ncclSuccess; p++) {
      r = forwarded(real.Send(send + (size_t)p * bytes, c->count, dt, p, comm->real, st));
      if (r == ncclSuccess) {
        r = forwarded(real.Recv(recv + (size_t)p * bytes, c->count, dt, p, comm->real, st));
      }
    }
    break;
  case MSCCLGO_GATHER: {
    int self = !(me == root && send == recv + (size_t)root * bytes); /* the root's own slice moves */
    if (me == root) {
      for (int p = 0; p < n && r == ncclSuccess; p++) {
        if (p != me || self) {
          r = forwarded(real.Recv(recv + (size_t)p * bytes, c->count, dt, p, comm->real, st));
        }
      }
    }
    if (r == ncclSuccess && self) {
      r = forwarded(real.Send(send, c->count, dt, root, comm->real, st));
    }
    break;
  }
  case MSCCLGO_SCATTER: {
    int self = !(me == root && recv == send + (size_t)root * bytes);
    if (me == root) {
      for (int p = 0; p < n && r == ncclSuccess; p++) {
        if (p != me || self) {
          r = forwarded(real.Send(send + (size_t)p * bytes, c->count, dt, p, comm->real, st));
        }
      }
    }
    if (r == ncclSuccess && self) {
      r = forwarded(real.Recv(recv, c->count, dt, root, comm->real, st));
    }
    break;
  }
  default:
    break;
  }
  ncclResult_t re = forwarded(real.GroupEnd()); /* closed even after a failed call */
  return r != ncclSuccess ? r : re;
}

/* forward_call forwards an allreduce, allgather or reducescatter that
 * mscclgo did not take to the fallback: at the call, or, for a call
 * deferred to its group's end, inside the fallback's group, which is
 * still open then. */
static ncclResult_t forward_call(ncclComm_t comm, const struct mscclgo_call *c) {
  ncclRedOp_t op = (ncclRedOp_t)c->op;
  ncclDataType_t dt = (ncclDataType_t)c->dtype;
  cudaStream_t st = (cudaStream_t)c->stream;
  switch (c->coll) {
  case MSCCLGO_ALLREDUCE:
    if (real.AllReduce != NULL) {
      return forwarded(real.AllReduce(c->send, c->recv, c->count, dt, op, comm->real, st));
    }
    break;
  case MSCCLGO_ALLGATHER:
    if (real.AllGather != NULL) {
      return forwarded(real.AllGather(c->send, c->recv, c->count, dt, comm->real, st));
    }
    break;
  case MSCCLGO_REDUCESCATTER:
    if (real.ReduceScatter != NULL) {
      return forwarded(real.ReduceScatter(c->send, c->recv, c->count, dt, op, comm->real, st));
    }
    break;
  case MSCCLGO_ALLTOALL:
    return real.AlltoAll != NULL ? forwarded(real.AlltoAll(c->send, c->recv, c->count, dt, comm->real, st))
                                 : by_send_recv(comm, c);
  case MSCCLGO_GATHER:
    return real.Gather != NULL ? forwarded(real.Gather(c->send, c->recv, c->count, dt, c->peer, comm->real, st))
                               : by_send_recv(comm, c);
  case MSCCLGO_SCATTER:
    return real.Scatter != NULL ? forwarded(real.Scatter(c->send, c->recv, c->count, dt, c->peer, comm->real, st))
                                : by_send_recv(comm, c);
  default:
    break;
  }
  return no_fallback(c->fn, "mscclgo does not take this call");
}

/* run_group runs this thread's deferred calls at the outermost
 * ncclGroupEnd: mscclgo's at once (each communicator's in order), then
 * the ones it left to the fallback. It returns the first failure. */
static ncclResult_t run_group(struct deferred_call *list) {
  int n = 0;
  for (struct deferred_call *d = list; d != NULL; d = d->next) {
    n++;
  }
  uintptr_t *hs = calloc((size_t)n, sizeof *hs);
  struct mscclgo_call *calls = calloc((size_t)n, sizeof *calls);
  int *verdicts = calloc((size_t)n, sizeof *verdicts), *results = calloc((size_t)n, sizeof *results);
  ncclResult_t r = ncclSuccess;
  if (hs == NULL || calls == NULL || verdicts == NULL || results == NULL) {
    r = fail(ncclSystemError, "mscclgo: ncclGroupEnd: out of memory for %d calls", n);
    goto out;
  }
  int i = 0;
  for (struct deferred_call *d = list; d != NULL; d = d->next, i++) {
    r = check_comm(d->comm, d->call.fn);
    if (r != ncclSuccess) {
      goto out;
    }
    hs[i] = d->comm->ours;
    calls[i] = d->call;
  }
  mgoRunGroup(n, hs, calls, verdicts, results);
  i = 0;
  for (struct deferred_call *d = list; d != NULL; d = d->next, i++) {
    ncclResult_t ri = verdicts[i] == MSCCLGO_DONE ? (ncclResult_t)results[i] : forward_call(d->comm, &calls[i]);
    if (ri != ncclSuccess && r == ncclSuccess) {
      r = ri;
    }
  }
out:
  free(hs);
  free(calls);
  free(verdicts);
  free(results);
  return r;
}

#define CALL(fn_, coll_, send_, recv_, count_, dtype_, op_, peer_, stream_)                                            \
  struct mscclgo_call c = {.fn = fn_,                                                                                  \
                           .coll = coll_,                                                                              \
                           .send = (send_),                                                                            \
                           .recv = (recv_),                                                                            \
                           .count = count_,                                                                            \
                           .dtype = (int)(dtype_),                                                                     \
                           .op = (int)(op_),                                                                           \
                           .peer = peer_,                                                                              \
                           .stream = (uintptr_t)(stream_)};                                                            \
  ncclResult_t res;                                                                                                    \
  if (decide(comm, &c, &res)) {                                                                                        \
    return res;                                                                                                        \
  }

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclAllReduce", MSCCLGO_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1, stream);
  return forward_call(comm, &c);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
  CALL("ncclAllGather", MSCCLGO_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, -1, -1, stream);
  return forward_call(comm, &c);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclReduceScatter", MSCCLGO_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1, stream);
  return forward_call(comm, &c);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclBroadcast", MSCCLGO_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root, stream);
  if (real.Broadcast == NULL) {
    return no_fallback(c.fn, "mscclgo does not take this call");
  }
  return forwarded(real.Broadcast(sendbuff, recvbuff, count, datatype, root, comm->real, stream));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclBcast", MSCCLGO_BROADCAST, buff, buff, count, datatype, -1, root, stream);
  if (real.Bcast == NULL) {
    return no_fallback(c.fn, "mscclgo does not take this call");
  }
  return forwarded(real.Bcast(buff, count, datatype, root, comm->real, stream));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclReduce", MSCCLGO_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream);
  if (real.Reduce == NULL) {
    return no_fallback(c.fn, "mscclgo does not take this call");
  }
  return forwarded(real.Reduce(sendbuff, recvbuff, count, datatype, op, root, comm->real, stream));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CALL("ncclSend", MSCCLGO_SEND, sendbuff, NULL, count, datatype, -1, peer, stream);
  if (real.Send == NULL) {
    return no_fallback(c.fn, "mscclgo does not take this call");
  }
  return forwarded(real.Send(sendbuff, count, datatype, peer, comm->real, stream));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CALL("ncclRecv", MSCCLGO_RECV, NULL, recvbuff, count, datatype, -1, peer, stream);
  if (real.Recv == NULL) {
    return no_fallback(c.fn, "mscclgo does not take this call");
  }
  return forwarded(real.Recv(recvbuff, count, datatype, peer, comm->real, stream));
}

/* NCCL 2.28's collectives: the Go side checks and decides them as the
 * others (mscclgo runs no plan for them); the fallback takes them, by its
 * own function or, where it is older, by its ncclSend and ncclRecv. */

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  CALL("ncclAlltoAll", MSCCLGO_ALLTOALL, sendbuff, recvbuff, count, datatype, -1, -1, stream);
  return forward_call(comm, &c);
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclGather", MSCCLGO_GATHER, sendbuff, recvbuff, count, datatype, -1, root, stream);
  return forward_call(comm, &c);
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  CALL("ncclScatter", MSCCLGO_SCATTER, sendbuff, recvbuff, count, datatype, -1, root, stream);
  return forward_call(comm, &c);
}

/* ------------------------------------------------------------------ */
/* Groups: the depth is per thread, as NCCL's; the fallback sees every
 * group, so that the calls forwarded inside one are grouped there too. */

ncclResult_t ncclGroupStart(void) {
  if (have_real() && real.GroupStart != NULL) {
    ncclResult_t r = forwarded(real.GroupStart());
    if (r != ncclSuccess) {
      return r;
    }
  }
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0) {
    return fail(ncclInvalidUsage, "mscclgo: ncclGroupEnd without a matching ncclGroupStart");
  }
  group_depth--;
  struct rank_init *inits = NULL;
  ncclResult_t r = ncclSuccess;
  if (group_depth == 0 && group_inits != NULL) {
    inits = group_inits;
    group_inits = NULL;
    r = finish_inits(inits);
  }
  if (group_depth == 0 && group_calls != NULL) {
    struct deferred_call *calls = group_calls;
    group_calls = NULL;
    group_calls_tail = NULL;
    ncclResult_t rc = r == ncclSuccess ? run_group(calls) : r;
    if (r == ncclSuccess) {
      r = rc;
    }
    while (calls != NULL) {
      struct deferred_call *next = calls->next;
      free(calls);
      calls = next;
    }
  }
  if (have_real() && real.GroupEnd != NULL) {
    ncclResult_t rr = forwarded(real.GroupEnd());
    if (r == ncclSuccess) {
      r = rr;
    }
  }
  while (inits != NULL) {
    struct rank_init *next = inits->next;
    init_done(inits, r);
    free(inits);
    inits = next;
  }
  return r;
}

/* discard_group drops this thread's group at the end of a simulated one,
 * which runs nothing: its deferred inits leave their handles ended (a use
 * names it), its deferred calls are forgotten. Nothing of it is left for
 * the next group. */
static void discard_group(void) {
  while (group_inits != NULL) {
    struct rank_init *p = group_inits;
    group_inits = p->next;
    p->comm->ended_by = "ncclGroupSimulateEnd, which creates no communicator";
    __atomic_store_n(&p->comm->magic, COMM_DEAD, __ATOMIC_RELEASE);
    free(p);
  }
  while (group_calls != NULL) {
    struct deferred_call *d = group_calls;
    group_calls = d->next;
    free(d);
  }
  group_calls_tail = NULL;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  if (group_depth == 0) {
    return fail(ncclInvalidUsage, "mscclgo: ncclGroupSimulateEnd without a matching ncclGroupStart");
  }
  group_depth--;
  if (group_depth == 0) {
    discard_group();
  }
  if (have_real() && real.GroupSimulateEnd != NULL) {
    return forwarded(real.GroupSimulateEnd(simInfo));
  }
  return no_fallback("ncclGroupSimulateEnd", "mscclgo does not simulate groups");
}
