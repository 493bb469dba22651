/* abi.h: the part of libfabric's ABI (FABRIC_1.3: libfabric 1.9 and
   later) that shim.c uses, declared here so that building needs no
   libfabric header: the constants, and each structure up to the last
   member used (operation tables up to the last entry called). The field
   names are libfabric's; abi_test.go compares the offsets with the
   installed <rdma/fabric.h> where it exists. */
#ifndef MSCCLGO_FABRIC_ABI_H
#define MSCCLGO_FABRIC_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define MGF_VERSION ((1u << 16) | 9u) /* FI_VERSION(1, 9) */

#define FI_RMA (1ULL << 2)
#define FI_WRITE (1ULL << 9)
#define FI_RECV (1ULL << 10)
#define FI_SEND (1ULL << 11)
#define FI_REMOTE_WRITE (1ULL << 13)
#define FI_REMOTE_CQ_DATA (1ULL << 17)
#define FI_SOURCE (1ULL << 57)
#define FI_COMPLETION (1ULL << 24)
#define FI_CONTEXT (1ULL << 59)
#define FI_CONTEXT2 (1ULL << 52)

#define FI_MR_LOCAL (1 << 2)
#define FI_MR_VIRT_ADDR (1 << 4)
#define FI_MR_ALLOCATED (1 << 5)
#define FI_MR_PROV_KEY (1 << 6)

#define FI_EP_RDM 3
#define FI_THREAD_SAFE 1
#define FI_AV_UNSPEC 0
#define FI_CQ_FORMAT_DATA 3
#define FI_WAIT_NONE 0
#define FI_WAIT_UNSPEC 1
#define FI_WAIT_FD 3
#define FI_GETWAIT 5
#define FI_HMEM (1ULL << 47)
#define FI_HMEM_SYSTEM 0
#define FI_HMEM_CUDA 1
#define FI_ENABLE 6
#define FI_EAVAIL 259

struct fid;
struct fi_ops {
	size_t size;
	int (*close)(struct fid *fid);
	int (*bind)(struct fid *fid, struct fid *bfid, uint64_t flags);
	int (*control)(struct fid *fid, int command, void *arg);
	void *ops_open, *tostr, *ops_set;
};
struct fid {
	size_t fclass;
	void *context;
	struct fi_ops *ops;
};

struct fi_tx_attr {
	uint64_t caps, mode, op_flags, msg_order, comp_order;
	size_t inject_size, size, iov_limit, rma_iov_limit;
	uint32_t tclass;
};
struct fi_rx_attr {
	uint64_t caps, mode, op_flags, msg_order, comp_order;
	size_t total_buffered_recv, size, iov_limit;
};
struct fi_ep_attr {
	int type; /* enum fi_ep_type */
	uint32_t protocol, protocol_version;
	size_t max_msg_size, msg_prefix_size, max_order_raw_size, max_order_war_size, max_order_waw_size;
	uint64_t mem_tag_format;
	size_t tx_ctx_cnt, rx_ctx_cnt, auth_key_size;
	uint8_t *auth_key;
};
struct fi_domain_attr {
	void *domain;
	char *name;
	int threading, control_progress, data_progress, resource_mgmt, av_type;
	int mr_mode;
	size_t mr_key_size, cq_data_size, cq_cnt, ep_cnt, tx_ctx_cnt, rx_ctx_cnt;
	size_t max_ep_tx_ctx, max_ep_rx_ctx, max_ep_stx_ctx, max_ep_srx_ctx, cntr_cnt, mr_iov_limit;
	uint64_t caps, mode;
	uint8_t *auth_key;
	size_t auth_key_size, max_err_data, mr_cnt;
	uint32_t tclass;
};
struct fi_fabric_attr {
	void *fabric;
	char *name, *prov_name;
	uint32_t prov_version, api_version;
};
struct fi_info {
	struct fi_info *next;
	uint64_t caps, mode;
	uint32_t addr_format;
	size_t src_addrlen, dest_addrlen;
	void *src_addr, *dest_addr;
	struct fid *handle;
	struct fi_tx_attr *tx_attr;
	struct fi_rx_attr *rx_attr;
	struct fi_ep_attr *ep_attr;
	struct fi_domain_attr *domain_attr;
	struct fi_fabric_attr *fabric_attr;
	void *nic;
};

struct fid_fabric;
struct fid_domain;
struct fid_cq;
struct fid_av;
struct fid_ep;
struct fid_mr {
	struct fid fid;
	void *mem_desc;
	uint64_t key;
};

struct fi_ops_fabric {
	size_t size;
	int (*domain)(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom, void *context);
	void *passive_ep, *eq_open, *wait_open;
	int (*trywait)(struct fid_fabric *fabric, struct fid **fids, int count);
};
struct fid_fabric {
	struct fid fid;
	struct fi_ops_fabric *ops;
	uint32_t api_version;
};

struct fi_cq_attr {
	size_t size;
	uint64_t flags;
	int format;   /* enum fi_cq_format */
	int wait_obj; /* enum fi_wait_obj */
	int signaling_vector;
	int wait_cond; /* enum fi_cq_wait_cond */
	void *wait_set;
};
struct fi_av_attr {
	int type; /* enum fi_av_type */
	int rx_ctx_bits;
	size_t count, ep_per_node;
	const char *name;
	void *map_addr;
	uint64_t flags;
};
struct fi_ops_domain {
	size_t size;
	int (*av_open)(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context);
	int (*cq_open)(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context);
	int (*endpoint)(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
};
struct fi_mr_attr {
	const struct iovec *mr_iov;
	size_t iov_count;
	uint64_t access, offset, requested_key;
	void *context;
	size_t auth_key_size;
	uint8_t *auth_key;
	int iface; /* enum fi_hmem_iface */
	union {
		uint64_t reserved;
		int cuda;
	} device;
};
struct fi_ops_mr {
	size_t size;
	int (*reg)(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		   uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
	void *regv;
	int (*regattr)(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr);
};
struct fid_domain {
	struct fid fid;
	struct fi_ops_domain *ops;
	struct fi_ops_mr *mr;
};

struct fi_cq_data_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
};
struct fi_cq_err_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data, tag;
	size_t olen;
	int err, prov_errno;
	void *err_data;
	size_t err_data_size;
};
struct fi_ops_cq {
	size_t size;
	ssize_t (*read)(struct fid_cq *cq, void *buf, size_t count);
	void *readfrom;
	ssize_t (*readerr)(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
	ssize_t (*sread)(struct fid_cq *cq, void *buf, size_t count, const void *cond, int timeout);
	void *sreadfrom;
	int (*signal)(struct fid_cq *cq);
	const char *(*strerror)(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf, size_t len);
};
struct fid_cq {
	struct fid fid;
	struct fi_ops_cq *ops;
};

struct fi_ops_av {
	size_t size;
	int (*insert)(struct fid_av *av, const void *addr, size_t count, uint64_t *fi_addr, uint64_t flags, void *context);
};
struct fid_av {
	struct fid fid;
	struct fi_ops_av *ops;
};

struct fi_ops_cm {
	size_t size;
	void *setname;
	int (*getname)(struct fid *fid, void *addr, size_t *addrlen);
};
struct fi_rma_iov {
	uint64_t addr;
	size_t len;
	uint64_t key;
};
struct fi_msg_rma {
	const struct iovec *msg_iov;
	void **desc;
	size_t iov_count;
	uint64_t addr;
	const struct fi_rma_iov *rma_iov;
	size_t rma_iov_count;
	void *context;
	uint64_t data;
};
struct fi_ops_rma {
	size_t size;
	void *read, *readv, *readmsg, *write, *writev;
	ssize_t (*writemsg)(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags);
	void *inject;
	ssize_t (*writedata)(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
			     uint64_t dest_addr, uint64_t addr, uint64_t key, void *context);
	ssize_t (*injectdata)(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			      uint64_t dest_addr, uint64_t addr, uint64_t key);
};
struct fid_ep {
	struct fid fid;
	void *ops;
	struct fi_ops_cm *cm;
	void *msg;
	struct fi_ops_rma *rma;
};

#endif
