/* shim.c: package fabric's bridge to libfabric, loaded at run time.

   libfabric's calls beyond a handful of exported functions (fi_getinfo,
   fi_fabric, fi_dupinfo, fi_freeinfo, fi_strerror) are static inline
   wrappers in its headers over the operation tables each object carries.
   This file declares the prefixes of those structures that it uses, as
   laid out by the FABRIC_1.3 ABI (libfabric 1.9 and later, 1.17 here),
   binds the exported functions by that version with dlvsym, and calls
   the rest through the tables. It needs no libfabric header to build. */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"

/* ---- the handle ---- */

/* An operation context: room for struct fi_context2 (FI_CONTEXT2). */
typedef struct {
	void *internal[8];
} mgf_context;

struct mgf {
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	const char *(*strerror)(int);

	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	int waitable;
	int waitfd; /* the completion queue's wait object (FI_WAIT_FD), or -1 */
	int evfd;   /* an eventfd that mgf_wake writes to end mgf_block, or -1 */
	mgf_context *ctxs;
	int nctx;
};

static void *bind_sym(void *lib, const char *name, const char *version, char *err, size_t errlen)
{
	void *p = dlvsym(lib, name, version);
	if (p == NULL)
		p = dlsym(lib, name);
	if (p == NULL)
		snprintf(err, errlen, "libfabric.so.1 has no %s (%s): it predates libfabric 1.9", name, version);
	return p;
}

static void setf(char *err, size_t errlen, mgf *f, const char *what, int rc)
{
	snprintf(err, errlen, "%s: %s (%d)", what, f->strerror(rc < 0 ? -rc : rc), rc);
}

mgf *mgf_open(const char *libname, const char *prov, const char *node, int nctx, char *err, size_t errlen)
{
	void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		snprintf(err, errlen, "%s not loaded (install libfabric1, or name the library in MSCCLGO_LIBFABRIC): %s", libname, dlerror());
		return NULL;
	}
	mgf *f = calloc(1, sizeof *f);
	if (f == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	f->waitfd = -1;
	f->evfd = -1;
	*(void **)&f->getinfo = bind_sym(lib, "fi_getinfo", "FABRIC_1.3", err, errlen);
	*(void **)&f->freeinfo = bind_sym(lib, "fi_freeinfo", "FABRIC_1.3", err, errlen);
	*(void **)&f->dupinfo = bind_sym(lib, "fi_dupinfo", "FABRIC_1.3", err, errlen);
	*(void **)&f->fabric = bind_sym(lib, "fi_fabric", "FABRIC_1.1", err, errlen);
	*(void **)&f->strerror = bind_sym(lib, "fi_strerror", "FABRIC_1.0", err, errlen);
	if (!f->getinfo || !f->freeinfo || !f->dupinfo || !f->fabric || !f->strerror) {
		free(f);
		return NULL;
	}

	struct fi_info *hints = f->dupinfo(NULL);
	if (hints == NULL) {
		snprintf(err, errlen, "fi_dupinfo: out of memory");
		free(f);
		return NULL;
	}
	hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	/* Device memory (FI_HMEM) only on request: unverified here. */
	const char *hm = getenv("MSCCLGO_FABRIC_HMEM");
	if (hm != NULL && strcmp(hm, "1") == 0)
		hints->caps |= FI_HMEM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	if (prov != NULL && prov[0] != '\0')
		hints->fabric_attr->prov_name = strdup(prov);
	struct fi_info *info = NULL;
	int rc = f->getinfo(MGF_VERSION, node, NULL, node ? FI_SOURCE : 0, hints, &info);
	f->freeinfo(hints);
	if (rc != 0 || info == NULL) {
		snprintf(err, errlen, "fi_getinfo: no provider%s%s offers RDM endpoints with RMA writes%s%s: %s (%d)",
			 prov && prov[0] ? " " : "", prov && prov[0] ? prov : "", node ? " on " : "", node ? node : "",
			 f->strerror(rc < 0 ? -rc : rc), rc);
		free(f);
		return NULL;
	}
	f->info = info;
	if (info->domain_attr->cq_data_size < 4) {
		snprintf(err, errlen, "provider %s carries %zu bytes of remote CQ data, 4 needed",
			 info->fabric_attr->prov_name, info->domain_attr->cq_data_size);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->fabric(info->fabric_attr, &f->fab, NULL)) != 0) {
		setf(err, errlen, f, "fi_fabric", rc);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->fab->ops->domain(f->fab, info, &f->dom, NULL)) != 0) {
		setf(err, errlen, f, "fi_domain", rc);
		mgf_close(f);
		return NULL;
	}
	/* A completion queue with a file descriptor to sleep on (FI_WAIT_FD)
	   where the provider offers one, else one that is only polled. */
	struct fi_cq_attr cqa;
	memset(&cqa, 0, sizeof cqa);
	cqa.format = FI_CQ_FORMAT_DATA;
	cqa.wait_obj = FI_WAIT_FD;
	if (f->dom->ops->cq_open(f->dom, &cqa, &f->cq, NULL) == 0) {
		int fd = -1;
		if (f->cq->fid.ops->control(&f->cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0 &&
		    f->fab->ops->size >= offsetof(struct fi_ops_fabric, trywait) + sizeof(void *) && f->fab->ops->trywait != NULL)
			f->waitfd = fd;
	} else {
		cqa.wait_obj = FI_WAIT_NONE;
		if ((rc = f->dom->ops->cq_open(f->dom, &cqa, &f->cq, NULL)) != 0) {
			setf(err, errlen, f, "fi_cq_open", rc);
			mgf_close(f);
			return NULL;
		}
	}
	if (f->waitfd >= 0 && (f->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		f->waitfd = -1;
	f->waitable = f->waitfd >= 0;
	struct fi_av_attr ava;
	memset(&ava, 0, sizeof ava);
	ava.type = FI_AV_UNSPEC;
	if ((rc = f->dom->ops->av_open(f->dom, &ava, &f->av, NULL)) != 0) {
		setf(err, errlen, f, "fi_av_open", rc);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->dom->ops->endpoint(f->dom, info, &f->ep, NULL)) != 0) {
		setf(err, errlen, f, "fi_endpoint", rc);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->ep->fid.ops->bind(&f->ep->fid, &f->cq->fid, FI_SEND | FI_RECV)) != 0) {
		setf(err, errlen, f, "fi_ep_bind (completion queue)", rc);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->ep->fid.ops->bind(&f->ep->fid, &f->av->fid, 0)) != 0) {
		setf(err, errlen, f, "fi_ep_bind (address vector)", rc);
		mgf_close(f);
		return NULL;
	}
	if ((rc = f->ep->fid.ops->control(&f->ep->fid, FI_ENABLE, NULL)) != 0) {
		setf(err, errlen, f, "fi_enable", rc);
		mgf_close(f);
		return NULL;
	}
	f->ctxs = calloc((size_t)nctx, sizeof(mgf_context));
	if (f->ctxs == NULL) {
		snprintf(err, errlen, "out of memory");
		mgf_close(f);
		return NULL;
	}
	f->nctx = nctx;
	return f;
}

void mgf_close(mgf *f)
{
	if (f == NULL)
		return;
	if (f->ep)
		f->ep->fid.ops->close(&f->ep->fid);
	if (f->av)
		f->av->fid.ops->close(&f->av->fid);
	if (f->cq)
		f->cq->fid.ops->close(&f->cq->fid);
	if (f->dom)
		f->dom->fid.ops->close(&f->dom->fid);
	if (f->fab)
		f->fab->fid.ops->close(&f->fab->fid);
	if (f->info)
		f->freeinfo(f->info);
	if (f->evfd >= 0)
		close(f->evfd);
	free(f->ctxs);
	/* libfabric stays loaded: its providers may keep threads. */
	free(f);
}

const char *mgf_provider(mgf *f) { return f->info->fabric_attr->prov_name; }
const char *mgf_fabric_name(mgf *f) { return f->info->fabric_attr->name ? f->info->fabric_attr->name : ""; }
int mgf_mr_mode(mgf *f) { return f->info->domain_attr->mr_mode; }
size_t mgf_cq_data_size(mgf *f) { return f->info->domain_attr->cq_data_size; }
int mgf_waitable(mgf *f) { return f->waitable; }
const char *mgf_strerror(mgf *f, int e) { return f->strerror(e < 0 ? -e : e); }

int mgf_getname(mgf *f, void *buf, size_t *len) { return f->ep->cm->getname(&f->ep->fid, buf, len); }

int mgf_av_insert(mgf *f, const void *addr, uint64_t *fiaddr)
{
	int n = f->av->ops->insert(f->av, addr, 1, fiaddr, 0, NULL);
	return n == 1 ? 0 : (n < 0 ? n : -EINVAL);
}

/* mgf_alloc returns len zeroed bytes, page-aligned, as an anonymous
 * mapping: its pages are made (and zeroed by the kernel) when first
 * touched or when a provider pins them for registration, so the rings of
 * peers that never exchange a byte cost no memory on providers that do
 * not pin (tcp, shm). NULL when the system refuses. */
void *mgf_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void mgf_free(void *p, size_t len)
{
	munmap(p, len);
}

int mgf_mr_reg(mgf *f, void *buf, size_t len, uint64_t access, uint64_t key, void **mr, uint64_t *outkey, void **desc)
{
	struct fid_mr *m = NULL;
	int rc = f->dom->mr->reg(&f->dom->fid, buf, len, access, 0, key, 0, &m, NULL);
	if (rc != 0)
		return rc;
	*mr = m;
	*outkey = m->key;
	*desc = m->mem_desc;
	return 0;
}

int mgf_mr_regattr(mgf *f, void *buf, size_t len, uint64_t access, uint64_t key, int iface, int device, void **mr,
		   uint64_t *outkey, void **desc)
{
	if (f->dom->mr->size < offsetof(struct fi_ops_mr, regattr) + sizeof(void *) || f->dom->mr->regattr == NULL)
		return -ENOSYS;
	struct iovec iov = {buf, len};
	struct fi_mr_attr a;
	memset(&a, 0, sizeof a);
	a.mr_iov = &iov;
	a.iov_count = 1;
	a.access = access;
	a.requested_key = key;
	a.iface = iface;
	a.device.cuda = device;
	struct fid_mr *m = NULL;
	int rc = f->dom->mr->regattr(&f->dom->fid, &a, 0, &m);
	if (rc != 0)
		return rc;
	*mr = m;
	*outkey = m->key;
	*desc = m->mem_desc;
	return 0;
}

uint64_t mgf_caps(mgf *f) { return f->info->caps; }

int mgf_mr_close(void *mr)
{
	struct fid_mr *m = mr;
	return m->fid.ops->close(&m->fid);
}

void *mgf_ctx(mgf *f, int i) { return &f->ctxs[i]; }

int mgf_ctx_index(mgf *f, void *ctx)
{
	ptrdiff_t i = (mgf_context *)ctx - f->ctxs;
	return (i >= 0 && i < f->nctx) ? (int)i : -1;
}

ssize_t mgf_writedata(mgf *f, const void *buf, size_t len, void *desc, uint64_t data,
		      uint64_t dest, uint64_t addr, uint64_t key, void *ctx)
{
	return f->ep->rma->writedata(f->ep, buf, len, desc, data, dest, addr, key, ctx);
}

/* writemsg2 writes two local parts (iov, desc) to nrma remote parts with
   remote CQ data. */
static ssize_t writemsg2(mgf *f, struct iovec *iov, void **desc, struct fi_rma_iov *rma, size_t nrma, uint64_t data,
			 uint64_t dest, void *ctx)
{
	struct fi_msg_rma msg;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = iov;
	msg.desc = desc;
	msg.iov_count = 2;
	msg.addr = dest;
	msg.rma_iov = rma;
	msg.rma_iov_count = nrma;
	msg.context = ctx;
	msg.data = data;
	return f->ep->rma->writemsg(f->ep, &msg, FI_REMOTE_CQ_DATA | FI_COMPLETION);
}

ssize_t mgf_writedata2(mgf *f, const void *head, size_t headlen, void *headdesc, const void *payload,
		       size_t paylen, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key, void *ctx)
{
	struct iovec iov[2] = {{(void *)head, headlen}, {(void *)payload, paylen}};
	void *desc[2] = {headdesc, NULL};
	struct fi_rma_iov rma = {addr, headlen + paylen, key};
	return writemsg2(f, iov, desc, &rma, 1, data, dest, ctx);
}

ssize_t mgf_injectdata(mgf *f, uint64_t val, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key)
{
	return mgf_injectbuf(f, &val, sizeof val, data, dest, addr, key);
}

ssize_t mgf_injectbuf(mgf *f, const void *buf, size_t len, uint64_t data, uint64_t dest, uint64_t addr, uint64_t key)
{
	return f->ep->rma->injectdata(f->ep, buf, len, data, dest, addr, key);
}

size_t mgf_inject_size(mgf *f) { return f->info->tx_attr->inject_size; }

ssize_t mgf_writeat(mgf *f, const void *payload, size_t plen, uint64_t paddr, uint64_t pkey, const void *rec, size_t rlen,
		    void *rdesc, uint64_t data, uint64_t dest, uint64_t raddr, uint64_t rkey, void *ctx)
{
	struct iovec iov[2] = {{(void *)payload, plen}, {(void *)rec, rlen}};
	void *desc[2] = {NULL, rdesc};
	struct fi_rma_iov rma[2] = {{paddr, plen, pkey}, {raddr, rlen, rkey}};
	return writemsg2(f, iov, desc, rma, 2, data, dest, ctx);
}

size_t mgf_iov_limit(mgf *f)
{
	size_t a = f->info->tx_attr->iov_limit, b = f->info->tx_attr->rma_iov_limit;
	return a < b ? a : b;
}

ssize_t mgf_cq_read(mgf *f, mgf_cqe *out, size_t count)
{
	struct fi_cq_data_entry e[64];
	if (count > 64)
		count = 64;
	ssize_t n = f->cq->ops->read(f->cq, e, count);
	for (ssize_t i = 0; i < n; i++) {
		out[i].ctx = e[i].op_context;
		out[i].flags = e[i].flags;
		out[i].data = (e[i].flags & FI_REMOTE_CQ_DATA) ? e[i].data : 0;
	}
	return n;
}

int mgf_block(mgf *f, int timeout_ms)
{
	if (f->waitfd < 0)
		return -1;
	struct fid *fids[1] = {&f->cq->fid};
	if (f->fab->ops->trywait(f->fab, fids, 1) != 0)
		return 0; /* something to read, or progress to make: read again */
	struct pollfd p[2] = {{f->waitfd, POLLIN, 0}, {f->evfd, POLLIN, 0}};
	int n = poll(p, 2, timeout_ms);
	if (n > 0 && (p[1].revents & POLLIN)) {
		uint64_t v;
		if (read(f->evfd, &v, sizeof v) < 0) {
			/* EAGAIN: another read took it */
		}
	}
	return n > 0 ? 1 : 0;
}

int mgf_wait_fd(mgf *f) { return f->waitfd; }

int mgf_trywait(mgf *f)
{
	if (f->waitfd < 0)
		return -EAGAIN;
	struct fid *fids[1] = {&f->cq->fid};
	return f->fab->ops->trywait(f->fab, fids, 1);
}

int mgf_cq_signal(mgf *f) { return f->cq->ops->signal(f->cq); }

void mgf_wake(mgf *f)
{
	uint64_t one = 1;
	if (f->evfd >= 0 && write(f->evfd, &one, sizeof one) < 0) {
		/* the counter is full: a wake is pending anyway */
	}
}

int mgf_cq_readerr(mgf *f, void **ctx, int *err, char *msg, size_t msglen)
{
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof e);
	ssize_t n = f->cq->ops->readerr(f->cq, &e, 0);
	if (n != 1)
		return n < 0 ? (int)n : -EAGAIN;
	*ctx = e.op_context;
	*err = e.err;
	const char *s = f->cq->ops->strerror(f->cq, e.prov_errno, e.err_data, msg, msglen);
	if (s != NULL && s != msg)
		snprintf(msg, msglen, "%s", s);
	return 0;
}
