// The pager's background thread: the work that would otherwise stall a
// launch, done ahead of it. It waits for offloads to reach the host and
// unmaps their ranges, creates physical chunks while the cap has room, and
// pins a host buffer for the next offload (Pager::reclaim). It sleeps until
// woken, so an idle process costs nothing.
//
// The thread itself knows nothing of paging: it runs `work` once per wake-up
// (wake-ups that arrive while it runs are folded into one more pass). It runs
// with every asynchronous signal blocked, so signals sent to the process go
// to the program's own threads; a pass that throws is dropped, never fatal.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace vgpumem::vmm {

class Reclaimer {
 public:
  explicit Reclaimer(std::function<void()> work);
  ~Reclaimer() { stop(); }
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Asks for one more pass; never blocks on the pass itself.
  void wake();
  // Finishes the pass in progress, if any, and ends the thread.
  void stop();

 private:
  void run();

  std::function<void()> work_;
  std::mutex mutex_;
  std::condition_variable woken_;
  bool pending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vgpumem::vmm
