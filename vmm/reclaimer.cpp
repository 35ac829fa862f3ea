#include "vmm/reclaimer.h"

#include "common/thread_name.h"
#include "vmm/async_signals_blocked.h"
#include "vmm/host_path_stats.h"

namespace vgpumem::vmm {

// The thread is created with asynchronous signals blocked (a new thread
// inherits its creator's mask), so it never takes a signal meant for the
// program -- SIGINT, SIGTERM, SIGCHLD, a profiler's SIGPROF -- whose handler
// expects one of the program's own threads, and it is never interrupted
// inside a driver call it makes for the pager.
Reclaimer::Reclaimer(std::function<void()> work) : work_(std::move(work)) {
  AsyncSignalsBlocked blocked;
  thread_ = std::thread([this] { run(); });
}

void Reclaimer::wake() {
  {
    std::lock_guard lock(mutex_);
    if (pending_) return;
    pending_ = true;
  }
  woken_.notify_one();
}

void Reclaimer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  woken_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Reclaimer::run() {
  mark_pager_thread();
  name_this_thread("vgpumem-reclaim");
  std::unique_lock lock(mutex_);
  for (;;) {
    woken_.wait(lock, [this] { return pending_ || stopping_; });
    if (stopping_) return;
    pending_ = false;
    lock.unlock();
    try {
      work_();
    } catch (...) {
      // Out of memory, say: this pass is given up, and the next wake-up
      // tries again. An exception must not end the process from here.
    }
    lock.lock();
  }
}

}  // namespace vgpumem::vmm
