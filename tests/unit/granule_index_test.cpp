// The granule index: the arena and the program's reservations, which come
// and go (an entry is reused), looked up without a lock while they change.
#include "vmm/granule_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "vmm/unit.h"

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kGranule = GranuleIndex::kGranule;
constexpr std::uint64_t kArena = std::uint64_t{1} << 40;

TEST(GranuleIndex, FindsUnitsInTheArenaAndInTheProgramsReservations) {
  GranuleIndex index;
  index.cover(kArena, 64 * kGranule);
  Unit in_arena, in_reservation;
  index.assign(kArena + 4 * kGranule, 2 * kGranule, &in_arena);
  const std::uint64_t reservation = 3 * kArena;
  ASSERT_TRUE(index.cover_more(reservation, 16 * kGranule));
  EXPECT_TRUE(index.in_extra_range(reservation + 5));
  EXPECT_FALSE(index.in_extra_range(kArena + 5)) << "the arena is not the program's";
  index.assign(reservation + 8 * kGranule, kGranule, &in_reservation);
  EXPECT_EQ(index.lookup(kArena + 5 * kGranule + 7), &in_arena);
  EXPECT_EQ(index.lookup(reservation + 8 * kGranule + 1), &in_reservation);
  EXPECT_EQ(index.lookup(reservation + 9 * kGranule), nullptr);
  EXPECT_EQ(index.lookup(reservation + 16 * kGranule), nullptr) << "past its end";
  EXPECT_EQ(index.lookup(42), nullptr);
  index.uncover(reservation);
  EXPECT_EQ(index.lookup(reservation + 8 * kGranule), nullptr) << "freed: no longer covered";
  EXPECT_FALSE(index.in_extra_range(reservation));
}

TEST(GranuleIndex, AFreedReservationsEntryServesTheNextOne) {
  GranuleIndex index;
  // More reservations over a process's life than entries, each freed before the next.
  for (std::size_t i = 0; i < 3 * GranuleIndex::kMaxExtraRanges; ++i) {
    const std::uint64_t base = (4 + i) * kArena;
    ASSERT_TRUE(index.cover_more(base, (1 + i % 5) * kGranule)) << i;
    Unit unit;
    index.assign(base, kGranule, &unit);
    ASSERT_EQ(index.lookup(base + 1), &unit);
    index.assign(base, kGranule, nullptr);
    index.uncover(base);
  }
}

TEST(GranuleIndex, RefusesMoreAtOnceThanItHasEntriesAndTooLargeOnes) {
  GranuleIndex index;
  for (std::size_t i = 0; i < GranuleIndex::kMaxExtraRanges; ++i) {
    ASSERT_TRUE(index.cover_more((4 + i) * kArena, kGranule));
  }
  EXPECT_FALSE(index.cover_more(100 * kArena, kGranule)) << "every entry is live";
  index.uncover(4 * kArena);
  EXPECT_TRUE(index.cover_more(100 * kArena, kGranule));
  GranuleIndex other;
  EXPECT_FALSE(other.cover_more(kArena, GranuleIndex::kMaxExtraBytes + kGranule));
}

// Lookups on one thread while another frees and reserves again: a lookup
// finds the live reservation's unit or nothing, never another's slot.
TEST(GranuleIndex, ConcurrentLookupsWhileReservationsComeAndGo) {
  GranuleIndex index;
  Unit unit;
  const std::uint64_t stable = 2 * kArena;
  ASSERT_TRUE(index.cover_more(stable, 4 * kGranule));
  index.assign(stable, 4 * kGranule, &unit);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    while (!stop.load()) {
      if (index.lookup(stable + 3 * kGranule) != &unit) wrong.fetch_add(1);
      if (index.lookup(7 * kArena + kGranule) != nullptr) wrong.fetch_add(1);  // never holds a unit
    }
  });
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t base = (10 + i % 7) * kArena;
    ASSERT_TRUE(index.cover_more(base, (1 + i % 9) * kGranule));
    index.uncover(base);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace vgpumem::vmm
