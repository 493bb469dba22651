// interp.cu is the CUDA translation unit of the plan interpreter: nvcc
// compiles it to cubins (sm_80, sm_90) and PTX; see Makefile `gpu`.
#include "mscclgo/interp.cuh"
