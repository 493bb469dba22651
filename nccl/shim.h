/*
 * shim.h: the interface between the C layer of the NCCL library (shim.c:
 * the exact NCCL prototypes, the fallback NCCL, errors, logging) and its
 * Go side (communicators, plan choice). Declarations only: cgo includes it
 * in a file that exports Go functions.
 */
#ifndef MSCCLGO_NCCL_SHIM_H
#define MSCCLGO_NCCL_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MSCCLGO_NCCL_NO_CUDA_RUNTIME 1
#include "include/nccl.h"
#include "include/mscclgo.h"

/* The collective of a call, as the Go side names it. */
enum mscclgo_coll {
  MSCCLGO_ALLREDUCE = 0,
  MSCCLGO_ALLGATHER = 1,
  MSCCLGO_REDUCESCATTER = 2,
  MSCCLGO_BROADCAST = 3,
  MSCCLGO_REDUCE = 4,
  MSCCLGO_SEND = 5,
  MSCCLGO_RECV = 6,
  MSCCLGO_ALLTOALL = 7, /* NCCL 2.28's ncclAlltoAll, ncclGather, ncclScatter */
  MSCCLGO_GATHER = 8,
  MSCCLGO_SCATTER = 9
};

/* One collective or point-to-point call, handed to mgoDecide. */
struct mscclgo_call {
  const char *fn;     /* the NCCL function, e.g. "ncclAllReduce" */
  int coll;           /* enum mscclgo_coll */
  const void *send;   /* device pointers, as given */
  void *recv;
  size_t count;       /* elements, as NCCL counts them for fn */
  int dtype;          /* ncclDataType_t */
  int op;             /* ncclRedOp_t, or -1 where fn has none */
  int peer;           /* root or peer, or -1 */
  uintptr_t stream;   /* cudaStream_t */
  int has_fallback;   /* the communicator has a fallback communicator */
  int group_depth;    /* ncclGroupStart depth of the calling thread */
};

/* What mgoDecide answers. */
enum mscclgo_decision {
  MSCCLGO_FORWARD = 0, /* forward the call to the fallback NCCL */
  MSCCLGO_DONE = 1,    /* the call is answered: its result is in *res */
  MSCCLGO_DEFER = 2    /* inside a group: run it at the outermost ncclGroupEnd (mgoRunGroup) */
};

/* The Go side (the Go files beside this one). Every one returns an ncclResult_t value and, on
 * failure, has set the last error. */
extern int mgoUniqueID(char *id);
extern void mgoReleaseIDs(char *ids, int n);
extern int mgoCommInit(int nranks, int rank, char *id, int dev, int hasReal, char *realID, uintptr_t *out);
/* mgoCommInitAbortable is mgoCommInit for a nonblocking init, which gives
 * up once *abort is set (atomically, by its ncclCommAbort). */
extern int mgoCommInitAbortable(int nranks, int rank, char *id, int dev, int hasReal, char *realID, int *abort, uintptr_t *out);
/* mgoCheckInit checks ncclCommInitRank's count of ranks and rank (fn: the
 * function named in the error), for a nonblocking init, whose work runs
 * after the call returned. */
extern int mgoCheckInit(char *fn, int nranks, int rank);
/* mgoCheckRanks checks a count of ranks (what: the argument's name) before
 * anything is allocated for them. */
extern int mgoCheckRanks(char *fn, char *what, int n);
/* mgoRedOp records a reduction created (created set) or destroyed on the
 * communicator, which calls may then name. */
extern void mgoRedOp(uintptr_t h, int op, int created);
extern int mgoCommInitAll(int ndev, int *devs, uintptr_t *out);
extern int mgoCommSplit(uintptr_t parent, int color, int key, int dev, uintptr_t *out, int *rank, int *size);
extern int mgoCommFinalize(uintptr_t h);
extern int mgoCommDestroy(uintptr_t h);
extern int mgoCommAbort(uintptr_t h);
extern int mgoCommAsyncError(uintptr_t h, int *res);
extern int mgoDecide(uintptr_t h, struct mscclgo_call *call, int *res);
/* mgoRunGroup runs the n calls deferred in a group (call i of
 * communicator hs[i]): verdicts[i] is MSCCLGO_DONE (result in results[i])
 * or MSCCLGO_FORWARD. */
extern void mgoRunGroup(int n, uintptr_t *hs, struct mscclgo_call *calls, int *verdicts, int *results);

/* The custom communicator's (mscclgo.h) Go side. */
extern int mgoCustomInitEnv(int dev, uintptr_t *out, int *rank, int *size);
extern int mgoCustomRegister(uintptr_t h, char *path, int *count);
extern int mgoCustomSetSelector(uintptr_t h, mscclgoSelector_t selector, void *user);
extern int mgoCustomSelect(uintptr_t h, char *collective, char *plan, void *send, void *recv, size_t count, int dtype,
                               char *name, size_t cap);
extern int mgoCustomExecute(uintptr_t h, char *collective, char *plan, void *send, void *recv, size_t count, int dtype,
                                uintptr_t stream, int host);

/* The C side, for Go. */
const char *mscclgo_call_selector(mscclgoSelector_t selector, const mscclgoRequest_t *req, void *user);
int mscclgo_current_device(void);
/* mscclgo_set_error sets the last error, and logs it if log is set. */
void mscclgo_set_error(const char *msg, int log);
int mscclgo_log_enabled(void);
/* mscclgo_log_state is -1 until the log's setting was read, then
 * mscclgo_log_enabled's answer: Go reads it without a call. */
extern int mscclgo_log_state;
void mscclgo_log(const char *msg);
const char *mscclgo_fallback_why(void);

#endif
