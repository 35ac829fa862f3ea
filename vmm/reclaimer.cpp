#include "vmm/reclaimer.h"

namespace vgpumem::vmm {

Reclaimer::Reclaimer(std::function<void()> work) : work_(std::move(work)) { thread_ = std::thread([this] { run(); }); }

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
  std::unique_lock lock(mutex_);
  for (;;) {
    woken_.wait(lock, [this] { return pending_ || stopping_; });
    if (stopping_) return;
    pending_ = false;
    lock.unlock();
    work_();
    lock.lock();
  }
}

}  // namespace vgpumem::vmm
