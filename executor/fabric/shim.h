/* shim.h: the few calls package fabric makes into libfabric, which the
   shim loads at run time (dlopen "libfabric.so.1"), so that building the
   package needs neither libfabric's headers nor its library. */
#ifndef MSCCLGO_FABRIC_SHIM_H
#define MSCCLGO_FABRIC_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct mgf mgf;

/* One completion: op_context, flags, remote CQ data. */
typedef struct {
	void *ctx;
	uint64_t flags;
	uint64_t data;
} mgf_cqe;

/* mgf_open loads libfabric (libname: "libfabric.so.1" or a path), picks an RDM endpoint with RMA and remote CQ
   data of provider prov (NULL: libfabric's choice, FI_PROVIDER applies)
   bound to node (NULL: any), and opens fabric, domain, completion queue,
   address vector and endpoint with nctx operation contexts. On failure it
   returns NULL and writes why into err. */
mgf *mgf_open(const char *libname, const char *prov, const char *node, int nctx, char *err, size_t errlen);
void mgf_close(mgf *f);
const char *mgf_provider(mgf *f);
const char *mgf_fabric_name(mgf *f);
int mgf_mr_mode(mgf *f);
size_t mgf_cq_data_size(mgf *f);
int mgf_waitable(mgf *f);
const char *mgf_strerror(mgf *f, int err);

int mgf_getname(mgf *f, void *buf, size_t *len);
int mgf_av_insert(mgf *f, const void *addr, uint64_t *fiaddr);

/* Memory: page-aligned, zeroed; registered for access. */
void *mgf_alloc(size_t len);
void mgf_free(void *p, size_t len);
int mgf_mr_reg(mgf *f, void *buf, size_t len, uint64_t access, uint64_t key, void **mr, uint64_t *outkey, void **desc);
/* mgf_mr_regattr registers len bytes at buf of memory interface iface
   (FI_HMEM_SYSTEM 0, FI_HMEM_CUDA 1) on device (fi_mr_regattr); -ENOSYS
   where the provider has no regattr. */
int mgf_mr_regattr(mgf *f, void *buf, size_t len, uint64_t access, uint64_t key, int iface, int device, void **mr,
		   uint64_t *outkey, void **desc);
int mgf_mr_close(void *mr);
/* mgf_caps is the chosen provider's capabilities (FI_HMEM among them). */
uint64_t mgf_caps(mgf *f);

void *mgf_ctx(mgf *f, int i);
int mgf_ctx_index(mgf *f, void *ctx);

ssize_t mgf_writedata(mgf *f, const void *buf, size_t len, void *desc, uint64_t data,
		      uint64_t dest, uint64_t addr, uint64_t key, void *ctx);
/* mgf_writedata2 writes head (registered, headdesc) and payload (not
   registered: only where the provider has no FI_MR_LOCAL) as one RMA
   write with remote CQ data. */
ssize_t mgf_writedata2(mgf *f, const void *head, size_t headlen, void *headdesc, const void *payload,
		       size_t paylen, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key, void *ctx);
ssize_t mgf_injectdata(mgf *f, uint64_t val, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key);
/* mgf_injectbuf writes len bytes at buf (at most mgf_inject_size) with
   remote CQ data as fi_inject_writedata: buf may be reused at once and
   no completion is written for it. */
ssize_t mgf_injectbuf(mgf *f, const void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key);
/* mgf_writeat writes, as one RMA write with remote CQ data, payload
   (plen bytes, not registered) to paddr (pkey) and then rec (rlen bytes,
   registered: rdesc) to raddr (rkey) at dest: the target's completion
   comes once both are in place. */
ssize_t mgf_writeat(mgf *f, const void *payload, size_t plen, uint64_t paddr, uint64_t pkey, const void *rec, size_t rlen,
		    void *rdesc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t rkey, void *ctx);
/* mgf_iov_limit is the fewer of the provider's local and remote iov
   limits of an RMA write. */
size_t mgf_iov_limit(mgf *f);
/* mgf_inject_size is the largest write mgf_injectbuf takes (the
   provider's inject_size). */
size_t mgf_inject_size(mgf *f);
/* mgf_cq_read reads up to count completions without waiting. Returns
   the number read, -EAGAIN when none, -FI_EAVAIL (-259) when an error
   completion is next. */
ssize_t mgf_cq_read(mgf *f, mgf_cqe *out, size_t count);
/* mgf_block sleeps until the completion queue's wait object says there
   may be something to read or progress to make (fi_trywait, then poll on
   its file descriptor), mgf_wake is called, or timeout_ms passes. It
   returns 1 when woken, 0 on timeout or when fi_trywait says to read
   again at once, and -1 when the queue has no wait object (poll it). */
int mgf_block(mgf *f, int timeout_ms);
/* mgf_wake ends a mgf_block, now or the next one. */
void mgf_wake(mgf *f);
/* mgf_wait_fd is the completion queue's wait object (a file descriptor
   that polls readable when there may be something to read), or -1. */
int mgf_wait_fd(mgf *f);
/* mgf_trywait is fi_trywait on the completion queue: 0 when the caller
   may sleep on mgf_wait_fd, else (-FI_EAGAIN) read the queue first. */
int mgf_trywait(mgf *f);
/* mgf_cq_signal makes mgf_wait_fd readable (fi_cq_signal). */
int mgf_cq_signal(mgf *f);
/* mgf_cq_readerr reads the next error completion: its context, error
   number and the provider's description. */
int mgf_cq_readerr(mgf *f, void **ctx, int *err, char *msg, size_t msglen);

#endif
