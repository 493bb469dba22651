/*
 * A stand-in for the real NCCL, for the tests of the fallback: every call
 * appends one line to the file named by STUB_NCCL_LOG ("stub FN args"),
 * and succeeds, unless STUB_NCCL_FAIL names it: it then fails with
 * ncclSystemError and a last error of its own. It moves no data.
 *
 * Built with -DMSCCLGO_NCCL_API_2_22_ONLY it is an NCCL 2.22: without the
 * later functions (a fallback older than the caller's nccl.h).
 */
#define _GNU_SOURCE
#include "nccl.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ncclComm {
  unsigned magic;
  int serial, rank, nranks;
};

#define STUB_MAGIC 0x57ab57abu

static int serials; /* communicators made, across threads */
static char last[256] = "stub: no error";

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...) {
  const char *path = getenv("STUB_NCCL_LOG");
  if (path == NULL) {
    return;
  }
  char line[512];
  int n = snprintf(line, sizeof line, "stub ");
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 2) {
    n = (int)sizeof line - 2;
  }
  line[n++] = '\n';
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0) {
    if (write(fd, line, (size_t)n) != n) {
      perror("stub nccl: log");
    }
    close(fd);
  }
}

/* injected reports whether fn is to fail. */
static int injected(const char *fn) {
  const char *f = getenv("STUB_NCCL_FAIL");
  if (f != NULL && strcmp(f, fn) == 0) {
    snprintf(last, sizeof last, "stub: injected failure in %s", fn);
    return 1;
  }
  return 0;
}

static ncclComm_t make(int rank, int nranks) {
  struct ncclComm *c = calloc(1, sizeof *c);
  c->magic = STUB_MAGIC;
  c->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_SEQ_CST);
  c->rank = rank;
  c->nranks = nranks;
  return c;
}

/* who names a communicator: serial:rank/nranks, or "bad" for one that is
 * not the stub's (which would be a forwarding bug). */
static const char *who(ncclComm_t c, char *buf, size_t cap) {
  if (c == NULL || c->magic != STUB_MAGIC) {
    snprintf(buf, cap, "bad(%p)", (void *)c);
  } else {
    snprintf(buf, cap, "%d:%d/%d", c->serial, c->rank, c->nranks);
  }
  return buf;
}

#define WHO(c) who(c, whobuf, sizeof whobuf)
#define ENTER(fn)                                                                                                      \
  char whobuf[64];                                                                                                     \
  (void)whobuf;                                                                                                        \
  if (injected(fn)) {                                                                                                  \
    record("%s failed", fn);                                                                                           \
    return ncclSystemError;                                                                                            \
  }

ncclResult_t ncclGetVersion(int *version) {
  ENTER("ncclGetVersion");
  *version = 22299;
  record("ncclGetVersion");
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  ENTER("ncclGetUniqueId");
  static int ids;
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "stubid-%d-%d", (int)getpid(), __atomic_add_fetch(&ids, 1, __ATOMIC_SEQ_CST));
  record("ncclGetUniqueId %s", id->internal);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
  ENTER("ncclCommInitRankConfig");
  *comm = make(rank, nranks);
  char idbuf[NCCL_UNIQUE_ID_BYTES + 1];
  memcpy(idbuf, id.internal, NCCL_UNIQUE_ID_BYTES);
  idbuf[NCCL_UNIQUE_ID_BYTES] = '\0';
  if (config != NULL) {
    record("ncclCommInitRankConfig %s id=%s config=set blocking=%d", WHO(*comm), idbuf, config->blocking);
  } else {
    record("ncclCommInitRankConfig %s id=%s config=null", WHO(*comm), idbuf);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  ENTER("ncclCommInitAll");
  for (int i = 0; i < ndev; i++) {
    comm[i] = make(i, ndev);
  }
  record("ncclCommInitAll ndev=%d devlist=%s", ndev, devlist ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  ENTER("ncclCommSplit");
  (void)config;
  *newcomm = color == NCCL_SPLIT_NOCOLOR ? NULL : make(-1, -1);
  record("ncclCommSplit %s color=%d key=%d", WHO(comm), color, key);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ENTER("ncclCommFinalize");
  record("ncclCommFinalize %s", WHO(comm));
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ENTER("ncclCommDestroy");
  record("ncclCommDestroy %s", WHO(comm));
  comm->magic = 0;
  return ncclSuccess;
}

/* STUB_NCCL_NO_ABORT builds a fallback without ncclCommAbort
 * (hostile_test.go). */
#ifndef STUB_NCCL_NO_ABORT
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ENTER("ncclCommAbort");
  record("ncclCommAbort %s", WHO(comm));
  comm->magic = 0;
  return ncclSuccess;
}
#endif

const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  ENTER("ncclCommGetAsyncError");
  *asyncError = ncclSuccess;
  record("ncclCommGetAsyncError %s", WHO(comm));
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  ENTER("ncclCommRegister");
  *handle = buff;
  record("ncclCommRegister %s size=%zu", WHO(comm), size);
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  ENTER("ncclCommDeregister");
  (void)handle;
  record("ncclCommDeregister %s", WHO(comm));
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                                      ncclComm_t comm) {
  ENTER("ncclRedOpCreatePreMulSum");
  (void)scalar;
  *op = (ncclRedOp_t)(ncclNumOps + 1);
  record("ncclRedOpCreatePreMulSum %s dtype=%d residence=%d", WHO(comm), (int)datatype, (int)residence);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ENTER("ncclRedOpDestroy");
  record("ncclRedOpDestroy %s op=%d", WHO(comm), (int)op);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclAllReduce");
  record("ncclAllReduce %s count=%zu dtype=%d op=%d inplace=%d stream=%p", WHO(comm), count, (int)datatype, (int)op,
         sendbuff == recvbuff, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
  ENTER("ncclAllGather");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclAllGather %s count=%zu dtype=%d stream=%p", WHO(comm), sendcount, (int)datatype, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclReduceScatter");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclReduceScatter %s count=%zu dtype=%d op=%d stream=%p", WHO(comm), recvcount, (int)datatype, (int)op,
         (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclBroadcast");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclBroadcast %s count=%zu dtype=%d root=%d stream=%p", WHO(comm), count, (int)datatype, root, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclBcast");
  (void)buff;
  record("ncclBcast %s count=%zu dtype=%d root=%d stream=%p", WHO(comm), count, (int)datatype, root, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclReduce");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclReduce %s count=%zu dtype=%d op=%d root=%d stream=%p", WHO(comm), count, (int)datatype, (int)op, root,
         (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  ENTER("ncclSend");
  (void)sendbuff;
  record("ncclSend %s count=%zu dtype=%d peer=%d stream=%p", WHO(comm), count, (int)datatype, peer, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclRecv");
  (void)recvbuff;
  record("ncclRecv %s count=%zu dtype=%d peer=%d stream=%p", WHO(comm), count, (int)datatype, peer, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  ENTER("ncclGroupStart");
  record("ncclGroupStart");
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  ENTER("ncclGroupEnd");
  record("ncclGroupEnd");
  return ncclSuccess;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  ENTER("ncclGroupSimulateEnd");
  simInfo->estimatedTime = 1.0f;
  record("ncclGroupSimulateEnd");
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  ENTER("ncclMemAlloc");
  *ptr = malloc(size);
  record("ncclMemAlloc size=%zu", size);
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void *ptr) {
  ENTER("ncclMemFree");
  free(ptr);
  record("ncclMemFree");
  return ncclSuccess;
}

#ifndef MSCCLGO_NCCL_API_2_22_ONLY
/* Later releases' functions. A window is the registered buffer's address. */

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                            ncclConfig_t *config, int shrinkFlags) {
  ENTER("ncclCommShrink");
  (void)excludeRanksList;
  (void)config;
  *newcomm = make(-1, -1);
  record("ncclCommShrink %s excluded=%d flags=%d", WHO(comm), excludeRanksCount, shrinkFlags);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  ENTER("ncclCommWindowRegister");
  *win = (ncclWindow_t)buff;
  record("ncclCommWindowRegister %s size=%zu flags=%d", WHO(comm), size, winFlags);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ENTER("ncclCommWindowDeregister");
  record("ncclCommWindowDeregister %s win=%s", WHO(comm), win != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *outDevComm) {
  ENTER("ncclDevCommCreate");
  record("ncclDevCommCreate %s reqs=%s out=%s", WHO(comm), reqs != NULL ? "set" : "null", outDevComm != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
  ENTER("ncclDevCommDestroy");
  record("ncclDevCommDestroy %s devcomm=%s", WHO(comm), devComm != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr) {
  ENTER("ncclGetLsaMultimemDevicePointer");
  *outPtr = (char *)window + offset;
  record("ncclGetLsaMultimemDevicePointer offset=%zu", offset);
  return ncclSuccess;
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclSignal");
  record("ncclSignal %s peer=%d sig=%d ctx=%d flags=%u stream=%p", WHO(comm), peer, sigIdx, ctx, flags, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclWaitSignal");
  record("ncclWaitSignal %s n=%d first=%d:%d:%d:%d stream=%p", WHO(comm), nDesc, signalDescs[0].opCnt, signalDescs[0].peer,
         signalDescs[0].sigIdx, signalDescs[0].ctx, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  ENTER("ncclCommSuspend");
  record("ncclCommSuspend %s flags=%d", WHO(comm), flags);
  return ncclSuccess;
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  ENTER("ncclCommResume");
  record("ncclCommResume %s", WHO(comm));
  return ncclSuccess;
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value) {
  ENTER("ncclCommMemStats");
  *value = 4096u * ((uint64_t)stat + 1);
  record("ncclCommMemStats %s stat=%d", WHO(comm), (int)stat);
  return ncclSuccess;
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  ENTER("ncclAlltoAll");
  record("ncclAlltoAll %s count=%zu dtype=%d inplace=%d stream=%p", WHO(comm), count, (int)datatype, sendbuff == recvbuff,
         (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclGather");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclGather %s count=%zu dtype=%d root=%d stream=%p", WHO(comm), count, (int)datatype, root, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  ENTER("ncclScatter");
  (void)sendbuff;
  (void)recvbuff;
  record("ncclScatter %s count=%zu dtype=%d root=%d stream=%p", WHO(comm), count, (int)datatype, root, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ENTER("ncclCommRevoke");
  record("ncclCommRevoke %s flags=%d", WHO(comm), revokeFlags);
  return ncclSuccess;
}

ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream) {
  ENTER("ncclPutSignal");
  (void)localbuff;
  record("ncclPutSignal %s count=%zu dtype=%d peer=%d win=%s offset=%zu sig=%d ctx=%d flags=%u stream=%p", WHO(comm), count,
         (int)datatype, peer, peerWin != NULL ? "set" : "null", peerWinOffset, sigIdx, ctx, flags, (void *)stream);
  return ncclSuccess;
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr) {
  ENTER("ncclWinGetUserPtr");
  *outUserPtr = (void *)win;
  record("ncclWinGetUserPtr %s", WHO(comm));
  return ncclSuccess;
}

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props) {
  ENTER("ncclCommQueryProperties");
  record("ncclCommQueryProperties %s props=%s", WHO(comm), props != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr) {
  ENTER("ncclGetLsaDevicePointer");
  *outPtr = (char *)window + offset;
  record("ncclGetLsaDevicePointer offset=%zu rank=%d", offset, lsaRank);
  return ncclSuccess;
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr) {
  ENTER("ncclGetPeerDevicePointer");
  *outPtr = (char *)window + offset;
  record("ncclGetPeerDevicePointer offset=%zu peer=%d", offset, peer);
  return ncclSuccess;
}

void ncclResetDebugInit(void) { record("ncclResetDebugInit"); }

/* nccl_device.h's host functions, with its team and multimem handle
 * layouts (nccl.h does not declare them). */
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

/* The stub's teams: world, LSA and rail tell themselves apart by stride. */
static struct team stub_team(ncclComm_t comm, const char *fn, int stride) {
  char whobuf[64];
  record("%s %s", fn, WHO(comm));
  return (struct team){comm->nranks, comm->rank, stride};
}
struct team ncclTeamWorld(ncclComm_t comm) { return stub_team(comm, "ncclTeamWorld", 1); }
struct team ncclTeamLsa(ncclComm_t comm) { return stub_team(comm, "ncclTeamLsa", 2); }
struct team ncclTeamRail(ncclComm_t comm) { return stub_team(comm, "ncclTeamRail", 3); }

int ncclTeamRankToWorld(ncclComm_t comm, struct team team, int rank) {
  char whobuf[64];
  record("ncclTeamRankToWorld %s team=%d:%d:%d rank=%d", WHO(comm), team.nRanks, team.rank, team.stride, rank);
  return 100 + rank;
}

int ncclTeamRankToLsa(ncclComm_t comm, struct team team, int rank) {
  char whobuf[64];
  record("ncclTeamRankToLsa %s team=%d:%d:%d rank=%d", WHO(comm), team.nRanks, team.rank, team.stride, rank);
  return 200 + rank;
}

ncclResult_t ncclLsaBarrierCreateRequirement(struct team team, int nBarriers, void *outHandle, void *outReq) {
  ENTER("ncclLsaBarrierCreateRequirement");
  record("ncclLsaBarrierCreateRequirement team=%d:%d:%d n=%d handle=%s req=%s", team.nRanks, team.rank, team.stride, nBarriers,
         outHandle != NULL ? "set" : "null", outReq != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, struct team team, int nBarriers, void *outHandle, void *outReq) {
  ENTER("ncclGinBarrierCreateRequirement");
  record("ncclGinBarrierCreateRequirement %s team=%d:%d:%d n=%d handle=%s req=%s", WHO(comm), team.nRanks, team.rank,
         team.stride, nBarriers, outHandle != NULL ? "set" : "null", outReq != NULL ? "set" : "null");
  return ncclSuccess;
}

ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, struct multimem mm, void **outPtr) {
  ENTER("ncclGetMultimemDevicePointer");
  (void)window;
  *outPtr = (char *)mm.mcBasePtr + offset;
  record("ncclGetMultimemDevicePointer offset=%zu", offset);
  return ncclSuccess;
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  record("ncclLLA2ACalcSlots %d %d", maxElts, maxEltSize);
  return maxElts * maxEltSize / 8;
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq) {
  ENTER("ncclLLA2ACreateRequirement");
  record("ncclLLA2ACreateRequirement blocks=%d slots=%d handle=%s req=%s", nBlocks, nSlots, outHandle != NULL ? "set" : "null",
         outReq != NULL ? "set" : "null");
  return ncclSuccess;
}
#endif
