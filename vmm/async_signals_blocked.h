// The pager's own threads take no asynchronous signal: the program's
// handlers for SIGINT, SIGTERM, SIGCHLD or a profiler's SIGPROF expect one
// of the program's threads, and a driver call made for the pager must not
// be interrupted. Constructed around the creation of a thread (a new thread
// inherits its creator's mask); the synchronous signals (a fault in the
// thread itself) stay deliverable.
#pragma once

#include <pthread.h>

#include <csignal>

// Note [Asynchronous signals and the shim's threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The reclaimer thread is created with every asynchronous
// signal blocked (all but `SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`,
// `SIGABRT`, `SIGSYS`), so a signal sent to the process — `SIGINT`,
// `SIGTERM`, `SIGCHLD`, a profiler's `SIGPROF` — reaches one of the program's
// threads, never the shim's.

namespace vgpumem::vmm {

class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked() {
    sigset_t blocked;
    sigfillset(&blocked);
    for (int synchronous : kSynchronousSignals) sigdelset(&blocked, synchronous);
    pthread_sigmask(SIG_SETMASK, &blocked, &saved_);
  }
  ~AsyncSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  static constexpr int kSynchronousSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
  sigset_t saved_;
};

}  // namespace vgpumem::vmm
