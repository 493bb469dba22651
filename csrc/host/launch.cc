// launch.cc runs a grid on the process's pool of host threads, one per
// core, each running CUDA threads as fibers: every block gets
// a barrier of its size (mg_host_barrier) and a zeroed, 16-byte aligned
// shared-memory buffer; every CUDA thread gets a fiber with its position,
// and all fibers of a block run on the same pool thread, taking turns
// whenever one waits (mg_host_turn, the barrier). A turn is a user-space
// context switch: no thread starts per launch and no wait enters the
// kernel's scheduler. A pool thread whose fibers all wait without any
// becoming ready sleeps on a futex until a store that may release a
// waiter (mg_host_notify) or a short timeout (stores of other processes
// and of the host are not notified); after further rounds without
// progress it sleeps its growing nap out. Fiber stacks are pooled too.
#include "host/launch.h"

#include <sys/mman.h>

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

#if defined(__SANITIZE_THREAD__)
extern "C" void* __tsan_get_current_fiber(void);
extern "C" void* __tsan_create_fiber(unsigned flags);
extern "C" void __tsan_destroy_fiber(void* fiber);
extern "C" void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

// A turn switches contexts. On x86-64 that is mg_switch_stack below: the
// callee-saved registers and the floating-point control words pushed on
// the fiber's stack, a stack pointer swap, no system call. swapcontext
// (elsewhere, and under ThreadSanitizer, whose fiber calls below pair
// with it) also saves and restores the signal mask, a system call per
// switch.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define MG_STACK_SWITCH 1
// mg_switch_stack(save, load) pushes the callee-saved state, stores the
// stack pointer to *save, loads load and pops the state saved there
// (by an earlier mg_switch_stack, or laid out by make_context). A symbol
// local to this file.
asm(R"(
  .text
  .p2align 4
  .type mg_switch_stack, @function
mg_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size mg_switch_stack, .-mg_switch_stack
)");
extern "C" void mg_switch_stack(void** save, void* load);
#else
#include <ucontext.h>
#endif

namespace {

// Context is a suspended fiber's or scheduler's machine state.
struct Context {
#if defined(MG_STACK_SWITCH)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

// switch_to saves the running context to from and resumes to.
inline void switch_to(Context* from, Context* to) {
#if defined(MG_STACK_SWITCH)
  mg_switch_stack(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
}

// make_context prepares c to start entry (which must never return) on the
// stack of size bytes at stack.
void make_context(Context* c, void* stack, size_t size, void (*entry)()) {
#if defined(MG_STACK_SWITCH)
  // From the top (16-byte aligned): entry's return address (none: it
  // never returns), the address mg_switch_stack returns to (entry), six
  // zeroed callee-saved registers and the MXCSR and x87 control words
  // (their defaults). entry starts with the stack pointer 8 past a
  // multiple of 16, as after a call.
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
  uint64_t* w = reinterpret_cast<uint64_t*>(top);
  w[-1] = 0;
  w[-2] = reinterpret_cast<uint64_t>(entry);
  for (int i = 3; i <= 8; i++) w[-i] = 0;
  w[-9] = uint64_t(0x1f80) | uint64_t(0x037f) << 32;
  c->sp = &w[-9];
#else
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
#endif
}

struct HostLaunch;

// Fiber is one CUDA thread of a launch: its context, its pooled stack
// and its position.
struct Fiber {
  Context ctx;
  void* stack = nullptr;
  mg_host_thread pos{};
  HostLaunch* launch = nullptr;
  bool started = false;           // the scheduler's
  std::atomic<bool> done{false};  // set by the fiber as it ends
#if defined(__SANITIZE_THREAD__)
  void* tsan = nullptr;
#endif
};

constexpr size_t kStack = 256 << 10;  // bytes of a fiber's stack, a guard page below
constexpr size_t kGuard = 4096;

struct HostBlock {
  mg_host_barrier bar;
  std::vector<uint64_t> shmem;
};

// HostLaunch is one launch: what its fibers run and how many have not
// returned yet.
struct HostLaunch {
  mg_host_kernel kernel;
  const void* arg;
  std::vector<HostBlock> blocks;
  std::mutex mu;
  std::condition_variable cv;
  size_t left = 0;  // fibers still running (mu)

  void finish() {
    std::lock_guard<std::mutex> lk(mu);
    if (--left == 0) cv.notify_all();
  }
};

// Worker is one pool thread: the fibers given to it (inbox, under mu)
// and those it runs, in turns.
struct Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Fiber*> inbox;  // mu
  std::vector<Fiber*> run;    // the worker's own
  Context sched;
  // The running fiber and whether a turn made progress: atomics, since
  // ThreadSanitizer sees the scheduler and each fiber as threads of
  // their own (switches do not synchronise them).
  std::atomic<Fiber*> cur{nullptr};
  std::atomic<bool> progress{false};
#if defined(__SANITIZE_THREAD__)
  void* tsan = nullptr;
#endif
};

// Pool is the process's pool threads and free fiber stacks. It is never
// destroyed (its threads outlive main's return, asleep), so that no
// launch races with its destructor.
struct Pool {
  std::mutex mu;
  std::vector<Worker*> workers;  // made once (mu)
  std::vector<void*> stacks;     // free fiber stacks (mu)
  unsigned next = 0;             // round robin of blocks over workers (mu)
  std::atomic<uint64_t> started{0};
  // wake is bumped by every notify; sleepers counts pool threads asleep
  // on it.
  uint32_t wake = 0;
  uint32_t sleepers = 0;
};

Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

// The pool thread's worker and the fiber it runs (thread-local: fibers
// never move between pool threads). self is an atomic so that the
// scheduler's switches are not data races to ThreadSanitizer, which sees
// each fiber as a thread of its own.
thread_local Worker* tl_worker = nullptr;
thread_local std::atomic<mg_host_thread*> tl_self{nullptr};
thread_local mg_host_thread tl_host{};  // outside any fiber

void to_scheduler(Worker* w, Fiber* f, bool sync) {
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(w->tsan, sync ? 0 : 1);
#else
  (void)sync;
#endif
  switch_to(&f->ctx, &w->sched);
}

void fiber_main() {
  Worker* w = tl_worker;
  Fiber* f = w->cur.load(std::memory_order_relaxed);
  f->launch->kernel(f->launch->arg);
  f->done.store(true, std::memory_order_relaxed);
  to_scheduler(w, f, true);
}

// resume runs fiber f (starting it on its first turn) until it yields
// or ends. Apart from work, so that work's locals live across no
// context switch.
__attribute__((noinline)) void resume(Worker* w, Fiber* f) {
  w->cur.store(f, std::memory_order_relaxed);
  tl_self.store(&f->pos, std::memory_order_relaxed);
  bool sync = !f->started;
  if (!f->started) {
    f->started = true;
    w->progress.store(true, std::memory_order_relaxed);
    make_context(&f->ctx, static_cast<char*>(f->stack) + kGuard, kStack - kGuard, fiber_main);
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(f->tsan, sync ? 0 : 1);
#else
  (void)sync;
#endif
  switch_to(&w->sched, &f->ctx);
  tl_self.store(&tl_host, std::memory_order_relaxed);
  w->cur.store(nullptr, std::memory_order_relaxed);
}

void sleep_until_notified(Pool& p, uint32_t g, unsigned us) {
  __atomic_fetch_add(&p.sleepers, 1, __ATOMIC_SEQ_CST);
  timespec ts{0, long(us) * 1000};
#if defined(__linux__)
  syscall(SYS_futex, &p.wake, FUTEX_WAIT_PRIVATE, g, &ts, nullptr, 0);
#else
  (void)g;
  nanosleep(&ts, nullptr);
#endif
  __atomic_fetch_sub(&p.sleepers, 1, __ATOMIC_SEQ_CST);
}

void work(Worker* w) {
  Pool& p = pool();
  tl_worker = w;
#if defined(__SANITIZE_THREAD__)
  w->tsan = __tsan_get_current_fiber();
#endif
  unsigned nap = 20;  // microseconds of the next sleep without progress
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(w->mu);
      if (w->run.empty()) w->cv.wait(lk, [w] { return !w->inbox.empty(); });
      w->run.insert(w->run.end(), w->inbox.begin(), w->inbox.end());
      w->inbox.clear();
    }
    uint32_t g = __atomic_load_n(&p.wake, __ATOMIC_SEQ_CST);
    w->progress.store(false, std::memory_order_relaxed);
    size_t kept = 0;
    for (size_t i = 0; i < w->run.size(); i++) {
      Fiber* f = w->run[i];
      resume(w, f);
      if (!f->done.load(std::memory_order_relaxed)) {
        w->run[kept++] = f;
        continue;
      }
      w->progress.store(true, std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
      __tsan_destroy_fiber(f->tsan);
#endif
      HostLaunch* l = f->launch;
      {
        std::lock_guard<std::mutex> lk(p.mu);
        p.stacks.push_back(f->stack);
      }
      delete f;
      // The stack is free before the launch ends: the caller's next
      // launch finds every stack of this one in the pool.
      l->finish();
    }
    w->run.resize(kept);
    if (w->progress.load(std::memory_order_relaxed)) {
      nap = 20;
    } else if (!w->run.empty()) {
      if (nap > 20) {
        // Rounds in a row without progress: sleep the nap out, deaf to
        // notifies. Packet stores notify all the time, and a pool thread
        // woken by each ran a whole round of turns for nothing, taking
        // the core from the pool thread that stores (on one core, the
        // 16-rank two-node plan took 4.4x the CPU backend's time, 2.9x
        // with this).
        timespec ts{0, long(nap) * 1000};
        nanosleep(&ts, nullptr);
      } else {
        sleep_until_notified(p, g, nap);
      }
      nap = std::min(nap * 2, 1000u);
    }
  }
}

// start_workers makes the pool threads once: one per core, at least two.
bool start_workers(Pool& p) {
  if (!p.workers.empty()) return true;
  unsigned n = std::max(2u, std::thread::hardware_concurrency());
  try {
    for (unsigned i = 0; i < n; i++) {
      std::unique_ptr<Worker> w(new Worker);
      std::thread(work, w.get()).detach();
      p.workers.push_back(w.release());
      p.started.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (const std::exception&) {
    return !p.workers.empty();
  }
  return true;
}

// take_stacks returns n free fiber stacks, mapping the missing ones
// (p.mu held); false if the memory ran out (what it took goes back).
bool take_stacks(Pool& p, size_t n, std::vector<void*>& out) {
  size_t k = std::min(n, p.stacks.size());
  out.assign(p.stacks.end() - long(k), p.stacks.end());
  p.stacks.resize(p.stacks.size() - k);
  while (out.size() < n) {
    void* s = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED) {
      p.stacks.insert(p.stacks.end(), out.begin(), out.end());
      return false;
    }
    mprotect(s, kGuard, PROT_NONE);
    out.push_back(s);
  }
  return true;
}

}  // namespace

// Inline (the translation unit that includes this file holds the kernel):
// every memory primitive of the kernel asks for it.
inline mg_host_thread& mg_host_self() {
  mg_host_thread* s = tl_self.load(std::memory_order_relaxed);
  return s != nullptr ? *s : tl_host;
}

void mg_host_yield() {
  Worker* w = tl_worker;
  Fiber* f = w != nullptr ? w->cur.load(std::memory_order_relaxed) : nullptr;
  if (f == nullptr) {
    std::this_thread::yield();  // not on a fiber
    return;
  }
  to_scheduler(w, f, false);
}

void mg_host_progress() {
  if (tl_worker != nullptr) tl_worker->progress.store(true, std::memory_order_relaxed);
}

void mg_host_notify() {
  Pool& p = pool();
  // With no pool thread asleep nothing is bumped: the shared word would
  // bounce between the cores at every packet store. A pool thread that
  // goes to sleep just after this may then sleep its first nap (20 us)
  // out: every sleep is bounded.
  if (__atomic_load_n(&p.sleepers, __ATOMIC_RELAXED) == 0) return;
  __atomic_fetch_add(&p.wake, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p.sleepers, __ATOMIC_SEQ_CST) != 0) {
#if defined(__linux__)
    syscall(SYS_futex, &p.wake, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#endif
  }
}

extern "C" void* mg_host_launch_async(mg_host_kernel kernel, unsigned grid, unsigned block, unsigned shmem,
                                      const void* arg, mg_host_probe* probe) {
  if (block == 0) return nullptr;
  std::unique_ptr<HostLaunch> l(new (std::nothrow) HostLaunch);
  if (l == nullptr) return nullptr;
  Pool& p = pool();
  size_t n = size_t(grid) * block;
  std::vector<void*> stacks;
  unsigned first = 0;
  try {
    l->kernel = kernel;
    l->arg = arg;
    l->blocks.resize(grid);
    for (auto& b : l->blocks) {
      b.bar.init(block);
      b.shmem.assign((shmem + 7) / 8 + 2, 0);
    }
    std::lock_guard<std::mutex> lk(p.mu);
    if (!start_workers(p) || !take_stacks(p, n, stacks)) return nullptr;
    first = p.next;
    p.next += grid;
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> lk(p.mu);
    p.stacks.insert(p.stacks.end(), stacks.begin(), stacks.end());
    return nullptr;
  }
  l->left = n;
  size_t i = 0;
  std::vector<std::vector<Fiber*>> per(p.workers.size());
  for (unsigned b = 0; b < grid; b++) {
    HostBlock* hb = &l->blocks[b];
    auto& to = per[(first + b) % per.size()];
    for (unsigned t = 0; t < block; t++) {
      Fiber* f = new Fiber;
      f->stack = stacks[i++];
      f->launch = l.get();
      f->pos = mg_host_thread{mg_dim3{t, 0, 0},
                              mg_dim3{b, 0, 0},
                              mg_dim3{block, 1, 1},
                              mg_dim3{grid, 1, 1},
                              &hb->bar,
                              reinterpret_cast<unsigned char*>(hb->shmem.data()),
                              probe};
#if defined(__SANITIZE_THREAD__)
      f->tsan = __tsan_create_fiber(0);
#endif
      to.push_back(f);
    }
  }
  for (size_t k = 0; k < per.size(); k++) {
    if (per[k].empty()) continue;
    Worker* w = p.workers[k];
    std::lock_guard<std::mutex> lk(w->mu);
    w->inbox.insert(w->inbox.end(), per[k].begin(), per[k].end());
    w->cv.notify_one();
  }
  mg_host_notify();  // a worker asleep with fibers of its own
  return l.release();
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
