// cuda_host.h maps the part of the CUDA execution model the interpreter
// uses onto host threads, so that g++ compiles the same kernel source:
// one fiber of a pool thread per CUDA thread (launch.cc), an
// mg_host_barrier per block for __syncthreads, thread-local threadIdx/blockIdx/blockDim/gridDim, and a
// per-block dynamic shared-memory buffer. launch.h runs a grid.
#ifndef MSCCLGO_CUDA_HOST_H
#define MSCCLGO_CUDA_HOST_H

#if defined(__CUDACC__)
#error "cuda_host.h is for the host build only"
#endif

#include <climits>
#include <cstdint>
#include <ctime>

#include "host/traffic.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

struct mg_dim3 {
  unsigned x, y, z;
};

// The launcher's pool (launch.cc): a CUDA thread is a fiber of a pool
// thread. mg_host_yield gives the pool thread to its other fibers for a
// turn; mg_host_progress tells it that the caller's wait ended (a pool
// thread whose fibers all wait without progress sleeps until
// mg_host_notify, or a short timeout); mg_host_notify follows every
// store that may release a waiter (packets, signals, semaphores,
// barriers, the proxy's posted words and packet copies).
void mg_host_yield();
void mg_host_progress();
void mg_host_notify();

// mg_host_turn is one step of a wait: a turn for the other fibers, then
// progress if ready() holds.
template <class Ready>
inline void mg_host_turn(Ready ready) {
  mg_host_yield();
  if (ready()) mg_host_progress();
}

// mg_host_park is the emulated device's handle on the launcher's wake-up
// of waiting fibers (gpu/emu's stores from the host notify through it).
struct mg_host_park {
  void notify(uint64_t) { mg_host_notify(); }
};

// mg_host_barrier is a block's __syncthreads: the last of n arrivals
// starts the next phase (gen); the others, fibers of the same pool
// thread, take turns until it does. The arrivals' read-modify-writes of
// arrived form a release sequence that the last one's release of gen
// publishes, so every thread's work before the barrier happens before
// every thread's work after it (ThreadSanitizer sees the atomics).
struct mg_host_barrier {
  unsigned n = 1;
  uint32_t arrived = 0;
  uint32_t gen = 0;

  void init(unsigned count) { n = count; }

  void arrive_and_wait() {
    uint32_t g = __atomic_load_n(&gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == n) {
      __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&gen, g + 1, __ATOMIC_RELEASE);
      return;
    }
    while (__atomic_load_n(&gen, __ATOMIC_ACQUIRE) == g) mg_host_yield();
    mg_host_progress();
  }
};

// mg_host_probe counts, per block of one launch, the kernel's accesses
// to host-mapped memory (addresses in [lo[i], hi[i])), the ops it
// executed and, with traffic, each op's data traffic. Its owner (gpu/emu) fills the ranges before the launch and
// reads the counts after it; the kernel's threads only add.
struct mg_host_probe {
  const uint64_t* lo;
  const uint64_t* hi;
  unsigned n_ranges;
  unsigned n_blocks;
  uint64_t* host_access;  // [n_blocks]
  uint64_t* ops;          // [n_blocks]
  mg_host_park* park;     // the device's wake-up of waiters (notify)
  mg_host_traffic* traffic;  // NULL: data traffic not counted (traffic.h)

  void touch(uint64_t a, unsigned block) {
    for (unsigned i = 0; i < n_ranges; i++) {
      if (a >= lo[i] && a < hi[i]) {
        if (block < n_blocks) __atomic_fetch_add(&host_access[block], 1, __ATOMIC_RELAXED);
        return;
      }
    }
  }
  // counts reports whether any of the n bytes at p lies in a counted range.
  bool counts(const void* p, uint64_t n) const {
    uint64_t a = reinterpret_cast<uint64_t>(p);
    for (unsigned i = 0; i < n_ranges; i++) {
      if (a < hi[i] && lo[i] < a + n) return true;
    }
    return false;
  }
  void op(unsigned block) {
    if (block < n_blocks) __atomic_fetch_add(&ops[block], 1, __ATOMIC_RELAXED);
  }
};

// mg_host_thread is what a host thread knows of its CUDA position.
struct mg_host_thread {
  mg_dim3 thread_idx, block_idx, block_dim, grid_dim;
  mg_host_barrier* bar;
  unsigned char* shmem;
  mg_host_probe* probe;  // NULL: nothing counted
};

// mg_host_self returns the calling thread's position (thread-local).
inline mg_host_thread& mg_host_self();

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define threadIdx (mg_host_self().thread_idx)
#define blockIdx (mg_host_self().block_idx)
#define blockDim (mg_host_self().block_dim)
#define gridDim (mg_host_self().grid_dim)

inline void __syncthreads() { mg_host_self().bar->arrive_and_wait(); }
inline unsigned char* mg_host_shmem() { return mg_host_self().shmem; }

#endif  // MSCCLGO_CUDA_HOST_H
