// Checking modes in process (VGPUMEM_CHECK): strict reuses an offloaded
// unit's chunks only once its range is unmapped; fast (the control) lets the
// next owner use them while the old range still maps them; torture offloads
// everything an operation does not name before it runs.
#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"

namespace vgpumem::test {
namespace {

// Each mode without the reclaimer thread, so nothing unmaps behind the test;
// `grace`: VGPUMEM_GRACE_LAUNCHES (off unless a test is about it), the
// blanket grace's (lending has its own tests, lending_test.cpp).
auto with(vmm::CheckMode mode, std::uint32_t grace = 0) {
  return [mode, grace](vmm::PagerOptions& options) {
    options.check = mode;
    options.reclaimer = false;
    options.grace_operations = grace;
    options.grace = vmm::GraceKind::blanket;
  };
}

// Three 2 MiB buffers under a 4 MiB cap: the third takes the first's chunk.
class CheckModeTest : public PagerTest {
 protected:
  void fill_three(vmm::CheckMode mode) {
    make_pager(4 * kMiB, std::nullopt, with(mode));
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));
  }
  void free_all() {
    CUresult result = CUDA_ERROR_UNKNOWN;
    for (CUdeviceptr p : buffers_) {
      EXPECT_TRUE(pager_->free(p, &result));
      EXPECT_EQ(result, CUDA_SUCCESS);
    }
  }
  std::vector<CUdeviceptr> buffers_ = std::vector<CUdeviceptr>(3);
};

TEST_F(CheckModeTest, StrictReusesChunksOnlyOnceTheOffloadedRangeIsUnmapped) {
  ASSERT_NO_FATAL_FAILURE(fill_three(vmm::CheckMode::strict));
  EXPECT_FALSE(mapped_now(buffers_[0], 2 * kMiB)) << "an access no hook saw must fault, not read the third buffer";
  expect_held(buffers_, 2 * kMiB);
  EXPECT_LE(ledger_->usage(0).peak, 4 * kMiB);
  free_all();
}

// The control: the same sequence in the fast order leaves the first range
// mapped on the chunk the third buffer now owns.
TEST_F(CheckModeTest, FastLetsTheNextOwnerUseAChunkTheOldRangeStillMaps) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  ASSERT_NO_FATAL_FAILURE(fill_three(vmm::CheckMode::fast));
  ASSERT_TRUE(mapped_now(buffers_[0], 2 * kMiB)) << "unmapped before the save was reaped";
  std::vector<unsigned char> seen(2 * kMiB);
  ASSERT_EQ(cuMemcpyDtoH(seen.data(), buffers_[0], seen.size()), CUDA_SUCCESS);
  EXPECT_EQ(seen[1], static_cast<unsigned char>(31 + 2)) << "the first range reads the third buffer's bytes";
  expect_held(buffers_, 2 * kMiB);
  free_all();
}

TEST_F(CheckModeTest, TortureOffloadsEverythingAnOperationDoesNotName) {
  make_pager(16 * kMiB, std::nullopt, with(vmm::CheckMode::torture));
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));  // all fit
  {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(buffers_[1], 2 * kMiB, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_TRUE(mapped_now(buffers_[1], 2 * kMiB));
    EXPECT_FALSE(mapped_now(buffers_[0], 2 * kMiB));
    EXPECT_FALSE(mapped_now(buffers_[2], 2 * kMiB));
  }
  {
    // A launch naming no paged memory at all: it may reach any of it unseen.
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(nullptr, 0, nullptr, false, access), CUDA_SUCCESS);
    for (CUdeviceptr p : buffers_) EXPECT_FALSE(mapped_now(p, 2 * kMiB));
  }
  expect_held(buffers_, 2 * kMiB);
  free_all();
}

// The grace (vmm/launch_grace.h): what an operation named stays through the
// next K operations on its stream, even under torture; then it goes.
TEST_F(CheckModeTest, TortureKeepsWhatTheLastKOperationsOfTheStreamNamed) {
  constexpr std::uint32_t kGrace = 2;
  make_pager(16 * kMiB, std::nullopt, with(vmm::CheckMode::torture, kGrace));
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));
  auto touch = [&](CUdeviceptr p) {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(p, 2 * kMiB, nullptr, false, access), CUDA_SUCCESS);
  };
  // Writing the three buffers was operations 1 to 3 on the legacy stream.
  touch(buffers_[0]);  // 4: the producer
  touch(buffers_[1]);  // 5
  EXPECT_TRUE(mapped_now(buffers_[0], 2 * kMiB)) << "1 operation later";
  EXPECT_TRUE(mapped_now(buffers_[2], 2 * kMiB)) << "2 operations later";
  touch(buffers_[2]);  // 6
  EXPECT_TRUE(mapped_now(buffers_[0], 2 * kMiB)) << "2 operations later";
  touch(buffers_[1]);  // 7
  EXPECT_FALSE(mapped_now(buffers_[0], 2 * kMiB)) << "3 operations later: past the grace, torture took it";
  EXPECT_TRUE(mapped_now(buffers_[2], 2 * kMiB));
  // Another stream counts its own operations: it neither ends nor extends
  // the grace of the first.
  CUstream other = nullptr;
  ASSERT_EQ(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  touch(buffers_[0]);  // 8: buffers_[1] is 1 back, buffers_[2] 2 back
  for (int i = 0; i < 3; ++i) {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(nullptr, 0, other, false, access), CUDA_SUCCESS);  // names nothing
  }
  EXPECT_TRUE(mapped_now(buffers_[1], 2 * kMiB)) << "three operations on another stream do not end its grace";
  EXPECT_TRUE(mapped_now(buffers_[2], 2 * kMiB));
  EXPECT_TRUE(mapped_now(buffers_[0], 2 * kMiB));
  ASSERT_EQ(cuStreamDestroy(other), CUDA_SUCCESS);
  expect_held(buffers_, 2 * kMiB);
  EXPECT_EQ(pager_->summary()["grace"]["evictions_inside"].get<int>(), 0);
  free_all();
}

// When only units in their grace are left to take, one goes anyway (the cap
// holds; the trace counts it): least recently used first.
TEST_F(CheckModeTest, TheGraceGivesWayWhenNothingElseCanMakeRoom) {
  make_pager(4 * kMiB, std::nullopt, with(vmm::CheckMode::fast, 8));
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));  // the third needs one of the others' room
  EXPECT_GE(pager_->summary()["grace"]["evictions_inside"].get<int>(), 1);
  EXPECT_LE(ledger_->usage(0).peak, 4 * kMiB);
  expect_held(buffers_, 2 * kMiB);
  free_all();
}

}  // namespace
}  // namespace vgpumem::test
