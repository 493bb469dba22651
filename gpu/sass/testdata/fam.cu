// Small kernels in the shapes of the interpreter's loops, for the tests
// of package sass. With CUDA 11.8 (nvcc V11.8.89), in this folder:
//   nvcc -O3 -gencode arch=compute_90,code=sm_90 -cubin -Xptxas -v -o fam_sm90.cubin fam.cu 2> fam_sm90.ptxas
//   cuobjdump -sass fam_sm90.cubin > fam_sm90.sass
#include <stdint.h>
struct A { uint64_t d, s, n; uint64_t* flag; };
// A copy through global pointers (kernel parameters): LDG/STG.128.
extern "C" __global__ void copy_global(uint4* d, const uint4* s, uint64_t n) {
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}
// The same through pointers kept in shared memory: generic LD/ST.128.
extern "C" __global__ void copy_generic(const A* a) {
  extern __shared__ uint64_t sh[];
  if (threadIdx.x == 0) { sh[0] = a->d; sh[1] = a->s; sh[2] = a->n; }
  __syncthreads();
  // Either shared or global: the compiler cannot tell which.
  uint4* d = a->n == 0 ? (uint4*)sh : (uint4*)sh[0]; const uint4* s = (const uint4*)sh[1]; uint64_t n = sh[2];
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}
// A byte loop in a function of its own, exempt by its name.
extern "C" __device__ __noinline__ void copy_fallback(unsigned char* d, const unsigned char* s, uint64_t n) {
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
}
extern "C" __global__ void copy_unaligned(const A* a) {
  copy_fallback((unsigned char*)a->d, (const unsigned char*)a->s, a->n);
}
// A 32-bit reduction with a volatile (strong) store: three findings.
extern "C" __global__ void reduce_narrow(const A* a) {
  volatile float* d = (float*)a->d; const float* s = (const float*)a->s;
  for (uint64_t i = threadIdx.x; i < a->n; i += blockDim.x) d[i] = s[i] + s[i + a->n];
}
// A spin on a flag (NANOSLEEP) inside a loop over packets, then an atomic.
extern "C" __global__ void packets(const A* a) {
  for (uint64_t i = threadIdx.x; i < a->n; i += blockDim.x) {
    uint32_t v, f;
    do {
      asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(v), "=r"(f) : "l"(a->s + 8 * i) : "memory");
      if (f != 1) __nanosleep(32);
    } while (f != 1);
    asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(a->d + 8 * i), "r"(v), "r"(2u) : "memory");
  }
  if (threadIdx.x == 0) atomicAdd((unsigned long long*)a->flag, 1ull);
}
