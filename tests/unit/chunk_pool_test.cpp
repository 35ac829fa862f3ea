// vmm::ChunkPool: blocks of a power of two of 2 MiB chunks, up to 64 MiB,
// handed out whole, as many as add up to a unit, the largest first, each
// mapped from its start (a VMM call costs per call and per handle, not per
// byte, and cuMemMap maps a handle from offset 0 only). The cap bounds the
// blocks created; a block is released only whole, once all of it is free,
// or to make blocks of the sizes missing (reshape); a block an unfinished
// save may still read comes out last, with that save named.
#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <vector>

#include "vmm/chunk_pool.h"

namespace {

using vgpumem::vmm::CapLedger;
using vgpumem::vmm::Chunk;
using vgpumem::vmm::ChunkPool;
using vgpumem::vmm::DriverOps;
using vgpumem::vmm::kChunkBytes;

std::map<CUmemGenericAllocationHandle, size_t> g_blocks;  // what the fake driver holds now
CUmemGenericAllocationHandle g_next = 1;
size_t g_refuse_above = ~size_t{0};  // the fake driver's "out of memory" above this size

CUresult fake_create(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp*, unsigned long long) {
  if (bytes > g_refuse_above) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = g_next++;
  g_blocks[*handle] = bytes;
  return CUDA_SUCCESS;
}
CUresult fake_release(CUmemGenericAllocationHandle handle) {
  return g_blocks.erase(handle) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Mappings `chunks` would take: one per run of chunks that follow one another.
std::size_t mappings(const std::vector<Chunk>& chunks) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) count += i == 0 || !chunks[i].follows(chunks[i - 1]) ? 1 : 0;
  return count;
}

// Whether every mapping `chunks` would take starts at its handle's start
// and covers the whole handle (cuMemMap: "offset currently must be zero").
bool whole_handles_from_their_start(const std::vector<Chunk>& chunks) {
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const bool starts_mapping = i == 0 || !chunks[i].follows(chunks[i - 1]);
    if (starts_mapping && chunks[i].offset != 0) return false;
    const bool ends_mapping = i + 1 == chunks.size() || !chunks[i + 1].follows(chunks[i]);
    if (ends_mapping && g_blocks.count(chunks[i].handle) != 0 &&
        chunks[i].offset + kChunkBytes != g_blocks[chunks[i].handle]) {
      return false;
    }
  }
  return true;
}

// The sizes of the blocks `chunks` come in, in MiB, in order.
std::vector<std::uint64_t> block_sizes_mib(const std::vector<Chunk>& chunks) {
  std::vector<std::uint64_t> sizes;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (i == 0 || !chunks[i].follows(chunks[i - 1])) sizes.push_back(g_blocks.at(chunks[i].handle) >> 20);
  }
  return sizes;
}

class ChunkPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_blocks.clear();
    g_next = 1;
    g_refuse_above = ~size_t{0};
    driver_.create = &fake_create;
    driver_.release = &fake_release;
  }
  std::uint64_t cap_ = 1024 * kChunkBytes;  // blocks of 64 MiB: a sixteenth of it
  CapLedger ledger_{[this](int) { return cap_; }};
  DriverOps driver_;
};

TEST_F(ChunkPoolTest, AUnitIsGivenWholeBlocksThatAddUpToItLargestFirst) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(13, 0, &chunks, &saves), CUDA_SUCCESS);
  ASSERT_EQ(chunks.size(), 13u);
  EXPECT_EQ(block_sizes_mib(chunks), (std::vector<std::uint64_t>{16, 8, 2})) << "13 chunks: 8 + 4 + 1";
  EXPECT_TRUE(whole_handles_from_their_start(chunks));
  EXPECT_EQ(g_blocks.size(), 3u);
  EXPECT_EQ(saves, std::vector<std::uint64_t>(13, 0));
  std::vector<Chunk> whole;
  ASSERT_EQ(pool.take(32, 0, &whole, &saves), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(whole), (std::vector<std::uint64_t>{64})) << "a 64 MiB unit: one handle";
}

TEST_F(ChunkPoolTest, EveryMappingIsAWholeHandleFromItsStartWhateverTheSizes) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<std::vector<Chunk>> units;
  std::vector<std::uint64_t> saves;
  for (std::size_t count : {1u, 3u, 7u, 12u, 31u, 40u, 5u, 2u}) {
    units.emplace_back();
    ASSERT_EQ(pool.take(count, 0, &units.back(), &saves), CUDA_SUCCESS) << count;
    EXPECT_EQ(units.back().size(), count);
    EXPECT_TRUE(whole_handles_from_their_start(units.back())) << count;
    EXPECT_LE(mappings(units.back()), static_cast<std::size_t>(std::popcount(count)) + count / 64) << count;
  }
  // Given back and taken again in other sizes: still whole blocks only.
  for (auto& unit : units) {
    for (const Chunk& c : unit) pool.give_back(c);
  }
  for (std::size_t count : {6u, 9u, 33u, 1u}) {
    std::vector<Chunk> chunks;
    ASSERT_EQ(pool.take(count, 0, &chunks, &saves), CUDA_SUCCESS) << count;
    EXPECT_TRUE(whole_handles_from_their_start(chunks)) << count;
  }
}

TEST_F(ChunkPoolTest, AUnitTakesBlocksOfItsOwnSizesMadeWhileTheCapHasRoom) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(2, 0, &a, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(2, 0, &b, &saves), CUDA_SUCCESS);
  for (const Chunk& c : a) pool.give_back(c);
  for (const Chunk& c : b) pool.give_back(c);
  std::vector<Chunk> four;
  ASSERT_EQ(pool.take(4, 0, &four, &saves), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(four), (std::vector<std::uint64_t>{8})) << "one handle, not the two free";
  std::vector<Chunk> again;
  ASSERT_EQ(pool.take(2, 0, &again, &saves), CUDA_SUCCESS);
  EXPECT_EQ(again, a) << "a free block of its size, whole and in order";
  EXPECT_EQ(g_blocks.size(), 3u);
}

TEST_F(ChunkPoolTest, AnyFreeBlocksThatAddUpServeWhereNoneIsMade) {
  cap_ = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(2, 0, &a, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(2, 0, &b, &saves), CUDA_SUCCESS);
  for (const Chunk& c : a) pool.give_back(c, 5);
  for (const Chunk& c : b) pool.give_back(c, 6);
  std::vector<Chunk> four;
  EXPECT_EQ(pool.take(4, 0, &four, &saves), CUDA_ERROR_OUT_OF_MEMORY) << "no block of four, and no room for one";
  EXPECT_TRUE(four.empty());
  saves.clear();
  ASSERT_EQ(pool.take(4, 0, &four, &saves, 0, ChunkPool::Fit::any), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(four), (std::vector<std::uint64_t>{4, 4}));
  EXPECT_EQ(saves, (std::vector<std::uint64_t>{5, 5, 6, 6})) << "each chunk names the save it waits for";
  EXPECT_EQ(g_blocks.size(), 2u);
}

TEST_F(ChunkPoolTest, ABlockWhoseSaveIsNotDoneComesOutAfterTheOthersNamingItsSave) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(1, 0, &a, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(1, 0, &b, &saves), CUDA_SUCCESS);
  pool.give_back(a[0], 7);  // its save, number 7, may still read it
  pool.give_back(b[0], 3);
  std::vector<Chunk> chunks;
  saves.clear();
  ASSERT_EQ(pool.take(1, 5, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(chunks.front(), b[0]) << "save 3 is done by 5; save 7 is not";
  EXPECT_EQ(saves.front(), 0u);
  ASSERT_EQ(pool.take(1, 5, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(chunks.back(), a[0]) << "reused before a new block is made, after its save";
  EXPECT_EQ(saves.back(), 7u);
  EXPECT_EQ(pool.blocks(), 2u);
}

TEST_F(ChunkPoolTest, BlocksShrinkNearTheCapAndTheCapIsNeverPassed) {
  cap_ = 21 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 16);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(10, 0, &chunks, &saves), CUDA_SUCCESS);  // 8 + 2
  ASSERT_EQ(pool.take(11, 0, &chunks, &saves), CUDA_SUCCESS) << "8 + 2 + 1";
  EXPECT_EQ(pool.blocks(), 5u);
  EXPECT_EQ(pool.created_bytes(), 21 * kChunkBytes);
  EXPECT_EQ(ledger_.usage(0).counted, 21 * kChunkBytes);
  EXPECT_EQ(pool.take(1, 0, &chunks, &saves), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(chunks.size(), 21u);
  EXPECT_TRUE(whole_handles_from_their_start(chunks));
}

// A prefetch into a block its last owner's save still reads would wait on
// the device for that save: asked for blocks whose saves are done, the pool
// makes a new one rather than hand that block out.
TEST_F(ChunkPoolTest, ABlockASaveStillReadsIsLeftOutWhenOnlyDoneSavesAreWanted) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> a;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &a, &saves), CUDA_SUCCESS);
  for (const Chunk& c : a) pool.give_back(c, 8);
  std::vector<Chunk> b;
  saves.clear();
  ASSERT_EQ(pool.take(4, 7, &b, &saves, 0, ChunkPool::Fit::exact, ChunkPool::Saves::done), CUDA_SUCCESS);
  EXPECT_NE(b.front().handle, a.front().handle) << "save 8 is not done by 7";
  EXPECT_EQ(saves, std::vector<std::uint64_t>(4, 0));
  std::vector<Chunk> c;
  ASSERT_EQ(pool.take(4, 8, &c, &saves, 0, ChunkPool::Fit::exact, ChunkPool::Saves::done), CUDA_SUCCESS);
  EXPECT_EQ(c, a) << "done by 8";
  EXPECT_EQ(g_blocks.size(), 2u);
}

TEST_F(ChunkPoolTest, ANearFitTakesAtMostOneBlockMoreThanItsOwnSizes) {
  cap_ = 8 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> ones, twos;
  std::vector<std::uint64_t> saves;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(pool.take(1, 0, &ones, &saves), CUDA_SUCCESS);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(pool.take(2, 0, &twos, &saves), CUDA_SUCCESS);
  for (const Chunk& c : ones) pool.give_back(c);
  for (const Chunk& c : twos) pool.give_back(c);
  std::vector<Chunk> chunks;
  ASSERT_EQ(pool.take(4, 0, &chunks, &saves, 0, ChunkPool::Fit::near), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(chunks), (std::vector<std::uint64_t>{4, 4})) << "2 + 2: one block more than one of 4";
  chunks.clear();
  EXPECT_EQ(pool.take(3, 0, &chunks, &saves, 0, ChunkPool::Fit::near), CUDA_SUCCESS) << "1 + 1 + 1 for 2 + 1";
  chunks.clear();
  EXPECT_EQ(pool.take(1, 0, &chunks, &saves, 0, ChunkPool::Fit::near), CUDA_SUCCESS);
  for (const Chunk& c : ones) pool.give_back(c);
  chunks.clear();
  EXPECT_EQ(pool.take(4, 0, &chunks, &saves, 0, ChunkPool::Fit::near), CUDA_ERROR_OUT_OF_MEMORY)
      << "four blocks of one: three more than one of four";
  EXPECT_EQ(g_blocks.size(), 6u) << "a near fit makes no block";
}

// A free block that a range still maps (an offload's, until its save is
// done and the range unmapped) keeps its memory when released, so it is not.
TEST_F(ChunkPoolTest, ABlockARangeStillMapsIsNeverReleased) {
  cap_ = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> four;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &four, &saves), CUDA_SUCCESS);
  pool.note_mapped(four.front().block, true);
  for (const Chunk& c : four) pool.give_back(c);
  EXPECT_FALSE(pool.reshape(3, 0)) << "mapped: not released for other sizes";
  EXPECT_EQ(pool.release_free(kChunkBytes), 0u) << "nor for the program's own memory";
  pool.note_mapped(four.front().block, false);
  EXPECT_TRUE(pool.reshape(3, 0));
  EXPECT_TRUE(g_blocks.empty());
}

TEST_F(ChunkPoolTest, ADriverShortOfMemoryGetsSmallerBlocksWhereAnyFitDoes) {
  g_refuse_above = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  EXPECT_EQ(pool.take(8, 0, &chunks, &saves), CUDA_ERROR_OUT_OF_MEMORY) << "its own size, or none";
  ASSERT_EQ(pool.take(8, 0, &chunks, &saves, 0, ChunkPool::Fit::any), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(chunks), (std::vector<std::uint64_t>{8, 8}));
  EXPECT_EQ(ledger_.usage(0).counted, pool.created_bytes()) << "refused sizes refunded";
}

TEST_F(ChunkPoolTest, OnlyWhollyFreeBlocksAreReleasedAndTheirSlotsServeAgain) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(32, 0, &a, &saves), CUDA_SUCCESS);  // one 64 MiB block
  ASSERT_EQ(pool.take(16, 0, &b, &saves), CUDA_SUCCESS);  // one 32 MiB block
  ASSERT_EQ(pool.blocks(), 2u);
  for (std::size_t i = 1; i < a.size(); ++i) pool.give_back(a[i]);
  for (const Chunk& c : b) pool.give_back(c);
  EXPECT_EQ(pool.release_free(2 * kChunkBytes), 16 * kChunkBytes) << "b's block, whole; a's still holds a chunk";
  EXPECT_EQ(pool.blocks(), 1u);
  EXPECT_EQ(pool.release_free(kChunkBytes), 0u);
  pool.give_back(a[0]);
  EXPECT_EQ(pool.release_free(kChunkBytes), 32 * kChunkBytes);
  EXPECT_TRUE(g_blocks.empty());
  EXPECT_EQ(ledger_.usage(0).counted, 0u);
  EXPECT_EQ(pool.free_chunks(), 0u);
  std::vector<Chunk> c;
  ASSERT_EQ(pool.take(2, 0, &c, &saves), CUDA_SUCCESS);
  EXPECT_EQ(pool.blocks(), 1u);
}

TEST_F(ChunkPoolTest, TakeBackReturnsExactlyTheChunksASaveGaveBackOrNothing) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> unit, other;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &unit, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(4, 0, &other, &saves), CUDA_SUCCESS);
  for (const Chunk& c : other) pool.give_back(c);
  for (std::size_t i = 0; i < unit.size(); ++i) pool.give_back(unit[i], 10 + i / 2);  // two pieces: saves 10, 11
  EXPECT_FALSE(pool.take_back(unit, 11, 11)) << "the first piece's chunks carry save 10";
  EXPECT_EQ(pool.free_chunks(), 8u) << "nothing changed";
  EXPECT_TRUE(pool.take_back(unit, 10, 11));
  EXPECT_EQ(pool.free_chunks(), 4u);
  for (const Chunk& c : unit) pool.give_back(c, 12);
  std::vector<Chunk> reused;
  ASSERT_EQ(pool.take(4, 12, &reused, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(4, 12, &reused, &saves), CUDA_SUCCESS);  // someone reuses its block
  EXPECT_FALSE(pool.take_back(unit, 12, 12));
}

// Taken while some are missing, the blocks the next offload frees would be
// split between two units.
TEST_F(ChunkPoolTest, ARequestTheFreeBlocksAndTheCapCannotMeetTakesNothing) {
  cap_ = 3 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> one, two;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(1, 0, &one, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(2, 0, &two, &saves), CUDA_SUCCESS);
  pool.give_back(one[0]);
  std::vector<Chunk> chunks;
  saves.clear();
  EXPECT_EQ(pool.take(2, 0, &chunks, &saves), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(chunks.empty());
  EXPECT_TRUE(saves.empty());
  EXPECT_EQ(pool.free_chunks(), 1u);
  for (const Chunk& c : two) pool.give_back(c);  // an offload frees a block of two
  ASSERT_EQ(pool.take(2, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(chunks, two);
}

TEST_F(ChunkPoolTest, BlocksAreASixteenthOfTheCapUnlessSetAndAlwaysAPowerOfTwo) {
  cap_ = 16 * kChunkBytes;
  ChunkPool small(0, driver_, ledger_);
  EXPECT_EQ(small.largest_block(), 1u) << "under a 32 MiB cap, every chunk its own allocation, as small caps need";
  CapLedger uncapped([](int) { return vgpumem::vmm::kUncapped; });
  ChunkPool large(0, driver_, uncapped);
  EXPECT_EQ(large.largest_block(), 32u);
  ChunkPool set(0, driver_, ledger_, 4);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(set.take(8, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(set.blocks(), 2u);
  EXPECT_EQ(mappings(chunks), 2u);
  ChunkPool twelve(0, driver_, uncapped, 12);
  EXPECT_EQ(twelve.largest_block(), 8u) << "VGPUMEM_BLOCK_BYTES=24MiB: blocks of 16 MiB at most";
}

TEST_F(ChunkPoolTest, AUnitMayBeLimitedToSmallerBlocks) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &chunks, &saves, 1), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(chunks), (std::vector<std::uint64_t>{2, 2, 2, 2})) << "a handle of the program's";
}

// The cap full, the free room in blocks too large for a unit: blocks no
// save still reads are released, and the take makes the sizes it needs.
TEST_F(ChunkPoolTest, ReshapeReleasesIdleBlocksTheTakeLeavesOutForTheSizesMissing) {
  cap_ = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> four;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &four, &saves), CUDA_SUCCESS);
  for (const Chunk& c : four) pool.give_back(c, 9);  // its save, number 9
  std::vector<Chunk> three;
  EXPECT_EQ(pool.take(3, 9, &three, &saves), CUDA_ERROR_OUT_OF_MEMORY) << "no block of four serves three";
  EXPECT_FALSE(pool.reshape(3, 5)) << "save 9 may still read the block: not released";
  EXPECT_EQ(pool.blocks(), 1u);
  EXPECT_TRUE(pool.reshape(3, 9));
  EXPECT_EQ(pool.reshaped_blocks(), 1u);
  ASSERT_EQ(pool.take(3, 9, &three, &saves), CUDA_SUCCESS);
  EXPECT_EQ(block_sizes_mib(three), (std::vector<std::uint64_t>{4, 2}));
  EXPECT_LE(ledger_.usage(0).counted, cap_);
}

TEST_F(ChunkPoolTest, ReshapeKeepsTheBlocksTheTakeWillUse) {
  cap_ = 6 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &a, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(2, 0, &b, &saves), CUDA_SUCCESS);
  for (const Chunk& c : a) pool.give_back(c);
  for (const Chunk& c : b) pool.give_back(c);
  std::vector<Chunk> five;
  EXPECT_EQ(pool.take(5, 0, &five, &saves), CUDA_ERROR_OUT_OF_MEMORY) << "4 + 2 cannot make 5";
  EXPECT_TRUE(pool.reshape(5, 0));
  ASSERT_EQ(pool.take(5, 0, &five, &saves), CUDA_SUCCESS);
  EXPECT_EQ(five.front(), a.front()) << "the block of four stays; the block of two became one of one";
  EXPECT_EQ(block_sizes_mib(five), (std::vector<std::uint64_t>{8, 2}));
}

}  // namespace
