// LockCalendar (vmm/lock_calendar.h): a wait for the pager's lock charged on
// a simulated driver's per-thread clocks.
#include <gtest/gtest.h>

#include "common/thread_safety.h"
#include "vmm/lock_calendar.h"

namespace vgpumem::vmm {
namespace {

// One simulated clock per "thread"; the test switches which one is current.
unsigned long long g_clocks[2] = {0, 0};
int g_current = 0;
unsigned long long now() { return g_clocks[g_current]; }
void handoff(unsigned long long t, const char*) {
  if (t > g_clocks[g_current]) g_clocks[g_current] = t;
}

class LockCalendarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_clocks[0] = g_clocks[1] = 0;
    g_current = 0;
    mutex_.observe(&calendar_);
  }
  // Thread `who` holds the lock from its clock for `ns` of simulated work
  // (its driver calls, which advance its clock).
  void hold(int who, unsigned long long ns) {
    g_current = who;
    MutexLock lock(mutex_);
    g_clocks[who] += ns;
  }
  LockCalendar calendar_{now, handoff};
  Mutex mutex_;
};

TEST_F(LockCalendarTest, AThreadTakingTheLockInsideAnothersHoldWaitsForItsEnd) {
  g_clocks[0] = 1'000;
  hold(0, 80'000);  // the mover maps: held [1 us, 81 us)
  g_clocks[1] = 30'000;
  hold(1, 5'000);  // the launch thread, at 30 us
  EXPECT_EQ(g_clocks[1], 81'000u + 5'000u) << "waited until 81 us, then its own 5 us";
  EXPECT_EQ(calendar_.waited_ns(), 51'000u);
}

TEST_F(LockCalendarTest, AThreadBeforeOrAfterEveryHoldWaitsForNothing) {
  g_clocks[0] = 100'000;
  hold(0, 50'000);  // [100 us, 150 us)
  g_clocks[1] = 10'000;
  hold(1, 1'000);
  EXPECT_EQ(g_clocks[1], 11'000u) << "before the hold: the order taken in real time is not charged";
  g_clocks[1] = 150'000;
  hold(1, 1'000);
  EXPECT_EQ(g_clocks[1], 151'000u) << "at its end";
  EXPECT_EQ(calendar_.waited_ns(), 0u);
}

TEST_F(LockCalendarTest, HoldsThatFollowOneAnotherAreWaitedForInTurn) {
  g_clocks[0] = 0;
  hold(0, 10'000);  // [0, 10)
  hold(0, 10'000);  // [10, 20)
  g_clocks[1] = 5'000;
  hold(1, 0);
  EXPECT_EQ(g_clocks[1], 20'000u) << "past both";
}

TEST_F(LockCalendarTest, AHoldOfNoSimulatedTimeDelaysNobody) {
  g_clocks[0] = 40'000;
  hold(0, 0);
  g_clocks[1] = 40'000;
  hold(1, 0);
  EXPECT_EQ(g_clocks[1], 40'000u);
}

}  // namespace
}  // namespace vgpumem::vmm
