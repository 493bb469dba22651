// launch.h declares the host grid launcher: it runs a kernel written for
// CUDA on host threads, one std::thread per CUDA thread (cuda_host.h).
#ifndef MSCCLGO_HOST_LAUNCH_H
#define MSCCLGO_HOST_LAUNCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// mg_host_kernel is a kernel taking one pointer argument.
typedef void (*mg_host_kernel)(const void* arg);

struct mg_host_probe;

// mg_host_launch_async starts kernel on grid blocks of block threads with
// shmem bytes of dynamic shared memory each and returns a handle for
// mg_host_wait, or NULL if the threads could not be started. probe (may
// be NULL) counts the launch's host-mapped accesses (cuda_host.h).
void* mg_host_launch_async(mg_host_kernel kernel, unsigned grid, unsigned block, unsigned shmem, const void* arg,
                           struct mg_host_probe* probe);

// mg_host_wait waits for the launch to end and frees the handle.
void mg_host_wait(void* handle);

#ifdef __cplusplus
}
#endif

#endif  // MSCCLGO_HOST_LAUNCH_H
