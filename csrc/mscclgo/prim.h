// prim.h holds every memory-ordering, atomic, packet and spin primitive of
// the interpreter, with two implementations: PTX for nvcc (__CUDACC__) and
// std::atomic_ref / std::barrier for the host build (csrc/host), so that
// the kernel sources compile unchanged with both. Nothing outside this
// file (and csrc/host) may use inline PTX, atomics or volatile accesses.
// Section numbers (§) in this file refer to docs/semantics.md.
#ifndef MSCCLGO_PRIM_H
#define MSCCLGO_PRIM_H

#include <stdint.h>

#include "mscclgo/layout.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MG_DEV __device__ __forceinline__
#define MG_UNROLL _Pragma("unroll")
// The kernel must launch with 1024 threads per block: cap its registers.
#define MG_LAUNCH_BOUNDS __launch_bounds__(1024, 1)
#else
#include <atomic>
#include <cstring>

#include "host/cuda_host.h"
#define MG_DEV inline
#define MG_UNROLL _Pragma("GCC unroll 4")
#define MG_LAUNCH_BOUNDS
#endif

namespace mg {

// v16 is a 16-byte vector of four 32-bit words.
struct alignas(16) v16 {
  uint32_t x, y, z, w;
};

#if defined(__CUDACC__)

// ---- device: PTX ----------------------------------------------------------

MG_DEV uint32_t tid() { return threadIdx.x; }
MG_DEV uint32_t nthreads() { return blockDim.x; }
MG_DEV uint32_t block_id() { return blockIdx.x; }
MG_DEV void block_sync() { __syncthreads(); }
MG_DEV unsigned char* dyn_shmem() {
  extern __shared__ uint64_t mg_dyn_shmem[];
  return reinterpret_cast<unsigned char*>(mg_dyn_shmem);
}

MG_DEV uint64_t load_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV uint64_t load_relaxed_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV void store_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MG_DEV void store_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MG_DEV void add_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// fetch_add_gpu: device-scope relaxed fetch-and-add (private counters).
MG_DEV uint64_t fetch_add_gpu(uint64_t* p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
MG_DEV uint64_t fetch_add_acq_rel_gpu(uint64_t* p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
MG_DEV void add_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MG_DEV uint64_t load_acquire_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV uint32_t load_acquire_gpu32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV void store_release_gpu32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// load_acquire_sys32 reads a word another engine (a copy or memset on a
// host stream) writes: the host's abort word.
MG_DEV uint32_t load_acquire_sys32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV void store_relaxed_gpu32(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
MG_DEV uint32_t fetch_add_acq_rel_gpu32(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Host-mapped progress records and the abort word: volatile accesses,
// as st.volatile/ld.volatile of the global state space (host memory
// mapped into the device's address space is global memory, PTX ISA
// "State Spaces"), so that they compile to STG/LDG, not to the generic
// ST/LD that must resolve the space on every access. The volatile
// qualifier is unchanged: the same strength as the C++ volatile access
// these were before.
MG_DEV void put_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
MG_DEV void put_i32(int32_t* p, int32_t v) {
  asm volatile("st.volatile.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
MG_DEV void put_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MG_DEV uint32_t get_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The block's shared-memory abort flag: volatile, read by every thread.
MG_DEV uint32_t get_shared(const uint32_t* p) { return *reinterpret_cast<const volatile uint32_t*>(p); }
MG_DEV void put_shared(uint32_t* p, uint32_t v) { *reinterpret_cast<volatile uint32_t*>(p) = v; }

// Cold per-thread state (thread 0's heartbeat count, the FIFO tail a
// thread last read, the op loop's position): get_cold and put_cold are
// ld.local/st.local of the thread's own stack frame, in inline PTX, so
// that the value stays in local memory (LDL/STL, L1-cached) where it is
// used, once per op or per FIFO push, and holds no register across the
// data loops, which spilled under the 64-register cap of 1024-thread
// blocks (make gpu-sass, docs/gpu.md §16). (A C++ volatile access does
// not do it: nvcc 11.8 keeps such a variable in a register all the same,
// and ptxas then spills it.) p is the generic address of a local
// variable of the calling thread; only that thread accesses it.
MG_DEV uint32_t get_cold(const uint32_t* p) {
  uint32_t v;
  asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.local.u64 a, %1;\n\tld.local.u32 %0, [a];\n\t}"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}
MG_DEV void put_cold(uint32_t* p, uint32_t v) {
  asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.local.u64 a, %0;\n\tst.local.u32 [a], %1;\n\t}" ::"l"(p), "r"(v)
               : "memory");
}
MG_DEV uint64_t get_cold(const uint64_t* p) {
  uint64_t v;
  asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.local.u64 a, %1;\n\tld.local.u64 %0, [a];\n\t}"
               : "=l"(v)
               : "l"(p)
               : "memory");
  return v;
}
MG_DEV void put_cold(uint64_t* p, uint64_t v) {
  asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.local.u64 a, %0;\n\tst.local.u64 [a], %1;\n\t}" ::"l"(p), "l"(v)
               : "memory");
}

// fallback_mark marks an iteration of the loops for operands that are
// not 16-byte aligned (copy_fallback, reduce_fallback): one PMTRIG in
// SASS (pmevent 7, a performance-monitor trigger that does nothing
// unless a profiler counts it), by which make gpu-sass tells those
// loops from the vector loops it holds to 128 bits (docs/gpu.md §16):
// every loop of those paths holds one, since the compiler may place
// one of an inner loop's in the loop around it.
// Making them __noinline__ functions instead cost spills (one entry:
// 576 B of stack, 132/216 B of spill stores/loads against 560, 120/184
// inline): a call keeps the whole interpreter's live state across it.
MG_DEV void fallback_mark() { asm volatile("pmevent 7;"); }

// count_op counts an executed op for the host build's probe (no-op here).
MG_DEV void count_op() {}
// begin_op tells the host build's traffic counters that the calling
// thread starts op i of its block (no-op here).
MG_DEV void begin_op(uint32_t) {}
// notify tells the host build's parked waiters that p changed (no-op).
MG_DEV void notify(const void*) {}

// LL packets: one volatile vector store / load per packet (§3.1).
MG_DEV void store_pkt16(void* p, uint32_t lo, uint32_t hi, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
}
MG_DEV void load_pkt16(const void* p, uint32_t* lo, uint32_t* f0, uint32_t* hi, uint32_t* f1) {
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(*lo), "=r"(*f0), "=r"(*hi), "=r"(*f1)
               : "l"(p)
               : "memory");
}
MG_DEV void store_pkt8(void* p, uint32_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(v), "r"(flag) : "memory");
}
MG_DEV void load_pkt8(const void* p, uint32_t* v, uint32_t* f) {
  asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(*v), "=r"(*f) : "l"(p) : "memory");
}

// Weak data accesses of the global state space: ld.global/st.global,
// which compile to LDG/STG rather than to the generic LD/ST that resolve
// the state space on every access (make gpu-sass, docs/gpu.md §16).
// Every data operand of a plan is global memory: device memory, a peer's
// device memory (peer access or an IPC mapping), or host memory mapped
// into the device, all of which the PTX ISA puts in the global state
// space ("State Spaces"); none is shared, local or constant memory. The
// generic address of global memory is its global address (the other
// primitives above rely on that too). The accesses stay weak (no .volatile,
// .relaxed or scope): only the state space changes, not their place in
// the memory model. The "memory" clobber keeps the compiler from moving
// them across the fences, atomics and barriers around them, as it would
// not move a plain access; the loads are not volatile, so an unused one
// may still be dropped.
MG_DEV v16 load16(const void* p) {
  v16 v;
  asm("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
MG_DEV void store16(void* p, v16 v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
MG_DEV uint32_t load32(const void* p) {
  uint32_t v;
  asm("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV void store32(void* p, uint32_t v) { asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
MG_DEV uint32_t load16b(const void* p) {
  uint16_t v;
  asm("ld.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
MG_DEV void store16b(void* p, uint32_t v) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(uint16_t(v)) : "memory");
}
MG_DEV unsigned char load8(const void* p) {
  uint16_t v;
  asm("ld.global.u8 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return static_cast<unsigned char>(v);
}
MG_DEV void store8(void* p, unsigned char v) {
  asm volatile("st.global.u8 [%0], %1;" ::"l"(p), "h"(uint16_t(v)) : "memory");
}

// copy_share copies thread tid's share (of nt) of an n-byte copy in one
// go and reports true where the build does that (the host build, see
// there); here every thread takes part in the caller's vector loop.
MG_DEV bool copy_share(uint32_t, uint32_t, unsigned char*, const unsigned char*, uint64_t) { return false; }

// Spin discipline: a waiting thread reads the device abort word every
// kAbortEvery spins and publishes its wait after kReport spins.
constexpr uint32_t kAbortEvery = 1024;
constexpr uint32_t kReport = 4096;

// pause is one step of a spin loop: the first spins are free, then a
// growing nanosleep (up to 1 us) yields the issue slots to data movers.
MG_DEV void pause(uint32_t spins) {
#if __CUDA_ARCH__ >= 700
  if (spins > 64) __nanosleep(spins > 4096 ? 1024 : (spins > 512 ? 256 : 32));
#endif
}

// wait_for is one step of a spin loop on the word at p.
template <class Ready>
MG_DEV void wait_for(const void* p, uint32_t spins, Ready ready) {
  (void)p;
  (void)ready;
  pause(spins);
}

#if defined(MSCCLGO_MULTIMEM) && __CUDA_ARCH__ >= 900
// NVLS multimem (PTX ISA 8.x, sm_90): CUDA 11.8's ptxas rejects these, so
// they are only in the PTX that `make gpu` writes with -DMSCCLGO_MULTIMEM
// and a newer driver JIT-compiles. mc_* address a multicast range: a load
// reduces over every member's bound buffer, a store writes all of them.
#define MG_HAVE_MULTIMEM 1
template <int DT>
MG_DEV v16 mc_ld_reduce16(const void* p) {
  v16 v;
  if (DT == MG_F32) {
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
  } else if (DT == MG_F16) {
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f16x2 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
  } else if (DT == MG_BF16) {
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
  } else {
    const uint32_t* q = static_cast<const uint32_t*>(p);
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.s32 %0, [%1];" : "=r"(v.x) : "l"(q) : "memory");
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.s32 %0, [%1];" : "=r"(v.y) : "l"(q + 1) : "memory");
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.s32 %0, [%1];" : "=r"(v.z) : "l"(q + 2) : "memory");
    asm volatile("multimem.ld_reduce.relaxed.sys.global.add.s32 %0, [%1];" : "=r"(v.w) : "l"(q + 3) : "memory");
  }
  return v;
}
MG_DEV void mc_st16(void* p, v16 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
MG_DEV void mc_st8(void* p, uint32_t lo, uint32_t hi) {
  asm volatile("multimem.st.relaxed.sys.global.v2.f32 [%0], {%1,%2};" ::"l"(p), "r"(lo), "r"(hi) : "memory");
}
#endif

#else  // host build

// ---- host: std::atomic_ref ------------------------------------------------

MG_DEV uint32_t tid() { return threadIdx.x; }
MG_DEV uint32_t nthreads() { return blockDim.x; }
MG_DEV uint32_t block_id() { return blockIdx.x; }
MG_DEV void block_sync() { __syncthreads(); }
MG_DEV unsigned char* dyn_shmem() { return mg_host_shmem(); }

// touch reports one access to the launch's probe (csrc/host), which
// counts, per block, the accesses that land in host-mapped memory. Every
// primitive below that touches memory calls it once.
__attribute__((always_inline)) MG_DEV void touch(const void* p) {
  mg_host_probe* pr = mg_host_self().probe;
  if (pr != nullptr) pr->touch(reinterpret_cast<uintptr_t>(p), mg_host_self().block_idx.x);
}

MG_DEV void fallback_mark() {}

MG_DEV void count_op() {
  mg_host_probe* pr = mg_host_self().probe;
  if (pr != nullptr) pr->op(mg_host_self().block_idx.x);
}

// begin_op and data feed the probe's traffic counters (csrc/host/
// traffic.h), where the launch counts them: every thread reports the op
// it starts, and every data access (not the atomics and flags of
// synchronisation, not the progress records) its address, size and kind.
MG_DEV void begin_op(uint32_t i) {
  mg_host_thread& s = mg_host_self();
  if (s.probe != nullptr && s.probe->traffic != nullptr) s.probe->traffic->begin_op(s.block_idx.x, s.thread_idx.x, i);
}
__attribute__((always_inline)) MG_DEV void data(const void* p, unsigned n, mg_host_access kind) {
  mg_host_thread& s = mg_host_self();
  if (s.probe != nullptr && s.probe->traffic != nullptr) {
    s.probe->traffic->access(s.block_idx.x, s.thread_idx.x, reinterpret_cast<uintptr_t>(p), n, kind);
  }
}

// Cold per-thread state: a plain access of the fiber's own stack here.
MG_DEV uint32_t get_cold(const uint32_t* p) { return *p; }
MG_DEV void put_cold(uint32_t* p, uint32_t v) { *p = v; }
MG_DEV uint64_t get_cold(const uint64_t* p) { return *p; }
MG_DEV void put_cold(uint64_t* p, uint64_t v) { *p = v; }

// notify wakes the fibers waiting in turns (after a store to p that may
// release them).
MG_DEV void notify(const void* p) {
  (void)p;
  mg_host_notify();
}

template <class T>
inline std::atomic_ref<T> aref(const T* p) {
  touch(p);
  return std::atomic_ref<T>(*const_cast<T*>(p));
}

MG_DEV uint32_t get_shared(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
}
MG_DEV void put_shared(uint32_t* p, uint32_t v) {
  std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed);
}

MG_DEV uint64_t load_acquire_sys(const uint64_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV uint64_t load_relaxed_sys(const uint64_t* p) { return aref(p).load(std::memory_order_relaxed); }
MG_DEV void store_release_sys(uint64_t* p, uint64_t v) { aref(p).store(v, std::memory_order_release); }
MG_DEV void store_relaxed_sys(uint64_t* p, uint64_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV void add_release_sys(uint64_t* p, uint64_t v) {
  aref(p).fetch_add(v, std::memory_order_release);
  notify(p);
}
MG_DEV uint64_t fetch_add_gpu(uint64_t* p, uint64_t v) { return aref(p).fetch_add(v, std::memory_order_relaxed); }
MG_DEV uint64_t fetch_add_acq_rel_gpu(uint64_t* p, uint64_t v) {
  return aref(p).fetch_add(v, std::memory_order_acq_rel);
}
MG_DEV void add_release_gpu(uint64_t* p, uint64_t v) {
  aref(p).fetch_add(v, std::memory_order_release);
  notify(p);
}
MG_DEV uint64_t load_acquire_gpu(const uint64_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV uint32_t load_acquire_gpu32(const uint32_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV uint32_t load_acquire_sys32(const uint32_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV void store_release_gpu32(uint32_t* p, uint32_t v) {
  aref(p).store(v, std::memory_order_release);
  notify(p);
}
MG_DEV void store_relaxed_gpu32(uint32_t* p, uint32_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV uint32_t fetch_add_acq_rel_gpu32(uint32_t* p, uint32_t v) {
  return aref(p).fetch_add(v, std::memory_order_acq_rel);
}

MG_DEV void put_u32(uint32_t* p, uint32_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV void put_i32(int32_t* p, int32_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV void put_u64(uint64_t* p, uint64_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV uint32_t get_u32(const uint32_t* p) { return aref(p).load(std::memory_order_relaxed); }

// LL16 on the host: two 8-byte atomic words {lo, flag} and {hi, flag}.
// Each word validates itself, so the protocol needs no 16-byte atomicity.
// Packet stores release and loads acquire: on the device the payload a
// thread stores was loaded before (a data dependency) and a reader's
// later stores depend on the payload it read, which orders them; the C++
// model only knows that order through release/acquire. (Plans rely on
// it: allgather_nvls_zero_copy_pkt rewrites a rank's own chunk from
// packets of it that another block is still packing.)
MG_DEV void store_pkt16(void* p, uint32_t lo, uint32_t hi, uint32_t flag) {
  data(p, 16, MG_PKT_STORE);
  uint64_t* w = static_cast<uint64_t*>(p);
  aref(w).store(uint64_t(lo) | uint64_t(flag) << 32, std::memory_order_release);
  aref(w + 1).store(uint64_t(hi) | uint64_t(flag) << 32, std::memory_order_release);
  notify(p);
}
MG_DEV void load_pkt16(const void* p, uint32_t* lo, uint32_t* f0, uint32_t* hi, uint32_t* f1) {
  data(p, 16, MG_PKT_LOAD);
  const uint64_t* w = static_cast<const uint64_t*>(p);
  uint64_t a = aref(w).load(std::memory_order_acquire);
  uint64_t b = aref(w + 1).load(std::memory_order_acquire);
  *lo = uint32_t(a);
  *f0 = uint32_t(a >> 32);
  *hi = uint32_t(b);
  *f1 = uint32_t(b >> 32);
}
MG_DEV void store_pkt8(void* p, uint32_t v, uint32_t flag) {
  data(p, 8, MG_PKT_STORE);
  aref(static_cast<uint64_t*>(p)).store(uint64_t(v) | uint64_t(flag) << 32, std::memory_order_release);
  notify(p);
}
MG_DEV void load_pkt8(const void* p, uint32_t* v, uint32_t* f) {
  data(p, 8, MG_PKT_LOAD);
  uint64_t a = aref(static_cast<const uint64_t*>(p)).load(std::memory_order_acquire);
  *v = uint32_t(a);
  *f = uint32_t(a >> 32);
}

MG_DEV v16 load16(const void* p) {
  touch(p);
  data(p, 16, MG_LOAD);
  v16 v;
  std::memcpy(&v, p, 16);
  return v;
}
MG_DEV void store16(void* p, v16 v) {
  touch(p);
  data(p, 16, MG_STORE);
  std::memcpy(p, &v, 16);
}
MG_DEV uint32_t load32(const void* p) {
  touch(p);
  data(p, 4, MG_LOAD);
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
MG_DEV void store32(void* p, uint32_t v) {
  touch(p);
  data(p, 4, MG_STORE);
  std::memcpy(p, &v, 4);
}
MG_DEV uint32_t load16b(const void* p) {
  touch(p);
  data(p, 2, MG_LOAD);
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
MG_DEV void store16b(void* p, uint32_t v) {
  touch(p);
  data(p, 2, MG_STORE);
  uint16_t h = uint16_t(v);
  std::memcpy(p, &h, 2);
}
MG_DEV unsigned char load8(const void* p) {
  touch(p);
  data(p, 1, MG_LOAD);
  return *static_cast<const unsigned char*>(p);
}
MG_DEV void store8(void* p, unsigned char v) {
  touch(p);
  data(p, 1, MG_STORE);
  *static_cast<unsigned char*>(p) = v;
}

// copy_share: on the host a block's threads are fibers that run one after
// another, so the device's interleaved loop (thread t takes every nt-th
// vector) makes each fiber walk the whole range for an nt-th of it. Here
// thread tid copies one contiguous share instead (whole cache lines), with
// memcpy. It declines (false) when the ends overlap (the order of the
// element copies would show), when either end lies in memory whose
// accesses the probe counts one by one (host-mapped), or when the probe
// counts data traffic (the device's loop is what it measures).
MG_DEV bool copy_share(uint32_t tid, uint32_t nt, unsigned char* d, const unsigned char* s, uint64_t n) {
  if (n == 0 || nt == 0 || (d < s + n && s < d + n)) return false;
  mg_host_probe* pr = mg_host_self().probe;
  if (pr != nullptr && (pr->traffic != nullptr || pr->counts(d, n) || pr->counts(s, n))) return false;
  uint64_t share = ((n + nt - 1) / nt + 63) & ~uint64_t(63);
  uint64_t lo = uint64_t(tid) * share;
  if (lo < n) std::memcpy(d + lo, s + lo, n - lo < share ? n - lo : share);
  return true;
}

// On the host a spin is a fiber that a few pool threads share with
// thousands of others (csrc/host/launch.cc): the abort word is read and
// the wait published after fewer spins, and wait_for gives the other
// fibers a turn (a user-space switch) and reports whether the wait is
// over, so that a pool thread whose fibers all wait sleeps until a
// notify.
constexpr uint32_t kAbortEvery = 1;
constexpr uint32_t kReport = 8;

template <class Ready>
MG_DEV void wait_for(const void* p, uint32_t spins, Ready ready) {
  (void)p;
  (void)spins;
  mg_host_turn(ready);
}

#endif

}  // namespace mg

#endif  // MSCCLGO_PRIM_H
