// launch.h declares the host grid launcher: it runs a kernel written for
// CUDA on host threads, one pooled host thread per CUDA thread
// (cuda_host.h), kept across launches.
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

// mg_host_threads_started returns how many host threads the launcher
// has started in this process: a launch starts only those its grid needs
// beyond the idle ones, so launches after the first of a shape add none.
uint64_t mg_host_threads_started(void);

#ifdef __cplusplus
}
#endif

#endif  // MSCCLGO_HOST_LAUNCH_H
