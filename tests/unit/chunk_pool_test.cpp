// vmm::ChunkPool: 2 MiB chunks carved from blocks of up to 64 MiB, handed
// out in runs that follow one another in a block, so that a unit maps in
// few calls (a VMM call costs per call, not per byte). The cap bounds the
// blocks created; a block is released only whole, once all of it is free;
// a chunk an unfinished save may still read comes out last, with that save
// named.
#include <gtest/gtest.h>

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

TEST_F(ChunkPoolTest, AUnitsChunksComeFromOneBlockInOrderSoTheyMapInOneCall) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(16, 0, &chunks, &saves), CUDA_SUCCESS);
  ASSERT_EQ(chunks.size(), 16u);
  EXPECT_EQ(mappings(chunks), 1u);
  EXPECT_EQ(g_blocks.size(), 1u) << "one cuMemCreate for the whole unit";
  EXPECT_EQ(saves, std::vector<std::uint64_t>(16, 0));
}

TEST_F(ChunkPoolTest, ChunksGivenBackServeTheNextUnitAsARunAgain) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> a, b;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(8, 0, &a, &saves), CUDA_SUCCESS);
  ASSERT_EQ(pool.take(8, 0, &b, &saves), CUDA_SUCCESS);
  EXPECT_EQ(g_blocks.size(), 1u) << "the second unit fills the rest of the first block";
  for (const Chunk& c : a) pool.give_back(c);
  std::vector<Chunk> again;
  saves.clear();
  ASSERT_EQ(pool.take(8, 0, &again, &saves), CUDA_SUCCESS);
  EXPECT_EQ(again, a) << "the run a gave back, whole and in order";
  EXPECT_EQ(mappings(again), 1u);
}

TEST_F(ChunkPoolTest, TheShortestRunThatHoldsTheRequestIsTakenLeavingLongRunsToLongRequests) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> all;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(16, 0, &all, &saves), CUDA_SUCCESS);
  // Free runs of 6 (chunks 0-5) and 3 (chunks 10-12).
  for (int i : {0, 1, 2, 3, 4, 5, 10, 11, 12}) pool.give_back(all[static_cast<std::size_t>(i)]);
  std::vector<Chunk> small;
  ASSERT_EQ(pool.take(3, 0, &small, &saves), CUDA_SUCCESS);
  EXPECT_EQ(small.front(), all[10]);
  std::vector<Chunk> large;
  ASSERT_EQ(pool.take(6, 0, &large, &saves), CUDA_SUCCESS);
  EXPECT_EQ(large.front(), all[0]);
  EXPECT_EQ(mappings(large), 1u);
}

TEST_F(ChunkPoolTest, ScatteredFreeChunksServeBeforeANewBlockLongestRunsFirst) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> all;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(16, 0, &all, &saves), CUDA_SUCCESS);
  for (int i : {1, 4, 5, 6, 9, 10}) pool.give_back(all[static_cast<std::size_t>(i)]);
  std::vector<Chunk> chunks;
  ASSERT_EQ(pool.take(6, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(g_blocks.size(), 1u) << "no block created while free chunks serve";
  EXPECT_EQ(chunks.front(), all[4]) << "the run of three first";
  EXPECT_EQ(mappings(chunks), 3u);
}

TEST_F(ChunkPoolTest, AChunkWhoseSaveIsNotDoneComesOutAfterTheOthersNamingItsSave) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> all;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(16, 0, &all, &saves), CUDA_SUCCESS);
  pool.give_back(all[0], 7);  // its save, number 7, may still read it
  pool.give_back(all[1], 3);
  std::vector<Chunk> chunks;
  saves.clear();
  ASSERT_EQ(pool.take(1, 5, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(chunks.front(), all[1]) << "save 3 is done by 5; save 7 is not";
  EXPECT_EQ(saves.front(), 0u);
  ASSERT_EQ(pool.take(1, 5, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(chunks.back(), all[0]) << "reused before a new block is made, after its save";
  EXPECT_EQ(saves.back(), 7u);
  EXPECT_EQ(pool.blocks(), 1u);
}

TEST_F(ChunkPoolTest, BlocksShrinkNearTheCapAndTheCapIsNeverPassed) {
  cap_ = 21 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 16);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(10, 0, &chunks, &saves), CUDA_SUCCESS);  // a block of 16
  ASSERT_EQ(pool.take(11, 0, &chunks, &saves), CUDA_SUCCESS) << "its other 6, then blocks of 4 and 1";
  EXPECT_EQ(pool.blocks(), 3u);
  EXPECT_EQ(pool.created_bytes(), 21 * kChunkBytes);
  EXPECT_EQ(ledger_.usage(0).counted, 21 * kChunkBytes);
  EXPECT_EQ(pool.take(1, 0, &chunks, &saves), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(chunks.size(), 21u);
}

TEST_F(ChunkPoolTest, ADriverShortOfMemoryGetsSmallerBlocks) {
  g_refuse_above = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(8, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(mappings(chunks), 2u);
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
  std::vector<Chunk> unit;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &unit, &saves), CUDA_SUCCESS);
  for (std::size_t i = 0; i < unit.size(); ++i) pool.give_back(unit[i], 10 + i / 2);  // two pieces: saves 10, 11
  EXPECT_FALSE(pool.take_back(unit, 11, 11)) << "the first piece's chunks carry save 10";
  EXPECT_EQ(pool.free_chunks(), 4u + 12u) << "nothing changed";
  EXPECT_TRUE(pool.take_back(unit, 10, 11));
  EXPECT_EQ(pool.free_chunks(), 12u);
  for (const Chunk& c : unit) pool.give_back(c, 12);
  std::vector<Chunk> other;
  ASSERT_EQ(pool.take(1, 12, &other, &saves), CUDA_SUCCESS);  // someone reuses one of them
  EXPECT_FALSE(pool.take_back(unit, 12, 12));
}

// Taken while some are missing, the chunks the next offload frees would be
// split between two units, and runs would never form again.
TEST_F(ChunkPoolTest, ARequestTheFreeChunksAndTheCapCannotMeetTakesNothing) {
  cap_ = 4 * kChunkBytes;
  ChunkPool pool(0, driver_, ledger_, 4);
  std::vector<Chunk> all;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(4, 0, &all, &saves), CUDA_SUCCESS);
  pool.give_back(all[3]);
  std::vector<Chunk> chunks;
  saves.clear();
  EXPECT_EQ(pool.take(2, 0, &chunks, &saves), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(chunks.empty());
  EXPECT_TRUE(saves.empty());
  EXPECT_EQ(pool.free_chunks(), 1u);
  pool.give_back(all[2]);  // an offload frees the chunk beside it
  ASSERT_EQ(pool.take(2, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(mappings(chunks), 1u) << "the two free chunks, one run";
}

TEST_F(ChunkPoolTest, BlocksAreASixteenthOfTheCapUnlessSet) {
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
}

TEST_F(ChunkPoolTest, WithoutWholeBlocksANewBlockIsOnlyWhatIsMissing) {
  ChunkPool pool(0, driver_, ledger_);
  std::vector<Chunk> chunks;
  std::vector<std::uint64_t> saves;
  ASSERT_EQ(pool.take(3, 0, &chunks, &saves, /*whole_blocks=*/false), CUDA_SUCCESS);
  EXPECT_EQ(pool.created_bytes(), 3 * kChunkBytes) << "room made for the program's own memory stays its";
  ASSERT_EQ(pool.take(3, 0, &chunks, &saves), CUDA_SUCCESS);
  EXPECT_EQ(pool.created_bytes(), 3 * kChunkBytes + 16 * kChunkBytes);
}

}  // namespace
