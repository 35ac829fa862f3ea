// The layered trainer's caching allocator (caching_allocator.h) follows
// PyTorch's CUDACachingAllocator where it decides addresses: rounding, pools,
// segment sizes, best fit, splitting, coalescing. Segments come from a
// counter here, as in the trainer's --describe dry run.
#include "caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace layered {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// PyTorch's rules over segments from a counter (64 MiB apart, so that a
// block's segment is its address's 64 MiB slot), remembering their sizes.
class Allocator {
 public:
  explicit Allocator(CachingRules rules = CachingRules())
      : allocator_(rules, [this](std::uint64_t bytes) {
          sizes.push_back(bytes);
          return kBase + (sizes.size() - 1) * 64 * kMiB;
        }) {}
  CUdeviceptr allocate(std::uint64_t bytes) { return allocator_.allocate(bytes); }
  void free(CUdeviceptr address) { allocator_.free(address); }
  CUdeviceptr segment(std::size_t i) const { return kBase + i * 64 * kMiB; }
  CachingAllocator& get() { return allocator_; }

  static constexpr CUdeviceptr kBase = 1ull << 40;
  std::vector<std::uint64_t> sizes;  // of the segments taken, in order

 private:
  CachingAllocator allocator_;
};

TEST(CachingAllocator, SmallRequestsShareATwoMiBSegmentIn512ByteSteps) {
  Allocator a;
  EXPECT_EQ(a.allocate(1), a.segment(0));
  EXPECT_EQ(a.allocate(600), a.segment(0) + 512);         // the first took 512
  EXPECT_EQ(a.allocate(1 * kMiB), a.segment(0) + 1536);   // 1 MiB is still small
  EXPECT_EQ(a.sizes, (std::vector<std::uint64_t>{2 * kMiB}));
}

TEST(CachingAllocator, LargeRequestsGetTwentyMiBUnderTenAndTheirOwnSizeInTwoMiBStepsAbove) {
  Allocator a;
  a.allocate(1 * kMiB + 1);
  a.allocate(10 * kMiB - 512);
  a.allocate(10 * kMiB);
  a.allocate(11 * kMiB + 1);
  // The second fits the first segment's 19 MiB rest; the others do not.
  EXPECT_EQ(a.sizes, (std::vector<std::uint64_t>{20 * kMiB, 10 * kMiB, 12 * kMiB}));
  EXPECT_EQ(a.get().reserved_bytes(), 42 * kMiB);
}

TEST(CachingAllocator, TheSmallestFreeBlockThatFitsAndOfEqualOnesTheLowest) {
  Allocator a;
  const CUdeviceptr x = a.allocate(4 * kMiB), gap1 = a.allocate(4 * kMiB), y = a.allocate(2 * kMiB);
  const CUdeviceptr gap2 = a.allocate(4 * kMiB), z = a.allocate(3 * kMiB), rest = a.allocate(3 * kMiB);
  (void)x, (void)y, (void)z, (void)rest;  // the segment is full but for these two
  a.free(gap2);
  a.free(gap1);
  EXPECT_EQ(a.allocate(4 * kMiB), gap1) << "of two equal blocks the lower";
  EXPECT_EQ(a.sizes.size(), 1u);
  a.free(gap1);
  const CUdeviceptr big = a.allocate(8 * kMiB);  // none fits: a new segment
  EXPECT_EQ(big, a.segment(1));
  a.free(big);  // free blocks now: 4 (gap1), 4 (gap2), 20 (segment 1)
  EXPECT_EQ(a.allocate(3 * kMiB), gap1) << "the smallest that fits, not the largest";
}

TEST(CachingAllocator, ALargeBlockIsSplitOnlyWhenMoreThanOneMiBRemains) {
  Allocator a;
  a.allocate(19 * kMiB);  // a 20 MiB segment; 1 MiB would remain: not split
  EXPECT_EQ(a.sizes, (std::vector<std::uint64_t>{20 * kMiB}));
  EXPECT_EQ(a.get().peak_allocated_bytes(), 20 * kMiB) << "the block stayed whole";
  Allocator b;
  const CUdeviceptr first = b.allocate(12 * kMiB);
  b.free(first);
  b.allocate(10 * kMiB + 512 * 1024 - 512);  // a little more than 1.5 MiB remains: split
  EXPECT_EQ(b.allocate(1 * kMiB + 512), first + 10 * kMiB + 512 * 1024 - 512);
  EXPECT_EQ(b.sizes.size(), 1u);
}

TEST(CachingAllocator, ASmallBlockIsSplitWhenAt512BytesRemain) {
  Allocator a;
  const CUdeviceptr x = a.allocate(1 * kMiB);
  a.allocate(1 * kMiB - 512);
  EXPECT_EQ(a.allocate(512), x + 2 * kMiB - 512);
  EXPECT_EQ(a.sizes.size(), 1u);
}

TEST(CachingAllocator, FreedNeighboursCoalesceWhateverTheOrder) {
  Allocator a;
  const CUdeviceptr p = a.allocate(6 * kMiB), q = a.allocate(6 * kMiB), r = a.allocate(6 * kMiB);
  a.free(r);
  a.free(p);
  a.free(q);  // joins both neighbours: the segment is one free block again
  EXPECT_EQ(a.allocate(20 * kMiB - 512), p);
  EXPECT_EQ(a.sizes.size(), 1u);
  EXPECT_EQ(a.get().peak_allocated_bytes(), 20 * kMiB) << "an unsplit block counts whole";
}

TEST(CachingAllocator, ThePoolsDoNotLendToEachOther) {
  Allocator a;
  const CUdeviceptr large = a.allocate(2 * kMiB);
  a.free(large);
  EXPECT_EQ(a.allocate(4096), a.segment(1)) << "a small request never takes a large-pool block";
  EXPECT_EQ(a.sizes, (std::vector<std::uint64_t>{20 * kMiB, 2 * kMiB}));
}

TEST(CachingAllocator, ScaledRulesDivideEverySizeButKeep512ByteUnits) {
  const CachingRules r = CachingRules::scaled([](std::uint64_t bytes) { return (bytes + 63) / 64; });
  EXPECT_EQ(r.rounding, 512u);
  EXPECT_EQ(r.small_request, 16384u);
  EXPECT_EQ(r.small_segment, 32768u);
  EXPECT_EQ(r.large_segment, 327680u);
  EXPECT_EQ(r.min_large_request, 163840u);
  EXPECT_EQ(r.large_rounding, 32768u);
  EXPECT_EQ(r.large_split_remainder, 16384u);
  const CachingRules tiny = CachingRules::scaled([](std::uint64_t bytes) { return bytes / 65536; });
  EXPECT_EQ(tiny.small_segment, 512u) << "at least one 512-byte unit";
  EXPECT_EQ(tiny.large_segment, 512u);
  Allocator a(tiny);
  a.allocate(100);  // a large request here (the scaled 1 MiB is 16 bytes): one unit
  EXPECT_EQ(a.sizes, (std::vector<std::uint64_t>{512}));
}

}  // namespace
}  // namespace layered
