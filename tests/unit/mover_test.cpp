// The mover's thread (vmm/mover.h): every move posted is made once, on the
// mover's thread, in the order each poster posted; a full ring refuses and
// says so; drain waits for what was posted; stop drops what is queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "vmm/mover.h"

namespace vgpumem::vmm {
namespace {

using namespace std::chrono_literals;

Unit* fake_unit(std::uintptr_t n) { return reinterpret_cast<Unit*>(n); }  // never dereferenced

TEST(MoverThread, MakesEveryMoveOnItsOwnThreadInPostingOrder) {
  std::vector<std::uintptr_t> made;  // the mover's thread's alone until drain returns
  std::thread::id maker;
  Mover mover([&](const Mover::Move& move) {
    made.push_back(reinterpret_cast<std::uintptr_t>(move.unit));
    maker = std::this_thread::get_id();
  });
  for (std::uintptr_t i = 1; i <= 100; ++i) {
    Mover::Move move;
    move.unit = fake_unit(i);
    move.offload = i % 2 == 0;
    ASSERT_TRUE(mover.post(move));
  }
  mover.drain();
  ASSERT_EQ(made.size(), 100u);
  for (std::uintptr_t i = 0; i < 100; ++i) EXPECT_EQ(made[i], i + 1);
  EXPECT_NE(maker, std::this_thread::get_id());
  const Mover::Counts counts = mover.counts();
  EXPECT_EQ(counts.posted, 100u);
  EXPECT_EQ(counts.made, 100u);
  EXPECT_EQ(counts.ring_full, 0u);
}

// Two program threads fire triggers at once (PyTorch's forward and autograd
// threads): nothing lost, nothing made twice, each one's moves in its order.
TEST(MoverThread, TwoPostingThreadsConcurrentlyLoseNothing) {
  constexpr std::uintptr_t kEach = 20000;
  std::vector<std::uintptr_t> made;
  Mover mover([&](const Mover::Move& move) { made.push_back(reinterpret_cast<std::uintptr_t>(move.unit)); }, 64);
  std::atomic<std::uint64_t> refused{0};
  auto poster = [&](std::uintptr_t tag) {
    for (std::uintptr_t i = 1; i <= kEach; ++i) {
      Mover::Move move;
      move.unit = fake_unit(tag << 32 | i);
      while (!mover.post(move)) {  // a small ring: refusals happen, and are retried here
        refused.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::yield();
      }
    }
  };
  std::thread a(poster, 1), b(poster, 2);
  a.join();
  b.join();
  mover.drain();
  ASSERT_EQ(made.size(), 2 * kEach);
  std::uintptr_t last[3] = {0, 0, 0};
  for (std::uintptr_t value : made) {
    const std::uintptr_t tag = value >> 32, i = value & 0xFFFF'FFFF;
    ASSERT_TRUE(tag == 1 || tag == 2);
    ASSERT_EQ(i, last[tag] + 1) << "poster " << tag << "'s moves out of order or repeated";
    last[tag] = i;
  }
  EXPECT_EQ(mover.counts().ring_full, refused.load());
}

TEST(MoverThread, AFullRingRefusesAndCountsIt) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::atomic<int> started{0};
  Mover mover(
      [&](const Mover::Move&) {
        started.fetch_add(1);
        std::unique_lock lock(mutex);
        released.wait(lock, [&] { return release; });
      },
      4);
  Mover::Move move;
  ASSERT_TRUE(mover.post(move));  // taken, and held in `make`
  for (int i = 0; i < 5000 && started.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(started.load(), 1);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(mover.post(move)) << i;
  EXPECT_FALSE(mover.post(move)) << "four queued behind the one in hand fill a ring of four";
  EXPECT_EQ(mover.counts().ring_full, 1u);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  mover.drain();
  EXPECT_EQ(mover.counts().made, 5u);
}

TEST(MoverThread, StopDropsWhatIsQueuedAndRefusesFromThen) {
  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::atomic<int> made{0}, started{0}, dropped{0};
  auto mover = std::make_unique<Mover>(
      [&](const Mover::Move&) {
        started.fetch_add(1);
        std::unique_lock lock(mutex);
        released.wait(lock, [&] { return release; });
        made.fetch_add(1);
      },
      4096, [&](const Mover::Move&) { dropped.fetch_add(1); });
  Mover::Move move;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(mover->post(move));
  for (int i = 0; i < 5000 && started.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(started.load(), 1) << "the first move in hand";
  std::thread stopper([&] { mover->stop(); });
  std::this_thread::sleep_for(20ms);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  stopper.join();
  EXPECT_EQ(made.load(), 1) << "the move in hand is finished; the nine queued are dropped";
  EXPECT_EQ(dropped.load(), 9) << "each dropped one told (a launch may wait for it)";
  EXPECT_FALSE(mover->post(move));
}

TEST(MoverThread, AThrowingMoveIsGivenUpAndTheThreadGoesOn) {
  std::atomic<int> made{0};
  Mover mover([&](const Mover::Move& move) {
    if (move.offload) throw std::bad_alloc();
    made.fetch_add(1);
  });
  Mover::Move move;
  move.offload = true;
  ASSERT_TRUE(mover.post(move));
  move.offload = false;
  ASSERT_TRUE(mover.post(move));
  mover.drain();
  EXPECT_EQ(made.load(), 1);
  EXPECT_EQ(mover.counts().made, 2u);
}

}  // namespace
}  // namespace vgpumem::vmm
