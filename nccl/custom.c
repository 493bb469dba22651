/*
 * custom.c: the C face of mscclgo's own communicator (include/mscclgo.h).
 * Like an NCCL communicator (shim.c), an mscclgoComm holds the Go
 * communicator's handle and is kept, marked, after destroy so that a later
 * use is named. It has no fallback: what mscclgo cannot run fails.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Go side of mscclgoExecuteOp and mscclgoExecuteHostOp (custom.go). */
extern int mgoCustomExecuteOp(uintptr_t h, char *collective, char *plan, void *send, void *recv, size_t count, int dtype,
                              int op, void *scalar, uintptr_t stream, int host);

/* The Go side of mscclgoExecuteHostGather (custom.go). */
extern int mgoCustomExecuteGather(uintptr_t h, char *plan, void *send, void *recvs, size_t count, int dtype);

#define MCOMM_LIVE 0x6d7363636c636f31ULL
#define MCOMM_DEAD 0x6d7363636c636f30ULL

struct mscclgoComm {
  uint64_t magic;
  uintptr_t ours;
  int rank, nranks;
};

static ncclResult_t failc(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t failc(ncclResult_t r, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mscclgo_set_error(buf, 1);
  return r;
}

static ncclResult_t check(const struct mscclgoComm *comm, const char *fn) {
  if (comm == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: %s: the communicator is NULL", fn);
  }
  uint64_t magic = __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE);
  if (magic == MCOMM_DEAD) {
    return failc(ncclInvalidUsage, "mscclgo: %s: communicator %p (rank %d of %d) was used after mscclgoCommDestroy", fn,
                 (const void *)comm, comm->rank, comm->nranks);
  }
  if (magic != MCOMM_LIVE) {
    return failc(ncclInvalidArgument, "mscclgo: %s: %p is not an mscclgo communicator", fn, (const void *)comm);
  }
  return ncclSuccess;
}

static ncclResult_t made(mscclgoComm_t *comm, uintptr_t ours, int rank, int nranks) {
  struct mscclgoComm *c = calloc(1, sizeof *c);
  if (c == NULL) {
    mgoCommDestroy(ours);
    return failc(ncclSystemError, "mscclgo: out of memory");
  }
  c->magic = MCOMM_LIVE;
  c->ours = ours;
  c->rank = rank;
  c->nranks = nranks;
  *comm = c;
  return ncclSuccess;
}

ncclResult_t mscclgoCommInitRank(mscclgoComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  if (comm == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoCommInitRank: comm is NULL");
  }
  *comm = NULL;
  ncclUniqueId none;
  memset(&none, 0, sizeof none);
  uintptr_t ours = 0;
  ncclResult_t r =
      (ncclResult_t)mgoCommInit(nranks, rank, id.internal, mscclgo_current_device(), 0, none.internal, &ours);
  if (r != ncclSuccess) {
    return r;
  }
  return made(comm, ours, rank, nranks);
}

ncclResult_t mscclgoCommInitEnv(mscclgoComm_t *comm) {
  if (comm == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoCommInitEnv: comm is NULL");
  }
  *comm = NULL;
  uintptr_t ours = 0;
  int rank = -1, size = 0;
  ncclResult_t r = (ncclResult_t)mgoCustomInitEnv(mscclgo_current_device(), &ours, &rank, &size);
  if (r != ncclSuccess) {
    return r;
  }
  return made(comm, ours, rank, size);
}

ncclResult_t mscclgoCommRank(mscclgoComm_t comm, int *rank) {
  ncclResult_t r = check(comm, "mscclgoCommRank");
  if (r == ncclSuccess && rank == NULL) {
    r = failc(ncclInvalidArgument, "mscclgo: mscclgoCommRank: rank is NULL");
  }
  if (r == ncclSuccess) {
    *rank = comm->rank;
  }
  return r;
}

ncclResult_t mscclgoCommSize(mscclgoComm_t comm, int *size) {
  ncclResult_t r = check(comm, "mscclgoCommSize");
  if (r == ncclSuccess && size == NULL) {
    r = failc(ncclInvalidArgument, "mscclgo: mscclgoCommSize: size is NULL");
  }
  if (r == ncclSuccess) {
    *size = comm->nranks;
  }
  return r;
}

ncclResult_t mscclgoRegisterPlan(mscclgoComm_t comm, const char *path, int *count) {
  ncclResult_t r = check(comm, "mscclgoRegisterPlan");
  if (r != ncclSuccess) {
    return r;
  }
  if (path == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoRegisterPlan: path is NULL");
  }
  int n = 0;
  r = (ncclResult_t)mgoCustomRegister(comm->ours, (char *)path, &n);
  if (r == ncclSuccess && count != NULL) {
    *count = n;
  }
  return r;
}

ncclResult_t mscclgoSetSelector(mscclgoComm_t comm, mscclgoSelector_t selector, void *user) {
  ncclResult_t r = check(comm, "mscclgoSetSelector");
  if (r != ncclSuccess) {
    return r;
  }
  return (ncclResult_t)mgoCustomSetSelector(comm->ours, selector, user);
}

const char *mscclgo_call_selector(mscclgoSelector_t selector, const mscclgoRequest_t *req, void *user) {
  return selector(req, user);
}

ncclResult_t mscclgoSelect(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                           const void *recvbuff, size_t count, ncclDataType_t datatype, char *name, size_t cap) {
  ncclResult_t r = check(comm, "mscclgoSelect");
  if (r != ncclSuccess) {
    return r;
  }
  if (collective == NULL || name == NULL || cap == 0) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoSelect: collective or name is NULL, or cap is 0");
  }
  return (ncclResult_t)mgoCustomSelect(comm->ours, (char *)collective, (char *)plan, (void *)sendbuff, (void *)recvbuff,
                                           count, (int)datatype, name, cap);
}

ncclResult_t mscclgoExecute(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                            void *recvbuff, size_t count, ncclDataType_t datatype, cudaStream_t stream) {
  ncclResult_t r = check(comm, "mscclgoExecute");
  if (r != ncclSuccess) {
    return r;
  }
  if (collective == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoExecute: collective is NULL");
  }
  return (ncclResult_t)mgoCustomExecute(comm->ours, (char *)collective, (char *)plan, (void *)sendbuff, recvbuff, count,
                                            (int)datatype, (uintptr_t)stream, 0);
}

ncclResult_t mscclgoExecuteHost(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                                void *recvbuff, size_t count, ncclDataType_t datatype) {
  ncclResult_t r = check(comm, "mscclgoExecuteHost");
  if (r != ncclSuccess) {
    return r;
  }
  if (collective == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoExecuteHost: collective is NULL");
  }
  return (ncclResult_t)mgoCustomExecute(comm->ours, (char *)collective, (char *)plan, (void *)sendbuff, recvbuff, count,
                                            (int)datatype, 0, 1);
}

ncclResult_t mscclgoExecuteOp(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                              void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, const void *scalar,
                              cudaStream_t stream) {
  ncclResult_t r = check(comm, "mscclgoExecuteOp");
  if (r != ncclSuccess) {
    return r;
  }
  if (collective == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoExecuteOp: collective is NULL");
  }
  return (ncclResult_t)mgoCustomExecuteOp(comm->ours, (char *)collective, (char *)plan, (void *)sendbuff, recvbuff, count,
                                          (int)datatype, (int)op, (void *)scalar, (uintptr_t)stream, 0);
}

ncclResult_t mscclgoExecuteHostOp(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                                  void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, const void *scalar) {
  ncclResult_t r = check(comm, "mscclgoExecuteHostOp");
  if (r != ncclSuccess) {
    return r;
  }
  if (collective == NULL) {
    return failc(ncclInvalidArgument, "mscclgo: mscclgoExecuteHostOp: collective is NULL");
  }
  return (ncclResult_t)mgoCustomExecuteOp(comm->ours, (char *)collective, (char *)plan, (void *)sendbuff, recvbuff, count,
                                          (int)datatype, (int)op, (void *)scalar, 0, 1);
}

ncclResult_t mscclgoExecuteHostGather(mscclgoComm_t comm, const char *plan, const void *sendbuff, void *const *recvbuffs,
                                      size_t count, ncclDataType_t datatype) {
  ncclResult_t r = check(comm, "mscclgoExecuteHostGather");
  if (r != ncclSuccess) {
    return r;
  }
  return (ncclResult_t)mgoCustomExecuteGather(comm->ours, (char *)plan, (void *)sendbuff, (void *)recvbuffs, count,
                                              (int)datatype);
}

ncclResult_t mscclgoCommDestroy(mscclgoComm_t comm) {
  if (comm != NULL && __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE) == MCOMM_DEAD) {
    return failc(ncclInvalidUsage, "mscclgo: mscclgoCommDestroy: communicator %p (rank %d of %d) was destroyed already",
                 (const void *)comm, comm->rank, comm->nranks);
  }
  ncclResult_t r = check(comm, "mscclgoCommDestroy");
  if (r != ncclSuccess) {
    return r;
  }
  /* One destroy wins; another, concurrent or later, is refused. */
  uint64_t live = MCOMM_LIVE;
  if (!__atomic_compare_exchange_n(&comm->magic, &live, MCOMM_DEAD, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return failc(ncclInvalidUsage, "mscclgo: mscclgoCommDestroy: communicator %p (rank %d of %d) was destroyed already",
                 (const void *)comm, comm->rank, comm->nranks);
  }
  return (ncclResult_t)mgoCommDestroy(comm->ours);
}
