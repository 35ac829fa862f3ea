// cuMemFree's wait (Pager::wait_for_program_work, vmm/program_streams.h):
// the program's work on every kind of stream is done when a free returns,
// and the pager's own copies queued behind it are not waited for.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"
#include "vgpusim.h"

namespace vgpumem::test {
namespace {

constexpr double kKernelNs = 1e6;  // far longer than any VMM call a free makes

// A kernel that names nothing and runs for a millisecond of simulated time.
CUfunction long_kernel() {
  static CUfunction function = [] {
    vgpusimKernelDesc desc{};
    desc.name = "free_barrier_test_busy";
    desc.body = [](void**, const vgpusimLaunch*, void*) {};
    desc.durationNs = kKernelNs;
    CUfunction f = nullptr;
    EXPECT_EQ(vgpusimRegisterKernel(&desc, &f), CUDA_SUCCESS);
    return f;
  }();
  return function;
}

class FreeBarrierTest : public PagerTest {
 protected:
  // Frees `p` and says whether it succeeded.
  bool free(CUdeviceptr p) {
    CUresult result = CUDA_ERROR_UNKNOWN;
    return pager_->free(p, &result) && result == CUDA_SUCCESS;
  }
  std::uint64_t frees_waiting(const char* how) {
    return pager_->summary()["frees_waiting"][how].get<std::uint64_t>();
  }
};

// An offload of 32 MiB is on the copy-out stream when the program frees
// something else: the free returns long before that copy ends, which a
// context synchronise would have waited for.
TEST_F(FreeBarrierTest, AFreeDoesNotWaitForThePagersOwnCopies) {
  make_pager(64 * kMiB, std::nullopt, [](vmm::PagerOptions& options) { options.grace_operations = 0; });
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr big = 0, small = 0;
  ASSERT_EQ(pager_->allocate(0, 32 * kMiB, &big), CUDA_SUCCESS);
  write(big, 32 * kMiB, 1);
  vmm::Unit* unit = catcher.last;
  ASSERT_NE(unit, nullptr);
  ASSERT_EQ(pager_->allocate(0, kChunk, &small), CUDA_SUCCESS);
  write(small, kChunk, 2);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  pager_->set_access_feed(nullptr);

  ASSERT_TRUE(pager_->offload_unit(unit, false));
  const double before = static_cast<double>(vgpusimHostTimeNs());
  ASSERT_TRUE(free(small));
  const double freed = static_cast<double>(vgpusimHostTimeNs());
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const double saved = static_cast<double>(vgpusimHostTimeNs());
  EXPECT_LT(freed - before, (saved - before) / 4)
      << "the free waited for the offload (" << (freed - before) / 1e3 << " us of " << (saved - before) / 1e3
      << " us)";
  EXPECT_EQ(frees_waiting("for_program_streams"), 1u);
  EXPECT_EQ(frees_waiting("for_whole_contexts"), 0u);
  EXPECT_TRUE(holds(big, 32 * kMiB, 1));
  ASSERT_TRUE(free(big));
}

// The streams a program's work may be on when it frees: each kind is done
// when the free returns.
enum class StreamKind { legacy, per_thread, blocking, non_blocking, unlisted_non_blocking };

std::string name_of(const testing::TestParamInfo<StreamKind>& info) {
  switch (info.param) {
    case StreamKind::legacy: return "Legacy";
    case StreamKind::per_thread: return "PerThread";
    case StreamKind::blocking: return "Blocking";
    case StreamKind::non_blocking: return "NonBlocking";
    case StreamKind::unlisted_non_blocking: return "UnlistedNonBlocking";
  }
  return "Unknown";
}

class FreeBarrierStreamTest : public FreeBarrierTest, public testing::WithParamInterface<StreamKind> {};

TEST_P(FreeBarrierStreamTest, AFreeReturnsOnlyOnceTheProgramsWorkIsDone) {
  make_pager(64 * kMiB);
  CUstream stream = nullptr;
  switch (GetParam()) {
    case StreamKind::legacy: stream = CU_STREAM_LEGACY; break;
    case StreamKind::per_thread: stream = CU_STREAM_PER_THREAD; break;
    case StreamKind::blocking:
      ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_DEFAULT), CUDA_SUCCESS);
      pager_->stream_created(stream, CU_STREAM_DEFAULT);
      break;
    case StreamKind::non_blocking:
      ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
      pager_->stream_created(stream, CU_STREAM_NON_BLOCKING);
      break;
    case StreamKind::unlisted_non_blocking:  // made as a green context's stream is: the pager cannot list it
      ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
      pager_->stream_created(stream, CU_STREAM_NON_BLOCKING, false);
      break;
  }
  CUdeviceptr p = 0;
  ASSERT_EQ(pager_->allocate(0, kChunk, &p), CUDA_SUCCESS);
  write(p, kChunk, 3);
  ASSERT_EQ(cuLaunchKernel(long_kernel(), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY) << "the kernel runs for a millisecond";
  ASSERT_TRUE(free(p));
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS) << "the free returned with the program's kernel still running";
  const bool listed = GetParam() != StreamKind::unlisted_non_blocking;
  EXPECT_EQ(frees_waiting("for_program_streams"), listed ? 1u : 0u);
  EXPECT_EQ(frees_waiting("for_whole_contexts"), listed ? 0u : 1u);
  if (GetParam() == StreamKind::blocking || GetParam() == StreamKind::non_blocking ||
      GetParam() == StreamKind::unlisted_non_blocking) {
    pager_->stream_destroyed(stream);
    ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryStreamKind, FreeBarrierStreamTest,
                         testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::blocking,
                                         StreamKind::non_blocking, StreamKind::unlisted_non_blocking),
                         name_of);

// A non-blocking stream no hook saw made, which has done paged work, is
// waited for too: the registry named it at that work.
TEST_F(FreeBarrierTest, AStreamNoHookSawMadeIsWaitedForOnceItNamedPagedMemory) {
  make_pager(64 * kMiB);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);  // the pager is not told
  CUdeviceptr used = 0, freed = 0;
  ASSERT_EQ(pager_->allocate(0, kChunk, &used), CUDA_SUCCESS);
  ASSERT_EQ(pager_->allocate(0, kChunk, &freed), CUDA_SUCCESS);
  {
    vmm::Access access;
    const std::uint64_t word = used;
    ASSERT_EQ(pager_->prepare(&word, 1, stream, false, access), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel(long_kernel(), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
  ASSERT_TRUE(free(freed));
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS) << "the free returned with the unlisted stream's kernel running";
  EXPECT_EQ(frees_waiting("for_program_streams"), 1u);
  ASSERT_TRUE(free(used));
  pager_->stream_destroyed(stream);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

// A unit a kernel on a per-thread default stream wrote is saved after that
// kernel, ordered on the device (an event on the legacy stream, which the
// per-thread stream, a blocking one, has reached), not by synchronising the
// context on the host: the offload returns at once and the bytes saved are
// the kernel's.
TEST_F(FreeBarrierTest, AnOffloadOfWhatAPerThreadStreamWroteWaitsOnTheDeviceForIt) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  make_pager(2 * kChunk, std::nullopt, [](vmm::PagerOptions& options) { options.grace_operations = 0; });
  UnitCatcher catcher;
  pager_->set_access_feed(&catcher);
  CUdeviceptr p = 0;  // named by the per-thread stream alone (the legacy stream's event would cover it)
  ASSERT_EQ(pager_->allocate(0, kChunk, &p), CUDA_SUCCESS);
  static const size_t sizes[] = {sizeof(CUdeviceptr)};
  vgpusimKernelDesc desc{};
  desc.name = "free_barrier_test_write_pattern_5";
  desc.body = [](void** params, const vgpusimLaunch*, void*) {
    unsigned char* out = nullptr;
    std::memcpy(&out, params[0], sizeof out);
    fill_pattern(out, kChunk, 5);
  };
  desc.paramCount = 1;
  desc.paramSizes = sizes;
  desc.durationNs = kKernelNs;
  CUfunction writer = nullptr;
  ASSERT_EQ(vgpusimRegisterKernel(&desc, &writer), CUDA_SUCCESS);
  {
    vmm::Access access;
    const std::uint64_t word = p;
    ASSERT_EQ(pager_->prepare(&word, 1, CU_STREAM_PER_THREAD, false, access), CUDA_SUCCESS);
    void* params[] = {&p};
    // Behind a millisecond of other work: the kernel writes long after the offload is issued.
    ASSERT_EQ(cuLaunchKernel(long_kernel(), 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, nullptr, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel(writer, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, params, nullptr), CUDA_SUCCESS);
  }
  vmm::Unit* unit = catcher.last;
  pager_->set_access_feed(nullptr);
  ASSERT_NE(unit, nullptr);
  const double before = static_cast<double>(vgpusimHostTimeNs());
  ASSERT_TRUE(pager_->offload_unit(unit, false));
  const double issued = static_cast<double>(vgpusimHostTimeNs());
  EXPECT_LT(issued - before, kKernelNs / 4) << "the offload waited on the host for the kernel";
  EXPECT_EQ(pager_->summary()["context_synchronizations"].get<std::uint64_t>(), 0u);
  // Its chunk goes to another unit, so what comes back is what was saved.
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  CUdeviceptr q = 0;
  ASSERT_EQ(pager_->allocate(0, 2 * kChunk, &q), CUDA_SUCCESS);
  write(q, 2 * kChunk, 6);
  EXPECT_TRUE(holds(p, kChunk, 5)) << "the save did not wait for the kernel that wrote the unit";
  EXPECT_TRUE(holds(q, 2 * kChunk, 6));
  ASSERT_TRUE(free(p));
  ASSERT_TRUE(free(q));
}

std::uint64_t listed(const vmm::Pager& pager) {
  return pager.summary()["frees_waiting"]["streams_listed"].get<std::uint64_t>();
}

// Only non-blocking streams are listed (the legacy stream reaches the
// others), and one destroyed is no longer: the driver may give its handle
// to the next stream made, even to the pager's own copy stream.
TEST_F(FreeBarrierTest, OnlyLiveNonBlockingStreamsAreListed) {
  make_pager(64 * kMiB);
  CUstream blocking = nullptr, first = nullptr, second = nullptr;
  ASSERT_EQ(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
  pager_->stream_created(blocking, CU_STREAM_DEFAULT);
  EXPECT_EQ(listed(*pager_), 0u);
  ASSERT_EQ(cuStreamCreate(&first, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  pager_->stream_created(first, CU_STREAM_NON_BLOCKING);
  ASSERT_EQ(cuStreamCreate(&second, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  pager_->stream_created(second, CU_STREAM_NON_BLOCKING);
  EXPECT_EQ(listed(*pager_), 2u);
  for (CUstream stream : {first, blocking}) {
    pager_->stream_destroyed(stream);
    ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  }
  EXPECT_EQ(listed(*pager_), 1u);
  pager_->stream_destroyed(second);
  ASSERT_EQ(cuStreamDestroy(second), CUDA_SUCCESS);
  EXPECT_EQ(listed(*pager_), 0u);
  EXPECT_TRUE(pager_->summary()["frees_waiting"]["every_stream_listed"].get<bool>());
}

}  // namespace
}  // namespace vgpumem::test
