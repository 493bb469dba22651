// prim.h holds every memory-ordering, atomic, packet and spin primitive of
// the interpreter, with two implementations: PTX for nvcc (__CUDACC__) and
// std::atomic_ref / std::barrier for the host build (csrc/host), so that
// the kernel sources compile unchanged with both. Nothing outside this
// file (and csrc/host) may use inline PTX, atomics or volatile accesses.
#ifndef MSCCLGO_PRIM_H
#define MSCCLGO_PRIM_H

#include <stdint.h>

#include "mscclgo/layout.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MG_DEV __device__ __forceinline__
// The kernel must launch with 1024 threads per block: cap its registers.
#define MG_LAUNCH_BOUNDS __launch_bounds__(1024, 1)
#else
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "host/cuda_host.h"
#define MG_DEV inline
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
MG_DEV void store_relaxed_gpu32(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
MG_DEV uint32_t fetch_add_acq_rel_gpu32(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

// Host-mapped progress records and the abort word: volatile accesses.
MG_DEV void put_u32(uint32_t* p, uint32_t v) { *reinterpret_cast<volatile uint32_t*>(p) = v; }
MG_DEV void put_i32(int32_t* p, int32_t v) { *reinterpret_cast<volatile int32_t*>(p) = v; }
MG_DEV void put_u64(uint64_t* p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }
MG_DEV uint32_t get_u32(const uint32_t* p) { return *reinterpret_cast<const volatile uint32_t*>(p); }

// LL packets: one volatile vector store / load per packet (docs/semantics.md §3.1).
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

// Weak data accesses.
MG_DEV v16 load16(const void* p) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  return v16{u.x, u.y, u.z, u.w};
}
MG_DEV void store16(void* p, v16 v) { *reinterpret_cast<uint4*>(p) = make_uint4(v.x, v.y, v.z, v.w); }

// pause is one step of a spin loop.
MG_DEV void pause(uint32_t spins) {
#if __CUDA_ARCH__ >= 700
  if (spins > 64) __nanosleep(spins > 4096 ? 1024 : 64);
#endif
}

// Element arithmetic, one IEEE rounding per addition (docs/semantics.md §2.7).
MG_DEV uint16_t add_f16(uint16_t a, uint16_t b) {
  return __half_as_ushort(__hadd(__ushort_as_half(a), __ushort_as_half(b)));
}
MG_DEV uint16_t add_bf16(uint16_t a, uint16_t b) {
#if __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__hadd(__ushort_as_bfloat16(a), __ushort_as_bfloat16(b)));
#else
  return __bfloat16_as_ushort(
      __float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(a)) + __bfloat162float(__ushort_as_bfloat16(b))));
#endif
}
MG_DEV uint32_t add_f32(uint32_t a, uint32_t b) { return __float_as_uint(__uint_as_float(a) + __uint_as_float(b)); }

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

template <class T>
inline std::atomic_ref<T> aref(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p));
}

MG_DEV uint64_t load_acquire_sys(const uint64_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV uint64_t load_relaxed_sys(const uint64_t* p) { return aref(p).load(std::memory_order_relaxed); }
MG_DEV void store_release_sys(uint64_t* p, uint64_t v) { aref(p).store(v, std::memory_order_release); }
MG_DEV void store_relaxed_sys(uint64_t* p, uint64_t v) { aref(p).store(v, std::memory_order_relaxed); }
MG_DEV void add_release_sys(uint64_t* p, uint64_t v) { aref(p).fetch_add(v, std::memory_order_release); }
MG_DEV uint64_t fetch_add_gpu(uint64_t* p, uint64_t v) { return aref(p).fetch_add(v, std::memory_order_relaxed); }
MG_DEV uint64_t fetch_add_acq_rel_gpu(uint64_t* p, uint64_t v) {
  return aref(p).fetch_add(v, std::memory_order_acq_rel);
}
MG_DEV void add_release_gpu(uint64_t* p, uint64_t v) { aref(p).fetch_add(v, std::memory_order_release); }
MG_DEV uint64_t load_acquire_gpu(const uint64_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV uint32_t load_acquire_gpu32(const uint32_t* p) { return aref(p).load(std::memory_order_acquire); }
MG_DEV void store_release_gpu32(uint32_t* p, uint32_t v) { aref(p).store(v, std::memory_order_release); }
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
  uint64_t* w = static_cast<uint64_t*>(p);
  aref(w).store(uint64_t(lo) | uint64_t(flag) << 32, std::memory_order_release);
  aref(w + 1).store(uint64_t(hi) | uint64_t(flag) << 32, std::memory_order_release);
}
MG_DEV void load_pkt16(const void* p, uint32_t* lo, uint32_t* f0, uint32_t* hi, uint32_t* f1) {
  const uint64_t* w = static_cast<const uint64_t*>(p);
  uint64_t a = aref(w).load(std::memory_order_acquire);
  uint64_t b = aref(w + 1).load(std::memory_order_acquire);
  *lo = uint32_t(a);
  *f0 = uint32_t(a >> 32);
  *hi = uint32_t(b);
  *f1 = uint32_t(b >> 32);
}
MG_DEV void store_pkt8(void* p, uint32_t v, uint32_t flag) {
  aref(static_cast<uint64_t*>(p)).store(uint64_t(v) | uint64_t(flag) << 32, std::memory_order_release);
}
MG_DEV void load_pkt8(const void* p, uint32_t* v, uint32_t* f) {
  uint64_t a = aref(static_cast<const uint64_t*>(p)).load(std::memory_order_acquire);
  *v = uint32_t(a);
  *f = uint32_t(a >> 32);
}

MG_DEV v16 load16(const void* p) {
  v16 v;
  std::memcpy(&v, p, 16);
  return v;
}
MG_DEV void store16(void* p, v16 v) { std::memcpy(p, &v, 16); }

// pause yields, then sleeps: hundreds of host threads may spin at once.
MG_DEV void pause(uint32_t spins) {
  if (spins < 16) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(spins < 256 ? 20 : 200));
  }
}

MG_DEV float bits_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
MG_DEV uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// f16_f32 widens fp16 bits exactly.
MG_DEV float f16_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000 | m << 13);
  if (e == 0) {
    if (m == 0) return bits_f32(sign);
    e = 113;
    while ((m & 0x400) == 0) {
      m <<= 1;
      e--;
    }
    return bits_f32(sign | e << 23 | (m & 0x3ff) << 13);
  }
  return bits_f32(sign | (e + 112) << 23 | m << 13);
}

// f32_f16 rounds to fp16, to nearest even, as executor.F32ToF16.
MG_DEV uint16_t f32_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = uint16_t(x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x > 0x7f800000) return 0x7fff;
  if (x >= 0x477ff000) return sign | 0x7c00;
  if (x >= 0x38800000) {
    x -= 112u << 23;
    x += 0xfff + ((x >> 13) & 1);
    return sign | uint16_t(x >> 13);
  }
  if (x < 0x33000000) return sign;
  uint32_t e = x >> 23, m = (x & 0x7fffff) | 0x800000, s = 126 - e;
  uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (r & 1))) r++;
  return sign | uint16_t(r);
}

MG_DEV uint16_t add_f16(uint16_t a, uint16_t b) { return f32_f16(f16_f32(a) + f16_f32(b)); }
MG_DEV uint16_t add_bf16(uint16_t a, uint16_t b) {
  uint32_t x = f32_bits(bits_f32(uint32_t(a) << 16) + bits_f32(uint32_t(b) << 16));
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fff;
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
MG_DEV uint32_t add_f32(uint32_t a, uint32_t b) {
  float s = bits_f32(a) + bits_f32(b);
  return s != s ? 0x7fffffffu : f32_bits(s);
}

#endif

// ---- shared by both builds ------------------------------------------------

// add_word adds two 32-bit words lane-wise in element type DT.
template <int DT>
MG_DEV uint32_t add_word(uint32_t a, uint32_t b) {
  if (DT == MG_F16) return uint32_t(add_f16(uint16_t(a), uint16_t(b))) | uint32_t(add_f16(a >> 16, b >> 16)) << 16;
  if (DT == MG_BF16) {
    return uint32_t(add_bf16(uint16_t(a), uint16_t(b))) | uint32_t(add_bf16(a >> 16, b >> 16)) << 16;
  }
  if (DT == MG_F32) return add_f32(a, b);
  return a + b;
}

template <int DT>
MG_DEV v16 add_v16(v16 a, v16 b) {
  return v16{add_word<DT>(a.x, b.x), add_word<DT>(a.y, b.y), add_word<DT>(a.z, b.z), add_word<DT>(a.w, b.w)};
}

}  // namespace mg

#endif  // MSCCLGO_PRIM_H
