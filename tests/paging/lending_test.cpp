// Lending (vmm/table_lending.h), in the pager: a consumer that names a small
// cell its producer named a few operations before is lent what the producer
// named, made resident and held with its own. Under torture everything an
// operation does not hold goes to the host before it, so what is mapped
// while the consumer holds its units is exactly what it was lent.
#include <array>
#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kTarget = 4 * kMiB;  // larger than the 2 MiB small allocations lending looks in
constexpr std::uint64_t kTable = 64;         // a pointer table: slabbed with the other small allocations

class LendingTest : public PagerTest {
 protected:
  // Torture, no reclaimer, a window of `window` operations; `adjust` changes
  // the rest.
  void make(std::uint64_t cap, std::uint32_t window,
            const std::function<void(vmm::PagerOptions&)>& adjust = {}) {
    make_pager(cap, std::nullopt, [&](vmm::PagerOptions& options) {
      options.check = vmm::CheckMode::torture;
      options.reclaimer = false;
      options.grace = vmm::GraceKind::lend;
      options.grace_operations = window;
      if (adjust) adjust(options);
    });
  }
  // A launch whose parameters are `words`, on `stream`, held while `inside`
  // runs (as the launch itself would be enqueued).
  void launch(std::initializer_list<std::uint64_t> words, CUstream stream = nullptr,
              const std::function<void()>& inside = {}) {
    const std::vector<std::uint64_t> params(words);
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(params.data(), params.size(), stream, false, access), CUDA_SUCCESS);
    if (inside) inside();
  }
  const nlohmann::json grace() { return pager_->summary()["grace"]; }

  std::array<CUdeviceptr, 2> targets_{};
  std::array<CUdeviceptr, 1> table_{}, other_{};
};

// The pair PyTorch's batched linear algebra makes: a kernel writes a table
// of the targets' addresses, one launch comes between, and the consumer is
// given only the table. It is lent both targets: mapped while it runs.
TEST_F(LendingTest, AConsumerNamingTheProducersSmallTableIsLentItsTargets) {
  make(64 * kMiB, 8);
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  ASSERT_NO_FATAL_FAILURE(allocate_written(other_, kTarget));
  launch({table_[0], targets_[0], targets_[1]});  // the producer
  launch({other_[0]});                            // torture sends the targets out here
  EXPECT_FALSE(mapped_now(targets_[0], kTarget)) << "not lent to an operation that does not name the table";
  launch({table_[0] + 8}, nullptr, [&] {  // the consumer, given the table (a pointer into its cell)
    EXPECT_TRUE(mapped_now(targets_[0], kTarget)) << "lent, and brought back for the consumer";
    EXPECT_TRUE(mapped_now(targets_[1], kTarget));
  });
  EXPECT_EQ(grace()["lendings"].get<int>(), 1) << grace().dump();
  EXPECT_EQ(grace()["lent_units"].get<int>(), 2) << grace().dump();
  expect_held(targets_, kTarget);
}

// The rule broken on purpose: with the table's allocation not small
// (VGPUMEM_LEND_MAX_BYTES below the slabs), nothing is lent, and the
// consumer runs with its table's targets on the host.
TEST_F(LendingTest, ATableOutsideTheSmallAllocationsLendsNothing) {
  make(64 * kMiB, 8, [](vmm::PagerOptions& options) { options.lend_max_bytes = 512; });
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  launch({table_[0], targets_[0], targets_[1]});
  launch({table_[0]}, nullptr, [&] { EXPECT_FALSE(mapped_now(targets_[0], kTarget)); });
  EXPECT_EQ(grace()["lendings"].get<int>(), 0);
}

// Two operations sharing a large buffer (a layer's output read by the next,
// a shared workspace) lend each other nothing: that is what lets a schedule
// send a unit out as its last use is enqueued.
TEST_F(LendingTest, OperationsSharingALargeBufferLendNothing) {
  make(64 * kMiB, 8);
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(other_, kTarget));
  launch({other_[0], targets_[0]});
  launch({other_[0]}, nullptr, [&] { EXPECT_FALSE(mapped_now(targets_[0], kTarget)); });
  EXPECT_EQ(grace()["lendings"].get<int>(), 0);
}

// The window: a consumer more than K operations after the producer on its
// stream, or on another stream, is lent nothing; K operations after, it is.
TEST_F(LendingTest, OnlyTheLastKOperationsOfTheConsumersStreamLend) {
  make(64 * kMiB, 2);
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  ASSERT_NO_FATAL_FAILURE(allocate_written(other_, kTarget));
  launch({table_[0], targets_[0]});  // producer
  launch({other_[0]});
  launch({table_[0]}, nullptr, [&] { EXPECT_TRUE(mapped_now(targets_[0], kTarget)) << "2 operations on: lent"; });
  launch({table_[0] + 16, targets_[1]});  // a second producer
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  launch({table_[0]}, stream, [&] { EXPECT_FALSE(mapped_now(targets_[1], kTarget)) << "another stream's"; });
  launch({other_[0]});
  launch({other_[0]});
  launch({table_[0]}, nullptr, [&] { EXPECT_FALSE(mapped_now(targets_[1], kTarget)) << "3 operations on"; });
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  expect_held(targets_, kTarget);
}

// What the consumer was lent cannot be resident beside its own under the
// cap: it goes without (counted) rather than fail with out of memory.
TEST_F(LendingTest, LentUnitsThatCannotFitAreLeftOutAndTheOperationRuns) {
  make(12 * kMiB, 8);
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  std::array<CUdeviceptr, 2> own{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(own, kTarget));
  launch({table_[0], targets_[0], targets_[1]});
  launch({table_[0], own[0], own[1]});  // 2 + 8 MiB of its own, 8 more lent: over 12
  EXPECT_EQ(grace()["lent_left_out"].get<int>(), 1) << grace().dump();
  EXPECT_EQ(pager_->summary()["ooms"].get<int>(), 0);
  expect_held(own, kTarget);
}

// A producer naming more paged words than a slot keeps cannot be lent
// whole: its units keep the blanket grace's stamp instead, so torture
// leaves all of them on the device through the next K operations.
TEST_F(LendingTest, AProducerWithMoreWordsThanKeptFallsBackToTheBlanketGrace) {
  make(128 * kMiB, 8);
  std::array<CUdeviceptr, vmm::TableLending::kWords + 2> many{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(many, kMiB * 4));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  std::vector<std::uint64_t> words{table_[0]};
  words.insert(words.end(), many.begin(), many.end());
  {
    vmm::Access access;
    ASSERT_EQ(pager_->prepare(words.data(), words.size(), nullptr, false, access), CUDA_SUCCESS);
  }
  launch({table_[0]}, nullptr, [&] {
    for (const CUdeviceptr p : many) EXPECT_TRUE(mapped_now(p, kMiB * 4));
  });
  EXPECT_EQ(grace()["lendings"].get<int>(), 0) << "stamped, not lent";
  expect_held(many, kMiB * 4);
}

// A target freed between producer and consumer is looked up again when
// lent: it names nothing, and the consumer runs.
TEST_F(LendingTest, ATargetFreedInBetweenIsNotLent) {
  make(64 * kMiB, 8);
  ASSERT_NO_FATAL_FAILURE(allocate_written(targets_, kTarget));
  ASSERT_NO_FATAL_FAILURE(allocate_written(table_, kTable));
  launch({table_[0], targets_[0], targets_[1]});
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->free(targets_[0], &result));
  ASSERT_EQ(result, CUDA_SUCCESS);
  launch({table_[0]}, nullptr, [&] { EXPECT_TRUE(mapped_now(targets_[1], kTarget)); });
  EXPECT_EQ(grace()["lent_units"].get<int>(), 1) << grace().dump();
  EXPECT_TRUE(holds(targets_[1], kTarget, 1));
}

}  // namespace
}  // namespace vgpumem::test

namespace vgpumem::test {
namespace {

// Room another launch holds only until it is enqueued (its own units, and
// what it was lent) is waited for: a launch that finds the cap full of held
// units gets its room once they are let go, not an out-of-memory error.
TEST_F(LendingTest, ALaunchWaitsForRoomAnotherLaunchHoldsInsteadOfFailing) {
  make(8 * kMiB, 8, [](vmm::PagerOptions& options) { options.check = vmm::CheckMode::fast; });
  std::array<CUdeviceptr, 3> buffers{};
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kTarget));  // the third pushed the first out
  std::atomic<bool> held{false}, done{false};
  std::thread holder([&] {
    CUcontext context = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    vmm::Access access;  // the first two, held as a launch between its check and its enqueue holds them
    const std::vector<std::uint64_t> words{buffers[0], buffers[1]};
    EXPECT_EQ(pager_->prepare(words.data(), words.size(), nullptr, false, access), CUDA_SUCCESS);
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(done.load()) << "the other launch did not wait";
  });
  while (!held.load()) std::this_thread::yield();
  const std::vector<std::uint64_t> third{buffers[2]};
  vmm::Access access;
  EXPECT_EQ(pager_->prepare(third.data(), third.size(), nullptr, false, access), CUDA_SUCCESS);
  done = true;
  holder.join();
  EXPECT_EQ(pager_->summary()["ooms"].get<int>(), 0);
}

}  // namespace
}  // namespace vgpumem::test
