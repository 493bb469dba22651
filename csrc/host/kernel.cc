// kernel.cc is the host translation unit of the interpreter: the same
// interp.cuh that nvcc compiles, built by g++ against cuda_host.h, plus
// the grid launcher. gpu/emu compiles it through cgo; the fake libcuda of
// the cuda-tagged tests loads it as a shared library (Makefile).
#include "host/launch.cc"
#include "mscclgo/interp.cuh"

// mscclgo_host_interp launches the interpreter kernel on host threads.
extern "C" void* mscclgo_host_interp(unsigned grid, unsigned block, unsigned shmem, const void* args) {
  return mg_host_launch_async(reinterpret_cast<mg_host_kernel>(&mscclgo_interp), grid, block, shmem, args);
}
