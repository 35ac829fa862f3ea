// A second thread that the caller hands work to and waits for, as
// PyTorch's training loop hands backward() to its autograd engine's thread
// and blocks until it returns: the two never run at once, and each handoff
// orders what one did before what the other does next.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace vgpumem::test {

class HandoffThread {
 public:
  HandoffThread() : thread_([this] { serve(); }) {}
  ~HandoffThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  HandoffThread(const HandoffThread&) = delete;
  HandoffThread& operator=(const HandoffThread&) = delete;

  // Runs `work` on the thread; returns once it has.
  void run(std::function<void()> work) {
    std::unique_lock lock(mutex_);
    work_ = std::move(work);
    changed_.notify_all();
    changed_.wait(lock, [this] { return !work_; });
  }

 private:
  void serve() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return stopping_ || static_cast<bool>(work_); });
      if (stopping_) return;
      work_();  // (under the lock: the caller waits for it anyway)
      work_ = nullptr;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> work_;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once everything above is there
};

}  // namespace vgpumem::test
