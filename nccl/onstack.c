/*
 * onstack.c: the caller's signal handlers run on the alternate signal
 * stack. A C handler installed without SA_ONSTACK runs on whatever stack
 * its thread is on, and a thread of the caller inside a call of this
 * library is on a goroutine's stack, a few kilobytes that the signal's
 * frame overruns: the Go runtime's memory is corrupted and the process
 * dies later, anywhere (issue 44's sweep: SIGUSR2 every millisecond to
 * threads making steady calls, "fatal error: traceback did not unwind
 * completely" within a second). The Go runtime adds SA_ONSTACK to the
 * handlers installed before it starts (the library's load); every init
 * of a communicator does the same for the handlers installed since. A
 * handler installed after the last init must use SA_ONSTACK itself, as Go
 * requires of C code that shares a process with it.
 */
#define _GNU_SOURCE
#include <signal.h>

int mscclgo_handlers_onstack(void);

int mscclgo_handlers_onstack(void) {
  int moved = 0;
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction sa;
    if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0) {
      continue;
    }
    if ((sa.sa_flags & SA_SIGINFO) == 0 && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)) {
      continue;
    }
    if ((sa.sa_flags & SA_ONSTACK) != 0) {
      continue;
    }
    sa.sa_flags |= SA_ONSTACK;
    if (sigaction(sig, &sa, NULL) == 0) {
      moved++;
    }
  }
  return moved;
}
