// emu.cc is the C++ side of the emulated device: the host build of the
// interpreter kernel (csrc/host/kernel.cc, the same source nvcc compiles)
// and the memory primitives the Go driver calls. Device memory is host
// memory; every access the kernel races with goes through atomics here,
// so that ThreadSanitizer sees the synchronisation.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "host/kernel.cc"

namespace {

// Under ThreadSanitizer, every call from Go passes through one atomic on
// entry and on exit:
// Go orders its own goroutines (channels, mutexes) in ways the sanitizer
// cannot see, and a goroutine may move between OS threads, so without
// this edge an allocation in one call and a store in a later, Go-ordered
// call on another thread would be reported. The kernel's host threads
// never take it, so their races with each other and with the proxy's
// copies are still found.
#if defined(__SANITIZE_THREAD__)
std::atomic<uint64_t> go_order;
struct GoCall {
  GoCall() { go_order.fetch_add(1, std::memory_order_acq_rel); }
  ~GoCall() { go_order.fetch_add(1, std::memory_order_acq_rel); }
};
#else
struct GoCall {
  GoCall() {}
};
#endif

// Alloc is one allocation of the device's memory: a memfd mapping of this
// process (fd >= 0) or a peer's mapping opened through IPC (opened).
struct Alloc {
  int fd;
  uint64_t n;
  bool opened;
  uint64_t id;  // unique for the process's life, as CU_POINTER_ATTRIBUTE_BUFFER_ID
};

// The allocations by address. Function-local, so that no global
// constructor runs before the Go runtime calls in.
std::mutex allocs_mu;
std::map<uint64_t, Alloc>& allocs() {
  static std::map<uint64_t, Alloc> m;
  return m;
}

// Guarded is a guarded allocation's mapping (mg_emu_alloc's mode 2).
struct Guarded {
  uint64_t base, len;
};

// The guarded allocations by address (allocs_mu).
std::map<uint64_t, Guarded>& guarded() {
  static std::map<uint64_t, Guarded> m;
  return m;
}

// Held is an allocation that ranks of this process hold for a peer
// whose address they took (mg_emu_retain): its free waits for the last
// mg_emu_release, as a peer's IPC mapping keeps a CUDA allocation's
// memory after the exporter's cuMemFree, so that a peer's kernel still
// running when the owner's communicator ends writes into memory no one
// uses, not into memory given back (issue 44: SIGSEGV in packet_op).
struct Held {
  int refs;
  bool freed;  // freed by its owner: given back at the last release
  int mode;    // the owner's mg_emu_free mode
};

// The held allocations by address (allocs_mu).
std::map<uint64_t, Held>& holds() {
  static std::map<uint64_t, Held> m;
  return m;
}

// next_alloc_id names a new allocation; called with allocs_mu held.
uint64_t next_alloc_id() {
  static uint64_t last = 0;
  return ++last;
}

template <class T>
std::atomic_ref<T> word(uint64_t addr) {
  return std::atomic_ref<T>(*reinterpret_cast<T*>(addr));
}

typedef void* (*probe_entry)(unsigned grid, unsigned block, unsigned shmem, const void* args, mg_host_probe* probe);

// The kernel entries by name, as gpu.KernelName writes them.
struct Entry {
  const char* name;
  probe_entry fn;
};
const Entry entries[] = {
    {"mscclgo_interp_f16_ll16", mscclgo_host_probe_interp_f16_ll16},
    {"mscclgo_interp_bf16_ll16", mscclgo_host_probe_interp_bf16_ll16},
    {"mscclgo_interp_f32_ll16", mscclgo_host_probe_interp_f32_ll16},
    {"mscclgo_interp_i32_ll16", mscclgo_host_probe_interp_i32_ll16},
    {"mscclgo_interp_f16_ll8", mscclgo_host_probe_interp_f16_ll8},
    {"mscclgo_interp_bf16_ll8", mscclgo_host_probe_interp_bf16_ll8},
    {"mscclgo_interp_f32_ll8", mscclgo_host_probe_interp_f32_ll8},
    {"mscclgo_interp_i32_ll8", mscclgo_host_probe_interp_i32_ll8},
};

// parks is the process's one mg_host_park: every emulated device's
// threads park and notify there, since a kernel thread of one device
// often waits for a store of another's (packets, signals into a peer's
// memory), as the proxy of any device may. Never destroyed, like the
// launcher's thread pool (its threads may be parked in it).
mg_host_park& parks() {
  static mg_host_park* p = new mg_host_park();  // zeroed
  return *p;
}

// Dev is one emulated device's probe state: its host-mapped ranges and
// the counts of its last launch. The Go driver owns it; the ranges change
// only between launches.
struct Dev {
  std::vector<uint64_t> lo, hi;
  std::vector<uint64_t> host_access, ops;
  mg_host_traffic traffic;  // the last launch's, where counted
  mg_host_probe probe;
  mg_host_park* park = &parks();
};
}  // namespace

extern "C" {

// mg_emu_alloc returns n zeroed bytes. mode 1 (shared): a memfd mapping
// that mg_emu_ipc_get can hand to another process (as any CUDA
// allocation can be exported after cuMemAlloc); 0: heap memory (cheaper:
// sessions that export nothing allocate and free a lot); 2 (guarded): a
// mapping of its own that ends at an inaccessible page and that
// mg_emu_free makes inaccessible instead of giving back, so that a write
// past the end or after the free faults where it happens instead of
// corrupting the heap for a later malloc to find.
uint64_t mg_emu_alloc(uint64_t n, int mode) {
  GoCall order;
#if defined(__linux__)
  if (mode == 2) {
    n = (n + 255) & ~uint64_t(255);
    uint64_t len = ((n + 4095) & ~uint64_t(4095)) + 4096;
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return 0;
    char* base = static_cast<char*>(m);
    if (mprotect(base + len - 4096, 4096, PROT_NONE) != 0) {
      munmap(m, len);
      return 0;
    }
    uint64_t p = reinterpret_cast<uint64_t>(base + len - 4096 - n);
    std::lock_guard<std::mutex> lk(allocs_mu);
    guarded()[p] = Guarded{reinterpret_cast<uint64_t>(base), len};
    return p;
  }
  if (mode != 1) {
#endif
    n = (n + 255) & ~uint64_t(255);
    void* h = std::aligned_alloc(256, n);
    if (h == nullptr) return 0;
    std::memset(h, 0, n);
    return reinterpret_cast<uint64_t>(h);
#if defined(__linux__)
  }
  n = (n + 4095) & ~uint64_t(4095);
  int fd = memfd_create("mscclgo-emu", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (ftruncate(fd, off_t(n)) != 0) {
    close(fd);
    return 0;
  }
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return 0;
  }
  std::lock_guard<std::mutex> lk(allocs_mu);
  allocs()[reinterpret_cast<uint64_t>(p)] = Alloc{fd, n, false, next_alloc_id()};
  return reinterpret_cast<uint64_t>(p);
#else
  (void)mode;
#endif
}

}  // extern "C"

namespace {
// free_locked gives back allocation p of mode; called with allocs_mu
// held.
void free_locked(uint64_t p, int mode) {
#if defined(__linux__)
  if (mode == 2) {
    // The pages go back; the addresses stay reserved and inaccessible.
    auto it = guarded().find(p);
    if (it == guarded().end()) return;
    void* base = reinterpret_cast<void*>(it->second.base);
    madvise(base, it->second.len, MADV_DONTNEED);
    mprotect(base, it->second.len, PROT_NONE);
    guarded().erase(it);
    return;
  }
  if (mode == 1) {
    auto it = allocs().find(p);
    if (it == allocs().end() || it->second.opened) return;
    munmap(reinterpret_cast<void*>(p), it->second.n);
    close(it->second.fd);
    allocs().erase(it);
    return;
  }
#else
  (void)mode;
#endif
  std::free(reinterpret_cast<void*>(p));
}
}  // namespace

extern "C" {

// mg_emu_free gives back allocation p of mg_emu_alloc's mode, at once or,
// where a peer holds it (mg_emu_retain), at the last mg_emu_release.
void mg_emu_free(uint64_t p, int mode) {
  GoCall order;
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto h = holds().find(p);
  if (h != holds().end()) {
    h->second.freed = true;
    h->second.mode = mode;
    return;
  }
  free_locked(p, mode);
}

// mg_emu_retain holds allocation p (its start) for a peer in this process
// that took its address; mg_emu_release lets it go.
void mg_emu_retain(uint64_t p) {
  GoCall order;
  std::lock_guard<std::mutex> lk(allocs_mu);
  holds()[p].refs++;
}

// mg_emu_release ends one mg_emu_retain of p; the last gives p back if
// its owner has freed it meanwhile.
void mg_emu_release(uint64_t p) {
  GoCall order;
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto h = holds().find(p);
  if (h == holds().end()) return;
  if (--h->second.refs > 0) return;
  Held held = h->second;
  holds().erase(h);
  if (held.freed) free_locked(p, held.mode);
}

// mg_emu_ipc_get returns the memfd and size of the allocation at p, or
// -1 if p is not the start of one (or the platform has no memfd).
int mg_emu_ipc_get(uint64_t p, uint64_t* n) {
  GoCall order;
#if defined(__linux__)
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto it = allocs().find(p);
  if (it == allocs().end() || it->second.opened) return -1;
  *n = it->second.n;
  return it->second.fd;
#else
  (void)p;
  (void)n;
  return -1;
#endif
}

// mg_emu_range returns the start and size of the exportable allocation
// (or opened peer mapping) that holds p, or 0 if none does.
uint64_t mg_emu_range(uint64_t p, uint64_t* n) {
  GoCall order;
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto it = allocs().upper_bound(p);
  if (it == allocs().begin()) return 0;
  --it;
  if (p - it->first >= it->second.n) return 0;
  *n = it->second.n;
  return it->first;
}

// mg_emu_alloc_id returns the id of the exportable allocation (or opened
// peer mapping) that holds p, or 0 if none does: an allocation made where
// a freed one was has another id, as on CUDA.
uint64_t mg_emu_alloc_id(uint64_t p) {
  GoCall order;
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto it = allocs().upper_bound(p);
  if (it == allocs().begin()) return 0;
  --it;
  if (p - it->first >= it->second.n) return 0;
  return it->second.id;
}

// mg_emu_ipc_open maps n bytes of the file at path (another process's
// memfd, through /proc/PID/fd/FD); 0 on failure, with errno.
uint64_t mg_emu_ipc_open(const char* path, uint64_t n) {
  GoCall order;
#if defined(__linux__)
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 0;
  std::lock_guard<std::mutex> lk(allocs_mu);
  allocs()[reinterpret_cast<uint64_t>(p)] = Alloc{-1, n, true, next_alloc_id()};
  return reinterpret_cast<uint64_t>(p);
#else
  (void)path;
  (void)n;
  return 0;
#endif
}

// mg_emu_ipc_close unmaps a peer's allocation opened by mg_emu_ipc_open;
// -1 if p is not one.
int mg_emu_ipc_close(uint64_t p) {
  GoCall order;
#if defined(__linux__)
  std::lock_guard<std::mutex> lk(allocs_mu);
  auto it = allocs().find(p);
  if (it == allocs().end() || !it->second.opened) return -1;
  munmap(reinterpret_cast<void*>(p), it->second.n);
  allocs().erase(it);
  return 0;
#else
  (void)p;
  return -1;
#endif
}

// Go memory (the host side of htod and dtoh) is mapped by the Go
// runtime on whichever thread grows the heap, an order ThreadSanitizer
// cannot see either: under it, the Go side is copied through a staging
// buffer with the sanitizer ignoring that copy alone, so that the
// device side is still checked.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

// mg_emu_tsan reports whether this build runs under ThreadSanitizer.
int mg_emu_tsan(void) {
#if defined(__SANITIZE_THREAD__)
  return 1;
#else
  return 0;
#endif
}

// mg_emu_zero clears n bytes of device memory at dst (a memset on a
// stream), without a buffer of zeros from the caller.
void mg_emu_zero(uint64_t dst, uint64_t n) {
  GoCall order;
  std::memset(reinterpret_cast<void*>(dst), 0, n);
}

void mg_emu_htod(uint64_t dst, const void* src, uint64_t n) {
  GoCall order;
#if defined(__SANITIZE_THREAD__)
  std::vector<unsigned char> stage(n);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  std::memcpy(stage.data(), src, n);
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  src = stage.data();
#endif
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
}

void mg_emu_dtoh(void* dst, uint64_t src, uint64_t n) {
  GoCall order;
#if defined(__SANITIZE_THREAD__)
  std::vector<unsigned char> stage(n);
  std::memcpy(stage.data(), reinterpret_cast<const void*>(src), n);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  std::memcpy(dst, stage.data(), n);
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#else
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
#endif
}

uint64_t mg_emu_load(uint64_t addr) {
  GoCall order;
  return word<uint64_t>(addr).load(std::memory_order_acquire);
}

void mg_emu_store(uint64_t addr, uint64_t v) {
  GoCall order;
  word<uint64_t>(addr).store(v, std::memory_order_release);
}

uint64_t mg_emu_add(uint64_t addr, uint64_t v) {
  GoCall order;
  return word<uint64_t>(addr).fetch_add(v, std::memory_order_acq_rel) + v;
}

// mg_emu_copy is the proxy's copy engine: packets move in 8-byte atomic
// words, since their readers poll them while they arrive (and may be
// parked on them: d, if not NULL, wakes them).
void mg_emu_copy(void* d, uint64_t dst, uint64_t src, uint64_t n, int packets) {
  GoCall order;
  if (packets) {
    mg_host_park* park = d != nullptr ? static_cast<Dev*>(d)->park : nullptr;
    for (uint64_t i = 0; i + 8 <= n; i += 8) {
      word<uint64_t>(dst + i).store(word<uint64_t>(src + i).load(std::memory_order_acquire), std::memory_order_release);
      if (park != nullptr) park->notify(dst + i);
    }
    return;
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
}

// mg_emu_fence has nothing to wait for: copies complete when they
// return, and the proxy's next store (mg_emu_store/mg_emu_add) is a
// release that orders them.
void mg_emu_fence(void) {}

void* mg_emu_dev_new(void) {
  GoCall order;
  return new (std::nothrow) Dev();
}

void mg_emu_dev_free(void* d) {
  GoCall order;
  delete static_cast<Dev*>(d);
}

// mg_emu_dev_map registers [p, p+n) as host-mapped memory of the device.
void mg_emu_dev_map(void* d, uint64_t p, uint64_t n) {
  GoCall order;
  Dev* dev = static_cast<Dev*>(d);
  dev->lo.push_back(p);
  dev->hi.push_back(p + n);
}

void mg_emu_dev_unmap(void* d, uint64_t p) {
  GoCall order;
  Dev* dev = static_cast<Dev*>(d);
  for (size_t i = 0; i < dev->lo.size(); i++) {
    if (dev->lo[i] == p) {
      dev->lo.erase(dev->lo.begin() + long(i));
      dev->hi.erase(dev->hi.begin() + long(i));
      return;
    }
  }
}

// mg_emu_entry returns the index of the kernel entry called name, or -1.
int mg_emu_entry(const char* name) {
  GoCall order;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    if (std::strcmp(entries[i].name, name) == 0) return int(i);
  }
  return -1;
}

// mg_emu_launch starts kernel entry on the device d, with its probe
// counting afresh: the ops, with count & 1 the accesses to host-mapped
// memory (a range test per access: only where asked for) and with
// count & 2 the data traffic of every op (host/traffic.h).
uint64_t mg_emu_launch(void* d, int entry, unsigned grid, unsigned block, unsigned shmem, uint64_t args, int count) {
  GoCall order;
  Dev* dev = static_cast<Dev*>(d);
  if (entry < 0 || size_t(entry) >= sizeof entries / sizeof entries[0]) return 0;
  dev->host_access.assign(grid, 0);
  dev->ops.assign(grid, 0);
  mg_host_traffic* traffic = nullptr;
  if (count & 2) {
    dev->traffic.reset(grid, block);
    traffic = &dev->traffic;
  } else {
    dev->traffic.reset(0, 0);
  }
  dev->probe = mg_host_probe{dev->lo.data(),      dev->hi.data(), (count & 1) ? unsigned(dev->lo.size()) : 0u,
                             grid,                dev->host_access.data(), dev->ops.data(),
                             dev->park,           traffic};
  return reinterpret_cast<uint64_t>(
      entries[entry].fn(grid, block, shmem, reinterpret_cast<const void*>(args), &dev->probe));
}

// mg_emu_counts copies the last launch's per-block counts (n at most).
unsigned mg_emu_counts(void* d, uint64_t* host_access, uint64_t* ops, unsigned n) {
  GoCall order;
  Dev* dev = static_cast<Dev*>(d);
  unsigned m = std::min<unsigned>(n, unsigned(dev->host_access.size()));
  for (unsigned i = 0; i < m; i++) {
    host_access[i] = __atomic_load_n(&dev->host_access[i], __ATOMIC_RELAXED);
    ops[i] = __atomic_load_n(&dev->ops[i], __ATOMIC_RELAXED);
  }
  return m;
}

// mg_emu_traffic copies the last launch's traffic of block blk, op by op
// (six words per op, in the order of mg_host_opcount; n ops at most), and
// returns how many ops it has (0 where traffic was not counted).
unsigned mg_emu_traffic(void* d, unsigned blk, uint64_t* out, unsigned n) {
  GoCall order;
  Dev* dev = static_cast<Dev*>(d);
  if (blk >= dev->traffic.blocks()) return 0;
  const std::vector<mg_host_opcount>& ops = dev->traffic.result(blk);
  for (unsigned i = 0; i < n && i < ops.size(); i++) {
    const mg_host_opcount& o = ops[i];
    uint64_t w[6] = {o.loaded, o.stored, o.polled, o.requests, o.sectors, o.min_sectors};
    std::memcpy(out + 6 * i, w, sizeof w);
  }
  return unsigned(ops.size());
}

// mg_emu_traffic_blocks returns the blocks of the last launch whose
// traffic was counted (0: not counted).
unsigned mg_emu_traffic_blocks(void* d) {
  GoCall order;
  return static_cast<Dev*>(d)->traffic.blocks();
}

// mg_emu_post stores a word the kernel may be parked on.
void mg_emu_post(void* d, uint64_t addr, uint64_t v) {
  GoCall order;
  word<uint64_t>(addr).store(v, std::memory_order_release);
  static_cast<Dev*>(d)->park->notify(addr);
}

void mg_emu_store32(uint64_t addr, uint32_t v) {
  GoCall order;
  word<uint32_t>(addr).store(v, std::memory_order_release);
}

void mg_emu_wait(uint64_t h) {
  GoCall order;
  mg_host_wait(reinterpret_cast<void*>(h));
}
}
