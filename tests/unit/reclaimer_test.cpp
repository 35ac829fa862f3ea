// The reclaimer's thread: one pass per wake-up, wake-ups during a pass folded
// into one more, nothing when not woken, and stop waits for the pass.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
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

// Signals sent to the process must reach the program's threads, never the
// pager's: the thread starts with every asynchronous signal blocked (it
// inherits its creator's mask, here one with nothing blocked), the
// synchronous ones left deliverable, and the creator's own mask unchanged.
TEST(ReclaimerThread, BlocksAsynchronousSignals) {
  sigset_t none, before, after;
  sigemptyset(&none);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &none, &before), 0);
  std::mutex mutex;
  sigset_t seen;
  sigemptyset(&seen);
  std::atomic<bool> done{false};
  {
    Reclaimer reclaimer([&] {
      std::lock_guard lock(mutex);
      pthread_sigmask(SIG_BLOCK, nullptr, &seen);
      done = true;
    });
    reclaimer.wake();
    ASSERT_TRUE(eventually([&] { return done.load(); }));
  }
  std::lock_guard lock(mutex);
  for (int signal : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM, SIGPROF, SIGHUP, SIGPIPE, SIGQUIT}) {
    EXPECT_EQ(sigismember(&seen, signal), 1) << "signal " << signal << " is not blocked in the reclaimer";
  }
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) {
    EXPECT_EQ(sigismember(&seen, signal), 0) << "synchronous signal " << signal << " is blocked in the reclaimer";
  }
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, &after), 0);
  EXPECT_EQ(sigismember(&after, SIGINT), 0) << "the creating thread's mask changed";
}

// A pass that throws is dropped; the thread lives on for the next wake-up.
TEST(ReclaimerThread, APassThatThrowsIsDropped) {
  std::atomic<int> passes{0};
  Reclaimer reclaimer([&] {
    if (++passes == 1) throw std::bad_alloc();
  });
  reclaimer.wake();
  ASSERT_TRUE(eventually([&] { return passes == 1; }));
  reclaimer.wake();
  EXPECT_TRUE(eventually([&] { return passes == 2; }));
}

}  // namespace
}  // namespace vgpumem::vmm
