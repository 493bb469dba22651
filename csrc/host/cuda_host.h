// cuda_host.h maps the part of the CUDA execution model the interpreter
// uses onto host threads, so that g++ compiles the same kernel source:
// one std::thread per CUDA thread, a std::barrier per block for
// __syncthreads, thread-local threadIdx/blockIdx/blockDim/gridDim, and a
// per-block dynamic shared-memory buffer. launch.h runs a grid.
#ifndef MSCCLGO_CUDA_HOST_H
#define MSCCLGO_CUDA_HOST_H

#if defined(__CUDACC__)
#error "cuda_host.h is for the host build only"
#endif

#include <barrier>
#include <cstdint>

struct mg_dim3 {
  unsigned x, y, z;
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
  std::barrier<>* bar;
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
