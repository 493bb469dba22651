// kernel.cc is the host translation unit of the interpreter: the same
// interp.cuh that nvcc compiles, built by g++ against cuda_host.h, plus
// the grid launcher. gpu/emu compiles it through cgo; the fake libcuda of
// the cuda-tagged tests loads it as a shared library (Makefile).
#include "host/launch.cc"
#include "mscclgo/interp.cuh"

// mscclgo_host_interp_T_LLn launches the kernel mscclgo_interp_T_LLn on
// host threads (the fake libcuda resolves mscclgo_NAME to
// mscclgo_host_NAME); mscclgo_host_probe_interp_T_LLn does it with a
// probe that counts host-mapped accesses (gpu/emu).
#define MG_HOST_ENTRY(name)                                                                                     \
  extern "C" void* mscclgo_host_##name(unsigned grid, unsigned block, unsigned shmem, const void* args) {      \
    return mg_host_launch_async(reinterpret_cast<mg_host_kernel>(&mscclgo_##name), grid, block, shmem, args,  \
                                nullptr);                                                                      \
  }                                                                                                            \
  extern "C" void* mscclgo_host_probe_##name(unsigned grid, unsigned block, unsigned shmem, const void* args, \
                                             mg_host_probe* probe) {                                           \
    return mg_host_launch_async(reinterpret_cast<mg_host_kernel>(&mscclgo_##name), grid, block, shmem, args,  \
                                probe);                                                                        \
  }
MG_HOST_ENTRY(interp_f16_ll16)
MG_HOST_ENTRY(interp_bf16_ll16)
MG_HOST_ENTRY(interp_f32_ll16)
MG_HOST_ENTRY(interp_i32_ll16)
MG_HOST_ENTRY(interp_f16_ll8)
MG_HOST_ENTRY(interp_bf16_ll8)
MG_HOST_ENTRY(interp_f32_ll8)
MG_HOST_ENTRY(interp_i32_ll8)
#undef MG_HOST_ENTRY
