// A profiled step cut into pieces (scheduler/profile_pieces.h): each unit's
// pieces are used where it was, overwritten where it was, and the step's
// floor, which already lets units move in fractions, does not change.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "scheduler/profile_json.h"
#include "scheduler/profile_pieces.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

nlohmann::json step(const std::vector<std::uint64_t>& units, const std::vector<std::vector<std::uint32_t>>& touches,
                    const nlohmann::json& overwrites = nlohmann::json::array()) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& touched : touches) ops.push_back({1000, 0, 1, touched});
  return {{"format", 2}, {"offload_delay", 1}, {"units", units}, {"ops", ops}, {"overwrites", overwrites}};
}

TEST(ProfilePieces, EachPieceIsUsedAndOverwrittenWhereItsUnitWas) {
  const nlohmann::json whole = step({6 * kMiB, 2 * kMiB, 0, 8 * kMiB}, {{0, 1}, {1, 2}, {3}, {0, 3}}, {{3, 0}});
  const nlohmann::json cut = profile_in_pieces(whole, 4 * kMiB);
  EXPECT_EQ(cut["units"], nlohmann::json({4 * kMiB, 2 * kMiB, 2 * kMiB, 0, 4 * kMiB, 4 * kMiB}));
  EXPECT_EQ(cut["ops"][0][3], nlohmann::json({0, 1, 2}));
  EXPECT_EQ(cut["ops"][1][3], nlohmann::json({2, 3}));
  EXPECT_EQ(cut["ops"][2][3], nlohmann::json({4, 5}));
  EXPECT_EQ(cut["ops"][3][3], nlohmann::json({0, 1, 4, 5}));
  EXPECT_EQ(cut["overwrites"], nlohmann::json({{3, 0}, {3, 1}}));

  const IterationProfile read = profile_from_json(cut);
  EXPECT_EQ(read.total_bytes, profile_from_json(whole).total_bytes);
  ASSERT_EQ(read.units.size(), 6u);
  for (std::size_t piece : {0, 1}) {
    EXPECT_EQ(read.units[piece].uses, (std::vector<std::uint32_t>{0, 3}));
    EXPECT_TRUE(read.units[piece].overwritten_at(1)) << "overwritten whole where its unit was";
    EXPECT_FALSE(read.units[piece].overwritten_at(0));
  }
  EXPECT_FALSE(read.units[4].overwritten_at(1)) << "another unit's piece";
}

TEST(ProfilePieces, AUnitNoLargerThanAPieceStaysAsItIs) {
  const nlohmann::json whole = step({2 * kMiB, 8 * kMiB}, {{0}, {1}, {0, 1}});
  EXPECT_EQ(profile_in_pieces(whole, 8 * kMiB), whole);
}

TEST(ProfilePieces, ThePieceSizeIsWholeChunks) {
  const nlohmann::json whole = step({4 * kMiB}, {{0}});
  for (std::uint64_t bytes : {std::uint64_t{0}, 3 * kMiB, kMiB, 2 * kMiB + 1}) {
    try {
      profile_in_pieces(whole, bytes);
      ADD_FAILURE() << bytes << " bytes accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("multiple of 2 MiB"), std::string::npos) << e.what();
    }
  }
}

// The floor lets units move in fractions already: cutting them changes
// nothing in it, on random steps under random caps.
TEST(ProfilePieces, TheFloorIsTheSameInPieces) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t unit_count = 3 + random() % 10, op_count = 6 + random() % 30;
    std::vector<std::uint64_t> units(unit_count);
    for (auto& bytes : units) bytes = (1 + random() % 12) * 2 * kMiB;
    std::vector<std::vector<std::uint32_t>> touches(op_count);
    for (std::uint32_t u = 0; u < unit_count; ++u) {
      for (std::size_t op = 0; op < op_count; ++op) {
        if (random() % 4 == 0) touches[op].push_back(u);
      }
    }
    const IterationProfile whole = profile_from_json(step(units, touches));
    const IterationProfile cut = profile_from_json(profile_in_pieces(step(units, touches), 2 * kMiB));
    const std::uint64_t budget = whole.total_bytes * (20 + random() % 70) / 100;
    const LinkModel link;
    EXPECT_NEAR(least_bytes_moved(cut, budget), least_bytes_moved(whole, budget), 1.0) << trial;
    EXPECT_NEAR(step_floor(cut, budget, link), step_floor(whole, budget, link), 1e-3) << trial;
  }
}

}  // namespace
}  // namespace vgpumem::scheduler
