/*
 * sigmask.c: the library keeps the program's signal mask. The Go runtime
 * starts when the library is loaded, on a thread it creates then, and
 * every thread it starts later takes that first thread's mask, not the
 * mask of the program's threads: a program that blocks SIGTERM in main
 * (after the load) and waits for it with sigwait was killed by it, the
 * kernel handing the signal to a runtime thread that did not block it.
 *
 * So the loading thread blocks every asynchronous signal across the
 * runtime's start: the constructor of priority 101 runs before the Go
 * runtime's entry in .init_array, the one of default priority after it
 * (the linker places the objects of cgo's C files after Go's), and
 * restores the loading thread's mask. The runtime's threads then block
 * every signal but those the runtime needs unblocked (the synchronous
 * ones and its preemption signal, SIGURG): a signal sent to the process
 * goes to a thread of the program that does not block it, or waits for
 * the program's sigwait. The threads this library starts itself
 * (nonblocking inits, a group's inits) are started from the caller's
 * thread and take its mask.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

static sigset_t loader_mask;
static int loader_masked;

__attribute__((constructor(101))) static void mscclgo_mask_before_runtime(void) {
  sigset_t all;
  sigfillset(&all);
  /* A fault while loading stays a fault the kernel delivers. */
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGTRAP);
  loader_masked = pthread_sigmask(SIG_BLOCK, &all, &loader_mask) == 0;
}

__attribute__((constructor)) static void mscclgo_mask_after_runtime(void) {
  if (loader_masked) {
    pthread_sigmask(SIG_SETMASK, &loader_mask, NULL);
    loader_masked = 0;
  }
}
