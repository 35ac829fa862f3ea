// Allocations made in pieces (PagerOptions::piece_bytes): each piece moves
// on its own, but a kernel given a pointer into any piece may read every
// byte of the allocation, so whatever names it by a pointer must bring all
// of it. Each test here is one way a wrong byte could come from pieces
// (Note [Allocations in pieces], vmm/allocations.cpp); the torture order offloads
// everything an operation does not name, so a piece left out is not mapped
// when the "kernel" (a driver copy with no pager in between) reads it.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"
#include "vmm/library_call_scope.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kPiece = 2 * kMiB;
constexpr std::uint64_t kWhole = 4 * kPiece;  // an allocation of four pieces

auto in_pieces(vmm::CheckMode mode) {
  return [mode](vmm::PagerOptions& options) {
    options.check = mode;
    options.reclaimer = false;
    options.grace_operations = 0;
    options.piece_bytes = kPiece;
  };
}

class PiecesTest : public PagerTest {
 protected:
  // What a kernel does that reads all of [address, address + bytes) with
  // only the pager's word-naming in between: true if every byte held the
  // fixture's pattern `seed` (byte i is i * 31 + seed).
  bool kernel_reads_pattern(CUdeviceptr address, std::uint64_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    if (cuMemcpyDtoH(data.data(), address, bytes) != CUDA_SUCCESS) return false;
    return has_pattern(data.data(), bytes, seed);
  }
  // The unit holding `address` (the first an exact one-byte copy names).
  vmm::Unit* unit_at(CUdeviceptr address) {
    UnitCatcher catcher;
    pager_->set_access_feed(&catcher);
    {
      vmm::Access access;
      EXPECT_EQ(pager_->prepare_range(address, 1, nullptr, false, access), CUDA_SUCCESS);
    }
    pager_->set_access_feed(nullptr);
    return catcher.last;
  }
  // A new allocation of `bytes` at *p holding pattern `seed`, then one piece
  // more at *other holding `other_seed`: under the torture order, writing
  // the second sends every piece of the first to the host. Call through
  // ASSERT_NO_FATAL_FAILURE.
  void allocate_sent_to_host(std::uint64_t bytes, unsigned seed, CUdeviceptr* p, unsigned other_seed,
                             CUdeviceptr* other) {
    ASSERT_EQ(pager_->allocate(0, bytes, p), CUDA_SUCCESS);
    write(*p, bytes, seed);
    ASSERT_EQ(pager_->allocate(0, kPiece, other), CUDA_SUCCESS);
    write(*other, kPiece, other_seed);
  }
  std::uint64_t counter(const char* name) const { return pager_->summary()[name].get<std::uint64_t>(); }
  void free_all(std::initializer_list<CUdeviceptr> buffers) {
    for (CUdeviceptr p : buffers) {
      CUresult result = CUDA_ERROR_UNKNOWN;
      EXPECT_TRUE(pager_->free(p, &result));
      EXPECT_EQ(result, CUDA_SUCCESS);
    }
  }
};

TEST_F(PiecesTest, AnAllocationAbovePieceSizeIsMadeOfPiecesBackToBack) {
  make_pager(64 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::fast));
  CUdeviceptr p = 0;
  ASSERT_EQ(pager_->allocate(0, kWhole - 4096, &p), CUDA_SUCCESS);
  std::vector<vmm::Unit*> pieces;
  for (std::uint64_t at = 0; at < kWhole; at += kPiece) pieces.push_back(unit_at(p + at));
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    ASSERT_NE(pieces[i], nullptr);
    EXPECT_EQ(pieces[i]->address, p + i * kPiece);
    EXPECT_EQ(pieces[i]->bytes, kPiece);
    EXPECT_EQ(pieces[i]->first_piece, pieces.front());
    EXPECT_EQ(pieces[i]->next_piece, i + 1 < pieces.size() ? pieces[i + 1] : nullptr);
  }
  EXPECT_EQ(pieces.back()->requested, kPiece - 4096) << "the last piece holds what is left of the request";
  std::uint64_t start = 0, bytes = 0;
  ASSERT_TRUE(pager_->allocation_range(p + 3 * kPiece + 5, &start, &bytes));
  EXPECT_EQ(start, p) << "the program sees one allocation";
  EXPECT_EQ(bytes, kWhole - 4096);
  CUdeviceptr small = 0;
  ASSERT_EQ(pager_->allocate(0, kPiece, &small), CUDA_SUCCESS);
  EXPECT_EQ(unit_at(small)->first_piece, nullptr) << "one piece's size or less stays whole";
  EXPECT_EQ(pager_->summary()["pieces"]["allocations_made"].get<int>(), 1);
  EXPECT_EQ(pager_->summary()["pieces"]["piece_bytes"].get<std::uint64_t>(), kPiece);
  free_all({p, small});
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

// The rule itself: a word into piece 0 brings pieces 1 to 3 too.
TEST_F(PiecesTest, AWordIntoOnePieceMakesEveryPieceResident) {
  make_pager(64 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::torture));
  CUdeviceptr p = 0, other = 0;
  ASSERT_NO_FATAL_FAILURE(allocate_sent_to_host(kWhole, 7, &p, 9, &other));  // every piece of p on the host
  ASSERT_FALSE(mapped_now(p + 3 * kPiece, kPiece));
  {
    const std::uint64_t word = p + 100;  // into piece 0
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_EQ(access.size(), 4u);
    EXPECT_TRUE(kernel_reads_pattern(p, kWhole, 7)) << "the kernel reads past the piece its word points into";
  }
  {
    const std::uint64_t word = p + 3 * kPiece + 8;  // into the last piece: the first comes too
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_TRUE(kernel_reads_pattern(p, kWhole, 7));
  }
  free_all({p, other});
}

// The same through one level of pointer tables: the table lies in piece 0
// and 1; the word points into it at piece 1, where no table starts.
TEST_F(PiecesTest, ATableThatStartsInAnotherPieceIsStillFollowed) {
  make_pager(64 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::torture));
  CUdeviceptr holder = 0, target = 0;
  ASSERT_EQ(pager_->allocate(0, kWhole, &holder), CUDA_SUCCESS);
  ASSERT_EQ(pager_->allocate(0, kWhole, &target), CUDA_SUCCESS);
  write(target, kWhole, 3);
  // A 3 MiB table from 1 MiB into the holder: its first word points to the
  // target's last piece (the kernel reads all of the target through it).
  std::vector<std::uint64_t> table(3 * kMiB / sizeof(std::uint64_t), 0);
  table[0] = target + 3 * kPiece;
  const CUdeviceptr table_at = holder + 1 * kMiB;
  {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(table_at, 3 * kMiB, nullptr, false, access), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(table_at, table.data(), 3 * kMiB), CUDA_SUCCESS);
  }
  pager_->pointer_tables().uploaded(table_at, table.data(), 3 * kMiB);
  CUdeviceptr other = 0;
  ASSERT_EQ(pager_->allocate(0, kPiece, &other), CUDA_SUCCESS);
  write(other, kPiece, 1);  // torture: the target is on the host now
  ASSERT_FALSE(mapped_now(target, kPiece));
  const std::uint64_t word = holder + 3 * kMiB + 64;  // into the table, in piece 1
  vmm::Access access;
  ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
  EXPECT_EQ(access.size(), 8u) << "the holder's four pieces and the target's four";
  EXPECT_TRUE(kernel_reads_pattern(target, kWhole, 3));
  access.release();
  free_all({holder, target, other});
}

// Copies and memsets touch only their bytes: they bring back only the
// pieces they cover (the win pieces are for).
TEST_F(PiecesTest, ACopyBringsBackOnlyThePiecesItTouches) {
  make_pager(64 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::torture));
  CUdeviceptr p = 0, other = 0;
  ASSERT_NO_FATAL_FAILURE(allocate_sent_to_host(kWhole, 5, &p, 6, &other));
  const std::uint64_t before = counter("bytes_prefetched");
  {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(p + kPiece + 10, kPiece, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_EQ(access.size(), 2u) << "pieces 1 and 2";
    EXPECT_EQ(counter("bytes_prefetched") - before, 2 * kPiece);
    EXPECT_FALSE(mapped_now(p, kPiece));
    EXPECT_FALSE(mapped_now(p + 3 * kPiece, kPiece));
  }
  EXPECT_TRUE(holds(p, kWhole, 5));
  free_all({p, other});
}

// A library call that overwrites [1, 7) MiB of an allocation on the host:
// piece 0 and 3 in part, 1 and 2 whole. The bytes it does not cover come
// back bit-identical in every piece, skipped relative to each piece; a call
// that fails gets every skipped byte back.
class PiecesOverwriteTest : public PiecesTest, public ::testing::WithParamInterface<bool> {};

TEST_P(PiecesOverwriteTest, WhatTheCallDoesNotCoverComesBackInEveryPiece) {
  const bool completed = GetParam();
  make_pager(64 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::torture));
  CUdeviceptr p = 0, other = 0;
  ASSERT_NO_FATAL_FAILURE(allocate_sent_to_host(kWhole, 11, &p, 12, &other));  // p on the host
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(p + 1 * kMiB, 6 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  {
    const std::uint64_t word = p;
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
  }
  EXPECT_EQ(counter("bytes_not_fetched"), 6 * kMiB);
  std::vector<unsigned char> seen(kWhole);
  ASSERT_EQ(cuMemcpyDtoH(seen.data(), p, kWhole), CUDA_SUCCESS);
  for (std::uint64_t i = 0; i < kWhole; ++i) {
    if (i >= 1 * kMiB && i < 7 * kMiB) continue;
    ASSERT_EQ(seen[i], static_cast<unsigned char>(i * 31 + 11)) << "byte " << i << " was not copied back";
  }
  pager_->end_library_call(scope, completed);
  if (!completed) {
    EXPECT_TRUE(holds(p, kWhole, 11)) << "a failed call leaves every piece as it was";
  }
  free_all({p, other});
}

INSTANTIATE_TEST_SUITE_P(CallEnds, PiecesOverwriteTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& test) {
                           return test.param ? "Completed" : "Failed";
                         });

// A library call that overwrites a large allocation whole skips the copy of
// every piece, not only the first few: a 1 GiB output in 32 MiB pieces is 32
// of them (here 24 pieces of 2 MiB).
TEST_F(PiecesTest, ACallThatOverwritesManyPiecesCopiesNoneOfThemIn) {
  constexpr std::uint64_t kLarge = 24 * kPiece;
  make_pager(128 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::torture));
  CUdeviceptr p = 0, other = 0;
  ASSERT_NO_FATAL_FAILURE(allocate_sent_to_host(kLarge, 41, &p, 42, &other));  // p on the host
  const std::uint64_t copied_before = counter("bytes_prefetched");
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(p, kLarge));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  {
    const std::uint64_t word = p;
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
  }
  pager_->end_library_call(scope, true);
  EXPECT_EQ(counter("bytes_not_fetched"), kLarge);
  EXPECT_EQ(counter("bytes_prefetched"), copied_before) << "nothing of it crossed the link";
  free_all({p, other});
}

// Freed while one piece is on its way in and another on its way out: both
// copies are waited for, every chunk and host buffer comes back, and the
// next owner of the chunks sees only its own bytes.
TEST_F(PiecesTest, AFreeWhilePiecesMoveBothWaysReturnsEverything) {
  make_pager(8 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::fast));
  CUdeviceptr p = 0, q = 0;
  ASSERT_EQ(pager_->allocate(0, kWhole, &p), CUDA_SUCCESS);
  write(p, kWhole, 21);
  vmm::Unit* first = unit_at(p);
  vmm::Unit* last = unit_at(p + 3 * kPiece);
  ASSERT_TRUE(pager_->offload_unit(first, false));
  ASSERT_EQ(pager_->allocate(0, kPiece, &q), CUDA_SUCCESS);  // takes the first piece's chunk
  write(q, kPiece, 22);
  ASSERT_EQ(first->state.load(), vmm::Residency::on_host);
  ASSERT_TRUE(pager_->offload_unit(last, false));  // on its way out
  ASSERT_TRUE(pager_->prefetch_unit(first));       // on its way in, into the last piece's chunk
  const std::uint64_t host_before = counter("host_pinned_bytes");
  free_all({p});
  EXPECT_EQ(pager_->resident_bytes(0), kPiece) << "only q";
  EXPECT_LE(counter("host_pinned_bytes"), host_before);
  EXPECT_TRUE(holds(q, kPiece, 22));
  CUdeviceptr r = 0;
  ASSERT_EQ(pager_->allocate(0, 6 * kMiB, &r), CUDA_SUCCESS);  // the chunks p had
  write(r, 6 * kMiB, 23);
  EXPECT_TRUE(holds(r, 6 * kMiB, 23));
  EXPECT_TRUE(holds(q, kPiece, 22));
  free_all({q, r});
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

// An allocation whose pieces cannot all be resident at once could never be
// used by a kernel: refused when it is made, as a whole one is.
TEST_F(PiecesTest, AnAllocationLargerThanTheCapIsRefusedWhenItIsMade) {
  make_pager(6 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::fast));
  CUdeviceptr p = 0;
  EXPECT_EQ(pager_->allocate(0, kWhole, &p), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(pager_->resident_bytes(0), 0u) << "the pieces made before the refusal are gone";
  ASSERT_EQ(pager_->allocate(0, 6 * kMiB, &p), CUDA_SUCCESS) << "and their address space and chunks are reusable";
  write(p, 6 * kMiB, 2);
  EXPECT_TRUE(holds(p, 6 * kMiB, 2));
  free_all({p});
}

// A pin by address (a texture's memory) keeps the whole allocation: with
// it pinned, room for a third buffer can only come from the second.
TEST_F(PiecesTest, APinByAddressKeepsEveryPiece) {
  make_pager(10 * kMiB, std::nullopt, in_pieces(vmm::CheckMode::fast));
  CUdeviceptr p = 0, q = 0, r = 0;
  ASSERT_EQ(pager_->allocate(0, kWhole, &p), CUDA_SUCCESS);
  write(p, kWhole, 31);
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->pin(p + kPiece + 1, &result));
  ASSERT_EQ(result, CUDA_SUCCESS);
  ASSERT_EQ(pager_->allocate(0, kPiece, &q), CUDA_SUCCESS);
  write(q, kPiece, 32);
  ASSERT_EQ(pager_->allocate(0, kPiece, &r), CUDA_SUCCESS);  // p is older, but pinned: q goes
  write(r, kPiece, 33);
  EXPECT_TRUE(kernel_reads_pattern(p, kWhole, 31)) << "every piece still mapped";
  EXPECT_TRUE(pager_->unpin(p + 3 * kPiece));
  EXPECT_TRUE(holds(q, kPiece, 32));  // q back: p's oldest piece goes now
  EXPECT_TRUE(holds(r, kPiece, 33));
  EXPECT_TRUE(holds(p, kWhole, 31)) << "unpinned, it may move, and comes back whole";
  free_all({p, q, r});
}

// Pieces moved by a plan at any moment, between asynchronous writes of
// whole buffers (named by a word, as a kernel names them) and of single
// pieces (a copy, which names only that piece), with the reclaimer running:
// every piece of every buffer keeps the last version written to it.
TEST_F(PiecesTest, PiecesMovedAtAnyMomentBetweenAsynchronousWritesLoseNothing) {
  constexpr unsigned kBuffers = 8, kPieces = 3;  // 24 pieces under a cap of 6
  constexpr std::uint64_t kBytes = kPieces * kPiece;
  make_pager(6 * kPiece, std::nullopt, [](vmm::PagerOptions& options) { options.piece_bytes = kPiece; });
  std::array<CUdeviceptr, kBuffers> buffers{};
  std::array<std::array<vmm::Unit*, kPieces>, kBuffers> units{};
  std::array<std::array<unsigned, kPieces>, kBuffers> version{};
  for (unsigned i = 0; i < kBuffers; ++i) {
    ASSERT_EQ(pager_->allocate(0, kBytes, &buffers[i]), CUDA_SUCCESS);
    write(buffers[i], kBytes, i);
    for (unsigned k = 0; k < kPieces; ++k) {
      units[i][k] = unit_at(buffers[i] + k * kPiece);
      ASSERT_NE(units[i][k], nullptr);
      version[i][k] = i;
    }
  }
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  constexpr unsigned kSources = 6;  // pinned, reused once the stream has drained
  std::array<unsigned char*, kSources> sources{};
  for (auto& source : sources) {
    void* p = nullptr;
    ASSERT_EQ(cuMemAllocHost(&p, kBytes), CUDA_SUCCESS);
    source = static_cast<unsigned char*>(p);
  }
  // Byte b of a piece at version v: the fixture's pattern, offset in the buffer.
  const auto fill = [](unsigned char* out, std::uint64_t offset, std::uint64_t bytes, unsigned v) {
    fill_pattern(out, bytes, v, offset);
  };
  std::mt19937 random(2027);
  unsigned next_source = 0, writes = 0, moves = 0, checks = 0;
  const auto take_source = [&]() {
    if (next_source == kSources) {
      EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
      next_source = 0;
    }
    return sources[next_source++];
  };
  for (int step = 0; step < 300; ++step) {
    const unsigned i = random() % kBuffers, k = random() % kPieces;
    switch (random() % 5) {
      case 0: {  // a kernel writes all of it: named by a word into piece k
        unsigned char* source = take_source();
        const unsigned v = version[i][0] + kBuffers * (step + 1);
        fill(source, 0, kBytes, v);
        const std::uint64_t word = buffers[i] + k * kPiece + 8;
        vmm::Access access;
        ASSERT_EQ(pager_->prepare(&word, 1, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(cuMemcpyHtoDAsync(buffers[i], source, kBytes, stream), CUDA_SUCCESS);
        version[i].fill(v);
        ++writes;
        break;
      }
      case 1: {  // a copy writes piece k alone
        unsigned char* source = take_source();
        const unsigned v = version[i][k] + kBuffers * (step + 1);
        fill(source, k * kPiece, kPiece, v);
        vmm::Access access;
        ASSERT_EQ(pager_->prepare_range(buffers[i] + k * kPiece, kPiece, stream, false, access), CUDA_SUCCESS);
        ASSERT_EQ(access.size(), 1u);
        ASSERT_EQ(cuMemcpyHtoDAsync(buffers[i] + k * kPiece, source, kPiece, stream), CUDA_SUCCESS);
        version[i][k] = v;
        ++writes;
        break;
      }
      case 2:
        moves += pager_->offload_unit(units[i][k], false) ? 1 : 0;
        break;
      case 3:
        moves += pager_->prefetch_unit(units[i][k]) ? 1 : 0;
        break;
      default: {  // the program reads it all, as a kernel would
        ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
        next_source = 0;
        const std::uint64_t word = buffers[i] + k * kPiece;
        vmm::Access access;
        ASSERT_EQ(pager_->prepare(&word, 1, nullptr, false, access), CUDA_SUCCESS);
        std::vector<unsigned char> seen(kBytes), expected(kBytes);
        ASSERT_EQ(cuMemcpyDtoH(seen.data(), buffers[i], kBytes), CUDA_SUCCESS);
        for (unsigned piece = 0; piece < kPieces; ++piece) {
          fill(expected.data() + piece * kPiece, piece * kPiece, kPiece, version[i][piece]);
        }
        ASSERT_EQ(std::memcmp(seen.data(), expected.data(), kBytes), 0) << "buffer " << i << " at step " << step;
        ++checks;
        break;
      }
    }
    ASSERT_LE(physical_bytes_now() - baseline_, cap_) << "the simulator's own count, step " << step;
  }
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_GT(writes, 60u);
  EXPECT_GT(moves, 40u) << "the moves must happen for this test to mean anything";
  EXPECT_GT(checks, 30u);
  for (auto* source : sources) cuMemFreeHost(source);
  cuStreamDestroy(stream);
  for (CUdeviceptr p : buffers) free_all({p});
}

}  // namespace
}  // namespace vgpumem::test
