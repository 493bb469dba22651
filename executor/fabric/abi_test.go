//go:build cgo

package fabric

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// abiProbe prints the offset of every structure member and the value of
// every constant that abi.h declares; compiled once against abi.h and once
// against libfabric's own headers, the two outputs must be equal.
const abiProbe = `
#include <stdio.h>
#include <stddef.h>
#define F(s, m) printf("%s.%s %zu\n", #s, #m, offsetof(struct s, m));
#define K(n) printf("%s %llu\n", #n, (unsigned long long)(n));
int main(void) {
	F(fi_ops, close) F(fi_ops, bind) F(fi_ops, control)
	F(fid, fclass) F(fid, context) F(fid, ops)
	F(fi_tx_attr, caps) F(fi_tx_attr, mode) F(fi_tx_attr, op_flags) F(fi_tx_attr, msg_order) F(fi_tx_attr, tclass)
	F(fi_rx_attr, caps) F(fi_rx_attr, iov_limit)
	F(fi_ep_attr, type) F(fi_ep_attr, max_msg_size) F(fi_ep_attr, auth_key)
	F(fi_domain_attr, threading) F(fi_domain_attr, av_type) F(fi_domain_attr, mr_mode) F(fi_domain_attr, mr_key_size)
	F(fi_domain_attr, cq_data_size) F(fi_domain_attr, mr_iov_limit) F(fi_domain_attr, caps) F(fi_domain_attr, tclass)
	F(fi_fabric_attr, fabric) F(fi_fabric_attr, name) F(fi_fabric_attr, prov_name) F(fi_fabric_attr, api_version)
	F(fi_info, next) F(fi_info, caps) F(fi_info, mode) F(fi_info, addr_format) F(fi_info, handle) F(fi_info, tx_attr)
	F(fi_info, ep_attr) F(fi_info, domain_attr) F(fi_info, fabric_attr) F(fi_info, nic)
	F(fid_mr, fid) F(fid_mr, mem_desc) F(fid_mr, key)
	F(fi_ops_fabric, domain) F(fi_ops_fabric, trywait) F(fid_fabric, ops)
	F(fi_cq_attr, size) F(fi_cq_attr, format) F(fi_cq_attr, wait_obj) F(fi_cq_attr, wait_cond) F(fi_cq_attr, wait_set)
	F(fi_av_attr, type) F(fi_av_attr, count) F(fi_av_attr, name) F(fi_av_attr, flags)
	F(fi_ops_domain, av_open) F(fi_ops_domain, cq_open) F(fi_ops_domain, endpoint)
	F(fi_ops_mr, reg) F(fi_ops_mr, regattr) F(fid_domain, ops)
	F(fi_mr_attr, mr_iov) F(fi_mr_attr, access) F(fi_mr_attr, requested_key) F(fi_mr_attr, auth_key) F(fi_mr_attr, iface) F(fi_mr_attr, device)
	printf("sizeof fi_mr_attr %zu\n", sizeof(struct fi_mr_attr)); F(fid_domain, mr)
	F(fi_cq_data_entry, op_context) F(fi_cq_data_entry, flags) F(fi_cq_data_entry, data)
	printf("sizeof fi_cq_data_entry %zu\n", sizeof(struct fi_cq_data_entry));
	F(fi_cq_err_entry, op_context) F(fi_cq_err_entry, err) F(fi_cq_err_entry, prov_errno) F(fi_cq_err_entry, err_data)
	F(fi_cq_err_entry, err_data_size)
	F(fi_ops_cq, read) F(fi_ops_cq, readerr) F(fi_ops_cq, sread) F(fi_ops_cq, signal) F(fi_ops_cq, strerror)
	F(fid_cq, ops) F(fi_ops_av, insert) F(fid_av, ops) F(fi_ops_cm, getname)
	F(fi_rma_iov, addr) F(fi_rma_iov, len) F(fi_rma_iov, key)
	F(fi_msg_rma, msg_iov) F(fi_msg_rma, desc) F(fi_msg_rma, iov_count) F(fi_msg_rma, addr) F(fi_msg_rma, rma_iov)
	F(fi_msg_rma, rma_iov_count) F(fi_msg_rma, context) F(fi_msg_rma, data)
	F(fi_ops_rma, writemsg) F(fi_ops_rma, writedata) F(fi_ops_rma, injectdata)
	F(fid_ep, cm) F(fid_ep, rma)
	K(FI_RMA) K(FI_WRITE) K(FI_RECV) K(FI_SEND) K(FI_REMOTE_WRITE) K(FI_REMOTE_CQ_DATA) K(FI_SOURCE) K(FI_COMPLETION)
	K(FI_CONTEXT) K(FI_CONTEXT2) K(FI_MR_LOCAL) K(FI_MR_VIRT_ADDR) K(FI_MR_ALLOCATED) K(FI_MR_PROV_KEY)
	K(FI_EP_RDM) K(FI_THREAD_SAFE) K(FI_AV_UNSPEC) K(FI_CQ_FORMAT_DATA) K(FI_WAIT_NONE) K(FI_WAIT_UNSPEC) K(FI_WAIT_FD) K(FI_GETWAIT)
	K(FI_HMEM) K(FI_HMEM_SYSTEM) K(FI_HMEM_CUDA)
	K(FI_ENABLE) K(FI_EAVAIL)
	return 0;
}
`

// probe compiles abiProbe after includes and returns its output as a map.
func probe(t *testing.T, name, includes string) map[string]uint64 {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, []byte(includes+abiProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	exe := filepath.Join(dir, name)
	if out, err := exec.Command("gcc", "-Wall", "-Wextra", "-I", wd, "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: gcc: %v\n%s", name, err, out)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseUint(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", name, line)
		}
		m[line[:i]] = v
	}
	return m
}

// TestABI checks abi.h's declarations against libfabric's headers
// (libfabric-dev), and the constants wire.go repeats.
func TestABI(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the ABI check is skipped")
	}
	if _, err := os.Stat("/usr/include/rdma/fi_rma.h"); err != nil {
		t.Skip("libfabric's headers (libfabric-dev) are not installed: the ABI check is skipped")
	}
	ours := probe(t, "ours", "#include \"abi.h\"\n")
	theirs := probe(t, "theirs", "#include <rdma/fabric.h>\n#include <rdma/fi_domain.h>\n#include <rdma/fi_endpoint.h>\n#include <rdma/fi_cm.h>\n#include <rdma/fi_rma.h>\n#include <rdma/fi_eq.h>\n#include <rdma/fi_errno.h>\n")
	if len(ours) != len(theirs) || len(ours) < 80 {
		t.Fatalf("%d values from abi.h, %d from libfabric's headers", len(ours), len(theirs))
	}
	for k, v := range theirs {
		if ours[k] != v {
			t.Errorf("%s: abi.h says %d, libfabric's headers %d", k, ours[k], v)
		}
	}
	for name, v := range map[string]uint64{"FI_WRITE": accWrite, "FI_REMOTE_WRITE": accRemoteWrite, "FI_REMOTE_CQ_DATA": flagRemoteData,
		"FI_MR_LOCAL": mrLocal, "FI_MR_VIRT_ADDR": mrVirtAddr, "FI_EAVAIL": -errAvail,
		"FI_HMEM": capHMEM, "FI_HMEM_SYSTEM": ifaceHost, "FI_HMEM_CUDA": ifaceCUDA} {
		if theirs[name] != v {
			t.Errorf("wire.go's %s is %d, libfabric's %d", name, v, theirs[name])
		}
	}
}
