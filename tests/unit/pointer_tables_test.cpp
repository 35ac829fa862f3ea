// The pointer-table registry's rules, in process: what an upload records,
// what replaces, merges and drops a table, and what a launch's words lead to.
#include "vmm/pointer_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/unit.h"

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kGranule = GranuleIndex::kGranule;
constexpr std::uint64_t kArena = std::uint64_t{1} << 40;

// Units A, B, C (one granule each) and a table unit T of four granules.
class PointerTablesTest : public ::testing::Test {
 protected:
  PointerTablesTest() {
    index_.cover(kArena, 64 * kGranule);
    index_.assign(a_, kGranule, &unit_a_);
    index_.assign(b_, kGranule, &unit_b_);
    index_.assign(c_, kGranule, &unit_c_);
    index_.assign(t_, 4 * kGranule, &unit_t_);
  }
  std::vector<std::uint64_t> followed(std::uint64_t word) {
    std::vector<std::uint64_t> targets;
    tables_.follow(&word, 1, targets);
    std::sort(targets.begin(), targets.end());
    return targets;
  }
  void upload(std::uint64_t destination, std::vector<std::uint64_t> words) {
    tables_.uploaded(destination, words.data(), words.size() * sizeof(std::uint64_t));
  }

  GranuleIndex index_;
  PointerTables tables_{index_};
  Unit unit_a_, unit_b_, unit_c_, unit_t_;
  const std::uint64_t a_ = kArena + 2 * kGranule, b_ = kArena + 4 * kGranule, c_ = kArena + 6 * kGranule;
  const std::uint64_t t_ = kArena + 16 * kGranule;
};

TEST_F(PointerTablesTest, AnUploadRecordsTheGranulesItsWordsPointIntoOnce) {
  upload(t_, {a_ + 8, 12345, b_ + 64, a_ + 16, 0, b_});
  EXPECT_EQ(unit_t_.tables.load(), 1u);
  EXPECT_EQ(followed(t_ + 40), (std::vector<std::uint64_t>{a_, b_})) << "a word anywhere in the range";
  EXPECT_TRUE(followed(t_ + 48).empty()) << "past the upload's end";
  EXPECT_TRUE(followed(a_).empty()) << "a target is not a table";
}

TEST_F(PointerTablesTest, AnUploadWithoutPointersRecordsNothing) {
  upload(t_, {1, 2, 3});
  EXPECT_EQ(unit_t_.tables.load(), 0u);
  EXPECT_TRUE(followed(t_).empty());
}

TEST_F(PointerTablesTest, ALaterUploadToTheSameRangeReplacesTheTable) {
  for (int step = 0; step < 1000; ++step) upload(t_, {step % 2 == 0 ? a_ : b_, c_});
  EXPECT_EQ(followed(t_), (std::vector<std::uint64_t>{b_, c_}));
  const nlohmann::json summary = tables_.summary();
  EXPECT_EQ(summary["tables_peak"].get<int>(), 1);
  EXPECT_EQ(summary["target_granules_peak"].get<int>(), 2);
  EXPECT_EQ(unit_t_.tables.load(), 1u);
}

TEST_F(PointerTablesTest, AnUploadOverPartOfATableKeepsTheRestAsASuperset) {
  upload(t_, {a_, b_, 0, 0});
  upload(t_ + 16, {c_});  // rewrites the third word only
  EXPECT_EQ(followed(t_ + 8), (std::vector<std::uint64_t>{a_, b_, c_}));
  EXPECT_EQ(unit_t_.tables.load(), 1u) << "one table over both";
}

TEST_F(PointerTablesTest, AMemsetOrFreeCoveringATableDropsItAndOneInPartKeepsIt) {
  upload(t_, {a_, b_});
  tables_.overwritten(t_ + 8, 64);
  EXPECT_EQ(followed(t_), (std::vector<std::uint64_t>{a_, b_})) << "covered in part: kept";
  tables_.overwritten(t_, 16);
  EXPECT_TRUE(followed(t_).empty());
  EXPECT_EQ(unit_t_.tables.load(), 0u);
}

TEST_F(PointerTablesTest, OnlyTheFirstMebibyteOfALargeUploadIsRead) {
  std::vector<std::uint64_t> large(PointerTables::kScanLimit / 8 + 2, 7);
  large[0] = a_;
  large[PointerTables::kScanLimit / 8] = b_;  // the first word past the limit
  tables_.uploaded(t_, large.data(), large.size() * sizeof(std::uint64_t));
  EXPECT_EQ(followed(t_ + PointerTables::kScanLimit), (std::vector<std::uint64_t>{a_}))
      << "the table covers the whole destination";
}

TEST_F(PointerTablesTest, APinnedHostBufferIsReadAtTheLaunchThatPointsIntoIt) {
  std::vector<std::uint64_t> fifo(512, 0);
  const auto base = reinterpret_cast<std::uint64_t>(fifo.data());
  tables_.host_pinned(base, fifo.size() * sizeof(std::uint64_t));
  fifo[300] = c_ + 4;  // written after it was recorded, as a FIFO is
  EXPECT_TRUE(tables_.may_point_into_host(base + 100));
  EXPECT_EQ(followed(base + 100), (std::vector<std::uint64_t>{c_ + 4})) << "the whole buffer, not from the word";
  tables_.host_released(base);
  EXPECT_TRUE(followed(base + 100).empty());
}

}  // namespace
}  // namespace vgpumem::vmm
