// Which unit makes room (vmm/victim_policy.h), on the simulated driver: the
// one the policy ranks first, unless it is inside its launch grace and
// another is not; least recently used without a policy; the learned step's
// order (scheduler/next_use_order.h) takes the unit needed furthest ahead.
// Whichever goes, every byte comes back.
#include <array>
#include <atomic>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"
#include "scheduler/next_use_order.h"
#include "scheduler/trigger_table.h"

namespace vgpumem::test {
namespace {

// The opposite of the pager's own order: most recently used first.
class MostRecentlyUsed final : public vmm::VictimPolicy {
 public:
  std::uint64_t rank(const vmm::Unit&, std::uint64_t last_use) const noexcept override {
    return kMaxRank - std::min(last_use, kMaxRank);
  }
  const char* name() const noexcept override { return "most recently used"; }
};

// Three 2 MiB buffers written in order under a 6 MiB cap, in the strict
// order (an offloaded range is unmapped before its chunks serve another)
// and without the reclaimer, so which one went shows as the one unmapped
// when a fourth is allocated. `grace`: VGPUMEM_GRACE_LAUNCHES.
class VictimOrderTest : public PagerTest {
 protected:
  void fill(std::uint32_t grace) {
    make_pager(6 * kMiB, std::nullopt, [grace](vmm::PagerOptions& options) {
      options.check = vmm::CheckMode::strict;
      options.reclaimer = false;
      options.grace_operations = grace;
      options.grace = vmm::GraceKind::blanket;
    });
    pager_->set_access_feed(&catcher_);
    for (unsigned i = 0; i < 3; ++i) {
      ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[i]), CUDA_SUCCESS);
      ASSERT_NO_FATAL_FAILURE(write(buffers_[i], 2 * kMiB, i));
      units_[i] = catcher_.last;
      ASSERT_NE(units_[i], nullptr);
    }
  }
  // Allocates the fourth; which of the three went to make its room.
  int victim() {
    EXPECT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[3]), CUDA_SUCCESS);
    int gone = -1;
    for (int i = 0; i < 3; ++i) {
      if (!mapped_now(buffers_[i], 2 * kMiB)) {
        EXPECT_EQ(gone, -1) << "one unit makes the room of one";
        gone = i;
      }
    }
    return gone;
  }
  void expect_all_held_and_free() {
    ASSERT_NO_FATAL_FAILURE(write(buffers_[3], 2 * kMiB, 3));
    expect_held(buffers_, 2 * kMiB);
    CUresult result = CUDA_ERROR_UNKNOWN;
    for (CUdeviceptr p : buffers_) EXPECT_TRUE(pager_->free(p, &result));
    pager_->set_victim_policy(nullptr);  // the test's own goes before the pager
    pager_->set_access_feed(nullptr);
  }

  UnitCatcher catcher_;
  std::array<CUdeviceptr, 4> buffers_{};
  std::array<vmm::Unit*, 3> units_{};
};

TEST_F(VictimOrderTest, WithoutAPolicyTheLeastRecentlyUsedGoes) {
  ASSERT_NO_FATAL_FAILURE(fill(0));
  EXPECT_EQ(pager_->summary()["victims"]["order"], "least recently used");
  EXPECT_EQ(victim(), 0);
  EXPECT_EQ(pager_->summary()["victims"]["taken"], 1);
  EXPECT_EQ(pager_->summary()["victims"]["in_order"], 1);
  expect_all_held_and_free();
}

TEST_F(VictimOrderTest, TheUnitThePolicyRanksFirstGoes) {
  ASSERT_NO_FATAL_FAILURE(fill(0));
  MostRecentlyUsed policy;
  pager_->set_victim_policy(&policy);
  EXPECT_EQ(pager_->summary()["victims"]["order"], "most recently used");
  EXPECT_EQ(victim(), 2);
  expect_all_held_and_free();
}

// A grace of one operation keeps the last two written; the policy's first
// choice is among them, so the one outside goes.
TEST_F(VictimOrderTest, TheGraceComesBeforeThePolicy) {
  ASSERT_NO_FATAL_FAILURE(fill(1));
  MostRecentlyUsed policy;
  pager_->set_victim_policy(&policy);
  EXPECT_EQ(victim(), 0);
  EXPECT_EQ(pager_->summary()["grace"]["evictions_inside"].get<int>(), 0);
  expect_all_held_and_free();
}

// The learned step: operations 0..5 use units 0, 1, 2, 0, 2, 1. With
// operation 2 just issued, unit 0 is needed next, unit 2 after it, unit 1
// last: unit 1 goes, where least recently used would take unit 0.
TEST_F(VictimOrderTest, TheLearnedStepsOrderTakesTheUnitNeededFurthestAhead) {
  ASSERT_NO_FATAL_FAILURE(fill(0));
  scheduler::IterationProfile step;
  const std::array<std::uint32_t, 6> uses{0, 1, 2, 0, 2, 1};
  step.units.resize(3);
  for (std::uint32_t u = 0; u < 3; ++u) step.units[u].unit = units_[u];
  for (std::uint32_t p = 0; p < uses.size(); ++p) {
    scheduler::ProfileOp& op = step.ops.emplace_back();
    op.identity = p + 1;
    op.first_use = p;
    op.use_count = 1;
    step.uses.push_back(uses[p]);
    step.units[uses[p]].uses.push_back(p);
  }
  scheduler::TriggerTable table = scheduler::make_trigger_table(step, scheduler::Plan{});
  table.generation = 1;
  std::atomic<const scheduler::TriggerTable*> published{&table};
  scheduler::NextUseOrder order(published);
  pager_->set_victim_policy(&order);
  EXPECT_FALSE(order.informed()) << "no position in the step yet";
  order.at(table, 2, 1);
  EXPECT_TRUE(order.informed());
  EXPECT_EQ(pager_->summary()["victims"]["order"], "furthest next use");
  EXPECT_EQ(victim(), 1);
  EXPECT_EQ(pager_->summary()["victims"]["in_order"], 1);
  expect_all_held_and_free();
}

}  // namespace
}  // namespace vgpumem::test
