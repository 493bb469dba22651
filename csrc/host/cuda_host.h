// cuda_host.h maps the part of the CUDA execution model the interpreter
// uses onto host threads, so that g++ compiles the same kernel source:
// one host thread per CUDA thread (a pool, launch.cc), an
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

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <thread>
#endif

struct mg_dim3 {
  unsigned x, y, z;
};

// mg_host_park lets a waiting host thread sleep until the word it polls
// may have changed, instead of waking up on a timer: stores that release
// a waiter (packets, signals, semaphores, barriers, the proxy's posted
// words and packet copies) bump the generation of the address's bucket
// and wake its sleepers (a futex); a waiter reads the generation before
// it checks its condition and sleeps only while the generation is
// unchanged, with a timeout (an abort is seen by polling). Thousands of
// waiting host threads then cost nothing while they wait.
struct mg_host_park {
  static constexpr unsigned kBuckets = 4096;
  uint32_t gen[kBuckets];
  uint32_t waiters[kBuckets];

  static unsigned bucket(uint64_t a) { return unsigned(((a >> 3) * 0x9E3779B97F4A7C15ull) >> 52); }

  void notify(uint64_t a) {
    unsigned b = bucket(a);
    __atomic_fetch_add(&gen[b], 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&waiters[b], __ATOMIC_SEQ_CST) != 0) {
#if defined(__linux__)
      syscall(SYS_futex, &gen[b], FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
    }
  }

  // wait sleeps for at most ms milliseconds unless ready() holds or a
  // store to a's bucket comes first.
  template <class Ready>
  void wait(uint64_t a, unsigned ms, Ready ready) {
    unsigned b = bucket(a);
    __atomic_fetch_add(&waiters[b], 1, __ATOMIC_SEQ_CST);
    uint32_t g = __atomic_load_n(&gen[b], __ATOMIC_SEQ_CST);
    if (!ready()) {
      timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000};
#if defined(__linux__)
      syscall(SYS_futex, &gen[b], FUTEX_WAIT_PRIVATE, g, &ts, nullptr, 0);
#else
      (void)g;
      nanosleep(&ts, nullptr);
#endif
    }
    __atomic_fetch_sub(&waiters[b], 1, __ATOMIC_SEQ_CST);
  }
};

// mg_host_barrier is a block's __syncthreads: the last of n arrivals
// starts the next phase (gen) and wakes the others, which sleep on gen
// (a futex) instead of spinning or yielding. The arrivals' read-modify-
// writes of arrived form a release sequence that the last one's release
// of gen publishes, so every thread's work before the barrier happens
// before every thread's work after it (ThreadSanitizer sees the
// atomics).
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
#if defined(__linux__)
      if (n > 1) syscall(SYS_futex, &gen, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
      return;
    }
    while (__atomic_load_n(&gen, __ATOMIC_ACQUIRE) == g) {
#if defined(__linux__)
      syscall(SYS_futex, &gen, FUTEX_WAIT_PRIVATE, g, nullptr, nullptr, 0);
#else
      std::this_thread::yield();
#endif
    }
  }
};

// mg_host_probe counts, per block of one launch, the kernel's accesses
// to host-mapped memory (addresses in [lo[i], hi[i])) and the ops it
// executed. Its owner (gpu/emu) fills the ranges before the launch and
// reads the counts after it; the kernel's threads only add.
struct mg_host_probe {
  const uint64_t* lo;
  const uint64_t* hi;
  unsigned n_ranges;
  unsigned n_blocks;
  uint64_t* host_access;  // [n_blocks]
  uint64_t* ops;          // [n_blocks]
  mg_host_park* park;     // NULL: waits back off on timers

  void touch(uint64_t a, unsigned block) {
    for (unsigned i = 0; i < n_ranges; i++) {
      if (a >= lo[i] && a < hi[i]) {
        if (block < n_blocks) __atomic_fetch_add(&host_access[block], 1, __ATOMIC_RELAXED);
        return;
      }
    }
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
mg_host_thread& mg_host_self();

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
