// The reclaimer's thread: one pass per wake-up, wake-ups during a pass folded
// into one more, nothing when not woken, and stop waits for the pass.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "vmm/reclaimer.h"

namespace vgpumem::vmm {
namespace {

using namespace std::chrono_literals;

template <typename Done>
bool eventually(Done&& done) {
  for (int i = 0; i < 5000 && !done(); ++i) std::this_thread::sleep_for(1ms);
  return done();
}

TEST(ReclaimerThread, RunsOnlyWhenWoken) {
  std::atomic<int> passes{0};
  Reclaimer reclaimer([&] { ++passes; });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(passes, 0);
  reclaimer.wake();
  EXPECT_TRUE(eventually([&] { return passes == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(passes, 1) << "one wake-up, one pass";
}

TEST(ReclaimerThread, WakeUpsDuringAPassFoldIntoOneMore) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::atomic<int> passes{0};
  Reclaimer reclaimer([&] {
    std::unique_lock lock(mutex);
    released.wait(lock, [&] { return release; });
    ++passes;
  });
  reclaimer.wake();
  std::this_thread::sleep_for(20ms);  // the first pass is now waiting
  for (int i = 0; i < 10; ++i) reclaimer.wake();
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  EXPECT_TRUE(eventually([&] { return passes == 2; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(passes, 2) << "ten wake-ups during the first pass: one more pass";
}

TEST(ReclaimerThread, StopWaitsForThePassInProgress) {
  std::atomic<bool> started{false}, finished{false};
  Reclaimer reclaimer([&] {
    started = true;
    std::this_thread::sleep_for(50ms);
    finished = true;
  });
  reclaimer.wake();
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  reclaimer.stop();
  EXPECT_TRUE(finished) << "stop returned while the pass was still running";
  reclaimer.wake();  // after stop: nothing runs, nothing hangs
  reclaimer.stop();
}

}  // namespace
}  // namespace vgpumem::vmm
