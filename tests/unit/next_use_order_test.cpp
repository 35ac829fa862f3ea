// The learned step's victim order (scheduler/next_use_order.h): the unit
// needed furthest ahead goes first, round the step where its next use is in
// the next one; units the step does not know go first when idle a step and
// last when used lately; without a position on the table in force, least
// recently used.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "scheduler/next_use_order.h"
#include "scheduler/trigger_table.h"
#include "vmm/unit.h"

namespace vgpumem::scheduler {
namespace {

// A step of six operations over five units; units_[5] is not in it.
//   op 0: u0 u1   op 1: u2   op 2: u0 u3   op 3: u4   op 4: u1   op 5: u2
class NextUseOrderTest : public ::testing::Test {
 protected:
  NextUseOrderTest() : units_(6) {
    const std::vector<std::vector<std::uint32_t>> ops{{0, 1}, {2}, {0, 3}, {4}, {1}, {2}};
    IterationProfile step;
    step.units.resize(5);
    for (std::size_t u = 0; u < step.units.size(); ++u) {
      step.units[u].unit = &units_[u];
      step.units[u].bytes = 2 << 20;
    }
    for (std::size_t p = 0; p < ops.size(); ++p) {
      ProfileOp& op = step.ops.emplace_back();
      op.identity = 100 + p;
      op.first_use = static_cast<std::uint32_t>(step.uses.size());
      op.use_count = static_cast<std::uint32_t>(ops[p].size());
      for (const std::uint32_t u : ops[p]) {
        step.uses.push_back(u);
        step.units[u].uses.push_back(static_cast<std::uint32_t>(p));
      }
    }
    table_ = make_trigger_table(step, Plan{});
    table_.generation = 1;
    published_.store(&table_);
  }

  std::uint64_t rank(std::size_t unit, std::uint64_t last_use = 7) const { return order_.rank(units_[unit], last_use); }

  std::vector<vmm::Unit> units_;
  TriggerTable table_;
  std::atomic<const TriggerTable*> published_{nullptr};
  NextUseOrder order_{published_};
};

TEST_F(NextUseOrderTest, TheTableKnowsEachUnitsUsesInTheStep) {
  EXPECT_EQ(std::vector<std::uint32_t>(table_.uses_of(&units_[0]).begin(), table_.uses_of(&units_[0]).end()),
            (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(std::vector<std::uint32_t>(table_.uses_of(&units_[2]).begin(), table_.uses_of(&units_[2]).end()),
            (std::vector<std::uint32_t>{1, 5}));
  EXPECT_TRUE(table_.uses_of(&units_[5]).empty());
}

TEST_F(NextUseOrderTest, TheUnitNeededFurthestAheadGoesFirst) {
  order_.at(table_, 1, 1000);  // op 1 issued: next uses u0 at 2, u3 at 2, u4 at 3, u1 at 4, u2 at 5
  EXPECT_LT(rank(2), rank(1));
  EXPECT_LT(rank(1), rank(4));
  EXPECT_LT(rank(4), rank(0));
  EXPECT_EQ(rank(0), rank(3));
  // The last use does not enter into it: only when each is needed next.
  EXPECT_LT(rank(2, 900), rank(0, 1));
}

TEST_F(NextUseOrderTest, ANextUseInTheNextStepCountsRoundTheStep) {
  order_.at(table_, 4, 1000);  // op 4 issued: u2 at 5; then round: u0 and u1 at 0, u3 at 2, u4 at 3
  EXPECT_LT(rank(4), rank(3));
  EXPECT_LT(rank(3), rank(0));
  EXPECT_EQ(rank(0), rank(1));
  EXPECT_LT(rank(1), rank(2));
}

TEST_F(NextUseOrderTest, AUnitTheStepDoesNotKnowGoesFirstWhenIdleAStepAndLastWhenUsedLately) {
  order_.at(table_, 0, 1000);
  order_.at(table_, 0, 2000);  // a step began at 1000: anything last used before it is idle a step
  order_.at(table_, 3, 2300);
  std::uint64_t least_known = ~std::uint64_t{0}, most_known = 0;
  for (std::size_t u = 0; u < 5; ++u) {
    least_known = std::min(least_known, rank(u, 2200));
    most_known = std::max(most_known, rank(u, 2200));
  }
  EXPECT_LT(rank(5, 999), least_known) << "idle since before the last step: nothing in the step wants it";
  EXPECT_GT(rank(5, 1500), most_known) << "used since the last step began: it may be needed next";
  EXPECT_LT(rank(5, 500), rank(5, 999)) << "among the idle, least recently used first";
  EXPECT_LT(rank(5, 1500), rank(5, 2100)) << "among the recent, least recently used first";
  EXPECT_LE(rank(5, ~std::uint64_t{0}), vmm::VictimPolicy::kMaxRank);
}

TEST_F(NextUseOrderTest, WithoutAPositionOnTheTableInForceItIsLeastRecentlyUsed) {
  EXPECT_EQ(rank(2, 7), 7u) << "no position yet";
  EXPECT_FALSE(order_.informed());
  order_.at(table_, 1, 1000);
  EXPECT_NE(rank(2, 7), 7u);
  EXPECT_TRUE(order_.informed());
  order_.lost();  // the stream strayed from the step
  EXPECT_EQ(rank(2, 7), 7u);
  EXPECT_FALSE(order_.informed());
  EXPECT_EQ(rank(5, 7), 7u);
  order_.at(table_, 1, 1100);
  TriggerTable next = table_;
  next.generation = 2;
  published_.store(&next);  // a new plan: the position was on the old one
  EXPECT_EQ(rank(2, 7), 7u);
  order_.at(next, 1, 1200);
  EXPECT_NE(rank(2, 7), 7u);
  published_.store(nullptr);
  EXPECT_EQ(rank(2, 7), 7u);
}

// The launch path moves the position while a pager thread ranks: every rank
// is one of the orders' (the ThreadSanitizer build checks the rest).
TEST_F(NextUseOrderTest, ConcurrentFollowingAndRankingAgree) {
  std::atomic<bool> done{false};
  std::thread follower([&] {
    for (std::uint64_t i = 0; i < 20000; ++i) {
      if (i % 97 == 0) order_.lost();
      order_.at(table_, i % table_.period(), 1000 + i);
    }
    done.store(true);
  });
  std::size_t ranked = 0;
  while (!done.load() || ranked == 0) {
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const std::uint64_t r = rank(u, 5);
      ASSERT_LE(r, vmm::VictimPolicy::kMaxRank);
      if (u < 5) {
        ASSERT_TRUE(r == 5 || r >= (std::uint64_t{1} << 60)) << r;  // by last use, or the step's tier
      }
      ++ranked;
    }
  }
  follower.join();
}

}  // namespace
}  // namespace vgpumem::scheduler
