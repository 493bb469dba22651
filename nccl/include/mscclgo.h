/*
 * mscclgo.h: mscclgo's own communicator, in the same library as its NCCL
 * API (libmscclgo_nccl.so), for programs that choose the plans themselves:
 * register plan files or plan-set directories, set a selector, execute a
 * named plan or let the selector choose. Results are ncclResult_t values;
 * mscclgoGetLastError gives the message of the calling thread's last
 * failure (ncclGetLastError the process's).
 *
 * Plans run on a device through the library's device build (make nccl
 * NCCL_BACKEND=cuda), and on buffers in host memory on the CPU backend:
 * mscclgoExecuteHost always, mscclgoExecute with MSCCLGO_NCCL_HOSTMEM=1.
 * Host-memory runs take ranks that are threads of one process and ranks
 * that are processes (torchrun, mpirun) alike (docs/integration.md).
 * Elsewhere mscclgoExecute returns ncclInvalidUsage saying why.
 */
#ifndef MSCCLGO_H_
#define MSCCLGO_H_

#include "nccl.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mscclgoComm *mscclgoComm_t;

/* The message of the calling thread's last failure, or, when it has had
 * none, the process's last (ncclGetLastError). */
const char *mscclgoGetLastError(void);

/* A collective call, as a selector sees it. */
typedef struct {
  const char *collective; /* "allreduce", "allgather" or "reducescatter" */
  size_t size;            /* bytes: the output for allgather, the input otherwise */
  int worldSize;
  int ranksPerNode;
  int inPlace; /* NCCL's in-place rule for the collective */
  ncclDataType_t dtype;
} mscclgoRequest_t;

/* A selector returns the name of a registered plan for req, "builtin"
 * for the built-in path (host memory only), or NULL for none (the call
 * then fails with ncclInvalidUsage). The name is copied before the
 * selector is called again. */
typedef const char *(*mscclgoSelector_t)(const mscclgoRequest_t *req, void *user);

/* A communicator of nranks ranks from a unique id of ncclGetUniqueId,
 * distributed by the caller (rank 0's process must have made it). */
ncclResult_t mscclgoCommInitRank(mscclgoComm_t *comm, int nranks, ncclUniqueId id, int rank);

/* A communicator from the launcher's environment: torchrun's RANK,
 * WORLD_SIZE, MASTER_ADDR and MASTER_PORT, mpirun's, or MSCCLGO_RANK and
 * MSCCLGO_WORLD_SIZE (docs/multiprocess.md). */
ncclResult_t mscclgoCommInitEnv(mscclgoComm_t *comm);

ncclResult_t mscclgoCommRank(mscclgoComm_t comm, int *rank);
ncclResult_t mscclgoCommSize(mscclgoComm_t comm, int *size);

/* Registers the plan file at path, or every plan of the plan-set
 * directory at path (its index.json, else its *.json plans). count, if not
 * NULL, receives the number of plans registered. */
ncclResult_t mscclgoRegisterPlan(mscclgoComm_t comm, const char *path, int *count);

/* Sets the selector of comm's calls without a plan name; NULL restores
 * the default: mscclgo select's rules over the registered plans. */
ncclResult_t mscclgoSetSelector(mscclgoComm_t comm, mscclgoSelector_t selector, void *user);

/* Writes into name (of cap bytes) the plan a call would run: plan if not
 * NULL (it must be registered), else the selector's choice, else select's
 * rules over the registered plans; "builtin" where no plan serves the call
 * and the built-in path would run it (host memory only; "builtin" may be
 * passed as the plan of the calls below). count is as NCCL
 * counts it for the collective (allgather: elements sent per rank;
 * reducescatter: elements received per rank), any count, 0 included: a
 * count no plan takes whole is padded to one it takes. */
ncclResult_t mscclgoSelect(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                           const void *recvbuff, size_t count, ncclDataType_t datatype, char *name, size_t cap);

/* Runs collective with plan (or the selector's choice when plan is NULL)
 * on stream; count as for mscclgoSelect (0: nothing to do, success).
 * Reductions are sums (mscclgoExecuteOp for the others). Where no plan
 * serves the call it runs the built-in path, on host memory only: on a
 * device it fails with ncclInvalidUsage saying what a plan would need. */
ncclResult_t mscclgoExecute(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                            void *recvbuff, size_t count, ncclDataType_t datatype, cudaStream_t stream);

/* Runs collective as mscclgoExecute does on buffers in host memory, on
 * the CPU backend, synchronously: it returns when the collective is done
 * on this rank. Each plan instance keeps one CPU session for the
 * communicator's life. */
ncclResult_t mscclgoExecuteHost(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                                void *recvbuff, size_t count, ncclDataType_t datatype);

/* As mscclgoExecute / mscclgoExecuteHost, reducing with op: ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg,
 * or MSCCLGO_PREMUL_SUM with *scalar (one element of datatype, in host memory) as NCCL's ncclRedOpCreatePreMulSum. */
#define MSCCLGO_PREMUL_SUM 5
ncclResult_t mscclgoExecuteOp(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                              void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, const void *scalar,
                              cudaStream_t stream);
ncclResult_t mscclgoExecuteHostOp(mscclgoComm_t comm, const char *collective, const char *plan, const void *sendbuff,
                                  void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, const void *scalar);

/* An allgather on host memory as mscclgoExecuteHost's, whose rank j's
 * count elements land in recvbuffs[j] (an array of one buffer per rank)
 * instead of one buffer: a list of separate tensors is filled with one
 * copy. Every rank's call matches an allgather of mscclgoExecuteHost (a
 * rank may make either); the call is out of place (sendbuff may be
 * recvbuffs[rank]). */
ncclResult_t mscclgoExecuteHostGather(mscclgoComm_t comm, const char *plan, const void *sendbuff, void *const *recvbuffs,
                                      size_t count, ncclDataType_t datatype);

ncclResult_t mscclgoCommDestroy(mscclgoComm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLGO_H_ */
