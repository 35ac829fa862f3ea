#include "vmm/cap_ledger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace vgpumem::vmm {
namespace {

TEST(CapLedger, ChargesUpToTheCapAndRefusesBeyond) {
  CapLedger ledger([](int) { return std::uint64_t{100}; });
  EXPECT_TRUE(ledger.charge(0, 60));
  EXPECT_TRUE(ledger.charge(0, 40));
  EXPECT_FALSE(ledger.charge(0, 1));
  ledger.refund(0, 40);
  EXPECT_TRUE(ledger.charge(0, 40));
  EXPECT_EQ(ledger.usage(0).counted, 100u);
  EXPECT_EQ(ledger.usage(0).peak, 100u);
}

TEST(CapLedger, RefusesSizesThatWouldOverflow) {
  CapLedger ledger([](int) { return kUncapped - 1; });
  EXPECT_TRUE(ledger.charge(0, 10));
  EXPECT_FALSE(ledger.charge(0, kUncapped - 5));
  EXPECT_FALSE(ledger.charge(0, kUncapped));
}

TEST(CapLedger, DevicesAreIndependentAndResolvedOnce) {
  std::atomic<int> asked{0};
  CapLedger ledger([&](int device) {
    ++asked;
    return device == 1 ? std::uint64_t{10} : kUncapped;
  });
  EXPECT_TRUE(ledger.charge(0, 1ull << 40));
  EXPECT_FALSE(ledger.charge(1, 11));
  EXPECT_TRUE(ledger.charge(1, 10));
  EXPECT_EQ(ledger.cap(1), 10u);
  EXPECT_EQ(asked.load(), 2);
  EXPECT_TRUE(ledger.seen(0));
  EXPECT_FALSE(ledger.seen(2));
}

TEST(CapLedger, RejectsDevicesOutOfRange) {
  CapLedger ledger([](int) { return kUncapped; });
  EXPECT_FALSE(ledger.charge(-1, 1));
  EXPECT_FALSE(ledger.charge(kMaxDevices, 1));
}

TEST(CapLedger, ConcurrentChargesNeverExceedTheCap) {
  constexpr std::uint64_t kCap = 1000;
  CapLedger ledger([](int) { return kCap; });
  std::atomic<std::uint64_t> held{0};
  std::atomic<std::uint64_t> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (ledger.charge(0, 7)) {
          const std::uint64_t now = held.fetch_add(7) + 7;
          std::uint64_t seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          held.fetch_sub(7);
          ledger.refund(0, 7);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), kCap);
  EXPECT_LE(ledger.usage(0).peak, kCap);
  EXPECT_EQ(ledger.usage(0).counted, 0u);
}

}  // namespace
}  // namespace vgpumem::vmm
