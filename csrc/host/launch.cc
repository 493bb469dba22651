// launch.cc runs a grid on a process-wide pool of host threads: every
// block gets a barrier of its size (mg_host_barrier) and a zeroed,
// 16-byte aligned shared-memory buffer; every CUDA thread of the grid
// gets a pooled host thread of its own, its position in thread-local
// storage, for the whole launch (a block's threads meet at barriers, so
// all of them run at once). A launch takes idle threads from the pool and
// starts only the ones missing, which go back to the pool when their
// kernel returns: launches of the same shape after the first start none.
// Idle threads sleep on a condition variable, costing nothing.
#include "host/launch.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
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
  mg_host_barrier bar;
  std::vector<uint64_t> shmem;
};

// HostLaunch is one launch: what its threads run and how many have not
// returned yet.
struct HostLaunch {
  mg_host_kernel kernel;
  const void* arg;
  std::vector<HostBlock> blocks;
  std::mutex mu;
  std::condition_variable cv;
  size_t left = 0;  // threads still running (mu)

  void finish() {
    std::lock_guard<std::mutex> lk(mu);
    if (--left == 0) cv.notify_all();
  }
};

// Worker is one pooled host thread. It sleeps until a launch gives it a
// task (launch and pos, under mu), runs the kernel, goes back to the
// pool's idle list and then tells the launch it finished.
struct Worker {
  std::mutex mu;
  std::condition_variable cv;
  HostLaunch* launch = nullptr;  // the task, nullptr while idle (mu)
  mg_host_thread pos{};          // its CUDA position (mu)
};

// Pool is the process's host threads: the idle ones and how many were
// ever started. It is never destroyed (its threads outlive main's
// return, parked), so that no launch races with its destructor.
struct Pool {
  std::mutex mu;
  std::vector<Worker*> idle;  // mu
  std::atomic<uint64_t> started{0};
};

Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

void work(Worker* w) {
  Pool& p = pool();
  for (;;) {
    HostLaunch* l;
    {
      std::unique_lock<std::mutex> lk(w->mu);
      w->cv.wait(lk, [w] { return w->launch != nullptr; });
      l = w->launch;
      w->launch = nullptr;
      mg_host_self() = w->pos;
    }
    l->kernel(l->arg);
    {
      std::lock_guard<std::mutex> lk(p.mu);
      p.idle.push_back(w);
    }
    // Back in the pool before the launch ends: the caller's next launch
    // finds every thread of this one idle.
    l->finish();
  }
}

// take returns n idle workers, starting the missing ones; on failure it
// gives back what it took and returns false.
bool take(size_t n, std::vector<Worker*>& out) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lk(p.mu);
    size_t k = std::min(n, p.idle.size());
    out.assign(p.idle.end() - long(k), p.idle.end());
    p.idle.resize(p.idle.size() - k);
  }
  try {
    out.reserve(n);
    while (out.size() < n) {
      std::unique_ptr<Worker> w(new Worker);
      std::thread(work, w.get()).detach();
      out.push_back(w.release());
      p.started.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> lk(p.mu);
    p.idle.insert(p.idle.end(), out.begin(), out.end());
    out.clear();
    return false;
  }
  return true;
}

}  // namespace

extern "C" void* mg_host_launch_async(mg_host_kernel kernel, unsigned grid, unsigned block, unsigned shmem,
                                      const void* arg, mg_host_probe* probe) {
  if (block == 0) return nullptr;
  HostLaunch* l = new (std::nothrow) HostLaunch;
  if (l == nullptr) return nullptr;
  std::vector<Worker*> ws;
  try {
    l->kernel = kernel;
    l->arg = arg;
    l->blocks.resize(grid);
    for (auto& b : l->blocks) {
      b.bar.init(block);
      b.shmem.assign((shmem + 7) / 8 + 2, 0);
    }
  } catch (const std::exception&) {
    delete l;
    return nullptr;
  }
  size_t n = size_t(grid) * block;
  if (!take(n, ws)) {
    delete l;
    return nullptr;
  }
  l->left = n;
  size_t i = 0;
  for (unsigned b = 0; b < grid; b++) {
    HostBlock* hb = &l->blocks[b];
    for (unsigned t = 0; t < block; t++) {
      Worker* w = ws[i++];
      std::lock_guard<std::mutex> lk(w->mu);
      w->pos = mg_host_thread{mg_dim3{t, 0, 0},
                              mg_dim3{b, 0, 0},
                              mg_dim3{block, 1, 1},
                              mg_dim3{grid, 1, 1},
                              &hb->bar,
                              reinterpret_cast<unsigned char*>(hb->shmem.data()),
                              probe};
      w->launch = l;
      w->cv.notify_one();
    }
  }
  return l;
}

extern "C" void mg_host_wait(void* handle) {
  HostLaunch* l = static_cast<HostLaunch*>(handle);
  if (l == nullptr) return;
  {
    std::unique_lock<std::mutex> lk(l->mu);
    l->cv.wait(lk, [l] { return l->left == 0; });
  }
  delete l;
}

extern "C" uint64_t mg_host_threads_started(void) { return pool().started.load(std::memory_order_relaxed); }
