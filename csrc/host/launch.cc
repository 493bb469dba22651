// launch.cc runs a grid on host threads: every block gets a std::barrier
// of its size and a zeroed, 16-byte aligned shared-memory buffer; every
// CUDA thread is a std::thread with its position in thread-local storage.
#include "host/launch.h"

#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "host/cuda_host.h"

mg_host_thread& mg_host_self() {
  thread_local mg_host_thread self;
  return self;
}

namespace {

struct HostBlock {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<uint64_t> shmem;
};

struct HostLaunch {
  std::vector<HostBlock> blocks;
  std::vector<std::thread> threads;
  std::thread coordinator;
};

void run_grid(HostLaunch* l, mg_host_kernel kernel, unsigned grid, unsigned block, const void* arg,
              mg_host_probe* probe) {
  for (unsigned b = 0; b < grid; b++) {
    for (unsigned t = 0; t < block; t++) {
      HostBlock* hb = &l->blocks[b];
      l->threads.emplace_back([=] {
        mg_host_thread& self = mg_host_self();
        self.thread_idx = mg_dim3{t, 0, 0};
        self.block_idx = mg_dim3{b, 0, 0};
        self.block_dim = mg_dim3{block, 1, 1};
        self.grid_dim = mg_dim3{grid, 1, 1};
        self.bar = hb->bar.get();
        self.shmem = reinterpret_cast<unsigned char*>(hb->shmem.data());
        self.probe = probe;
        kernel(arg);
      });
    }
  }
  for (auto& t : l->threads) t.join();
}

}  // namespace

extern "C" void* mg_host_launch_async(mg_host_kernel kernel, unsigned grid, unsigned block, unsigned shmem,
                                      const void* arg, mg_host_probe* probe) {
  if (block == 0) return nullptr;
  HostLaunch* l = new (std::nothrow) HostLaunch;
  if (l == nullptr) return nullptr;
  try {
    l->blocks.resize(grid);
    for (auto& b : l->blocks) {
      b.bar = std::make_unique<std::barrier<>>(block);
      b.shmem.assign((shmem + 7) / 8 + 2, 0);
    }
    l->threads.reserve(size_t(grid) * block);
    l->coordinator = std::thread(run_grid, l, kernel, grid, block, arg, probe);
  } catch (const std::exception&) {
    delete l;
    return nullptr;
  }
  return l;
}

extern "C" void mg_host_wait(void* handle) {
  HostLaunch* l = static_cast<HostLaunch*>(handle);
  if (l == nullptr) return;
  l->coordinator.join();
  delete l;
}
