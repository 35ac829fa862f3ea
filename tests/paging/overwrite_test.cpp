// Library calls that overwrite what they name (vmm/library_call_scope.h): a unit
// on the host that such a call covers comes back without the covered bytes
// copied in, everything else of it bit-identical, and a call that fails gets
// the skipped bytes back wherever the unit is by then.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"
#include "vmm/library_call_scope.h"

namespace vgpumem::test {
namespace {

class OverwriteTest : public PagerTest {
 protected:
  // Three 4 MiB buffers under an 8 MiB cap, holding patterns 0, 1, 2: the
  // first is on the host.
  void SetUp() override {
    make_pager(8 * kMiB);
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 4 * kMiB));
    ASSERT_FALSE(mapped_now(buffers_[0], 4 * kMiB) && summary()["offloads"].get<int>() == 0);
  }
  nlohmann::json summary() const { return pager_->summary(); }
  std::uint64_t counter(const char* name) const { return summary()[name].get<std::uint64_t>(); }
  // What a kernel of the call does when it is launched: names its output.
  void launch_naming(CUdeviceptr address, std::uint64_t bytes) {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(address, bytes, nullptr, false, access), CUDA_SUCCESS);
  }
  // Whether [address, address + bytes) of buffer `buffer` holds its pattern
  // (the fixture's: byte i of the buffer is i * 31 + seed).
  bool holds_part(unsigned buffer, std::uint64_t offset, std::uint64_t bytes) {
    std::vector<unsigned char> data(bytes);
    vmm::Access access;
    EXPECT_EQ(pager_->prepare_range(buffers_[buffer] + offset, bytes, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoH(data.data(), buffers_[buffer] + offset, bytes), CUDA_SUCCESS);
    return has_pattern(data.data(), bytes, buffer, offset);
  }
  void scribble(CUdeviceptr address, std::uint64_t bytes) {
    const std::vector<unsigned char> garbage(bytes, 0xee);
    ASSERT_EQ(cuMemcpyHtoD(address, garbage.data(), bytes), CUDA_SUCCESS);
  }

  std::vector<CUdeviceptr> buffers_ = std::vector<CUdeviceptr>(3);
};

TEST_F(OverwriteTest, ABufferACallOverwritesWholeIsNotCopiedIn) {
  const std::uint64_t copied_before = counter("bytes_prefetched");
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(buffers_[0], 4 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  launch_naming(buffers_[0], 4 * kMiB);
  pager_->end_library_call(scope, true);
  EXPECT_EQ(counter("bytes_not_fetched"), 4 * kMiB);
  EXPECT_EQ(counter("overwritten_fetches"), 1u);
  EXPECT_EQ(counter("bytes_prefetched"), copied_before) << "nothing of it crossed the link";
  EXPECT_TRUE(mapped_now(buffers_[0], 4 * kMiB)) << "resident, for the call to write";
}

// The control: with no scope, the same launch copies the whole unit in.
TEST_F(OverwriteTest, WithoutAScopeTheWholeUnitIsCopiedIn) {
  const std::uint64_t copied_before = counter("bytes_prefetched");
  launch_naming(buffers_[0], 4 * kMiB);
  EXPECT_EQ(counter("bytes_not_fetched"), 0u);
  EXPECT_EQ(counter("bytes_prefetched"), copied_before + 4 * kMiB);
  EXPECT_TRUE(holds_part(0, 0, 4 * kMiB));
}

TEST_F(OverwriteTest, WhatTheCallDoesNotCoverComesBackBitIdentical) {
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(buffers_[0] + 1 * kMiB + 4096, 2 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  launch_naming(buffers_[0], 4 * kMiB);
  pager_->end_library_call(scope, true);
  EXPECT_EQ(counter("bytes_not_fetched"), 2 * kMiB);
  EXPECT_TRUE(holds_part(0, 0, 1 * kMiB + 4096)) << "the bytes before the covered range";
  EXPECT_TRUE(holds_part(0, 3 * kMiB + 4096, kMiB - 4096)) << "the bytes after it";
}

TEST_F(OverwriteTest, ACallThatFailsGetsTheSkippedBytesBack) {
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(buffers_[0], 4 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  launch_naming(buffers_[0], 4 * kMiB);
  scribble(buffers_[0] + kMiB, 4096);  // it wrote a little, then failed
  pager_->end_library_call(scope, false);
  EXPECT_EQ(counter("overwrites_restored"), 1u);
  EXPECT_TRUE(holds_part(0, 0, 4 * kMiB));
}

TEST_F(OverwriteTest, ACallThatFailsAfterItsBufferWentBackToTheHostStillGetsItsBytesBack) {
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(buffers_[0], 4 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  launch_naming(buffers_[0], 4 * kMiB);
  scope.range_count = 0;  // the call's other launches name only the others
  launch_naming(buffers_[1], 4 * kMiB);
  launch_naming(buffers_[2], 4 * kMiB);  // the cap sends the first back to the host
  ASSERT_GE(counter("offloads"), 3u);
  pager_->end_library_call(scope, false);
  EXPECT_TRUE(holds_part(0, 0, 4 * kMiB));
  EXPECT_TRUE(holds_part(1, 0, 4 * kMiB));
  EXPECT_TRUE(holds_part(2, 0, 4 * kMiB));
}

TEST_F(OverwriteTest, AnotherThreadsLaunchCopiesEverythingIn) {
  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(buffers_[0], 4 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(scope));
  std::thread other([&] {
    CUcontext context = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    launch_naming(buffers_[0], 4 * kMiB);
  });
  other.join();
  pager_->end_library_call(scope, true);
  EXPECT_EQ(counter("bytes_not_fetched"), 0u);
  EXPECT_TRUE(holds_part(0, 0, 4 * kMiB));
}

TEST_F(OverwriteTest, OneScopeAThread) {
  vmm::LibraryCallScope outer, inner;
  ASSERT_TRUE(outer.add(buffers_[0], 4 * kMiB));
  ASSERT_TRUE(inner.add(buffers_[1], 4 * kMiB));
  ASSERT_TRUE(pager_->begin_library_call(outer));
  EXPECT_FALSE(pager_->begin_library_call(inner)) << "a library calling another inside its call";
  pager_->end_library_call(inner, true);  // ignored: never opened
  launch_naming(buffers_[0], 4 * kMiB);
  pager_->end_library_call(outer, true);
  EXPECT_EQ(counter("bytes_not_fetched"), 4 * kMiB);
  vmm::LibraryCallScope empty;
  EXPECT_FALSE(pager_->begin_library_call(empty)) << "nothing to overwrite, no call to tag";
}


// A unit brought into the room of a large save, part of it skipped for a
// call that overwrites it, comes back in pieces (vmm/pager.cpp,
// copy_in_except): a piece wholly skipped is not copied, but the unit's
// `ready`, after which the call writes it, must still come after the save
// of that piece's chunks. Here y's second half is skipped; it lands on x's
// last piece, whose save ends at 457 us behind a copy of the program's;
// the call's memset, ordered only after y's first chunk came in (343 us),
// would land first and the save would read it.
class OverwritePiecesTest : public PagerTest {};

TEST_F(OverwritePiecesTest, APieceTheCallOverwritesWholeStillWaitsForTheSaveOfItsChunks) {
  make_pager(8 * kChunk, std::nullopt, [](vmm::PagerOptions& options) {
    options.grace_operations = 0;
    options.reclaimer = false;  // it would wait for the save and make it run early
  });
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr x = 0, y = 0, busy = 0;
  ASSERT_EQ(pager_->allocate(0, 8 * kChunk, &y), CUDA_SUCCESS);
  write(y, 8 * kChunk, 5);
  ASSERT_EQ(pager_->allocate(0, 8 * kChunk, &x), CUDA_SUCCESS);  // y goes out to make room
  write(x, 8 * kChunk, 3);
  vmm::Unit* unit_x = catcher.last;
  pager_->set_access_feed(nullptr);
  ASSERT_EQ(cuMemAlloc(&busy, 4 * kChunk), CUDA_SUCCESS);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 4 * kChunk), CUDA_SUCCESS);
  CUstream program = nullptr;
  ASSERT_EQ(cuStreamCreate(&program, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(pinned, busy, 4 * kChunk, program), CUDA_SUCCESS);  // 152 us of the copy-out engine
  ASSERT_TRUE(pager_->offload_unit(unit_x, false));  // two pieces, 152-305 and 305-457 us

  vmm::LibraryCallScope scope;
  ASSERT_TRUE(scope.add(y + kChunk, 7 * kChunk));  // all of y but its first chunk
  ASSERT_TRUE(pager_->begin_library_call(scope));
  vmm::Access access;
  ASSERT_EQ(pager_->prepare_range(y, 8 * kChunk, nullptr, false, access), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(y + kChunk, 0xee, 7 * kChunk, nullptr), CUDA_SUCCESS);  // the call writes its output
  access.release();
  pager_->end_library_call(scope, true);

  EXPECT_TRUE(holds(x, 8 * kChunk, 3)) << "the call wrote over x's chunks before x's save read them";
  ASSERT_EQ(cuStreamDestroy(program), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(busy), CUDA_SUCCESS);
}

}  // namespace
}  // namespace vgpumem::test
