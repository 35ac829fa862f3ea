// What driver calls cost the host under the calibrated model (the default):
// VMM calls per call and per handle whatever the device does, one driver-wide
// lock for VMM and pinning calls of every thread, pinning per GiB, issuing
// work a few microseconds, released memory scrubbed on a copy engine. And the
// idle model, kept for side-by-side runs, charging none of that.
#include <thread>

#include "sim_test_support.h"

namespace {

using namespace simtest;

void nothing(void**, const vgpusimLaunch*, void*) {}

class HostCosts : public Simulator {
 protected:
  void SetUp() override {
    Simulator::SetUp();
    ASSERT_EQ(vgpusimSetCostModel("calibrated"), CUDA_SUCCESS);
    // Past whatever an earlier test booked on the driver's lock (a thread
    // ahead of this one books the lock in this thread's future).
    vgpusimHostHandoff(vgpusimHostTimeNs() + 10'000'000);
  }
  void TearDown() override { EXPECT_EQ(vgpusimSetCostModel("calibrated"), CUDA_SUCCESS); }

  // Microseconds the calling thread spent in `call`.
  template <class Call>
  static double us_of(Call&& call) {
    const unsigned long long before = vgpusimHostTimeNs();
    call();
    return static_cast<double>(vgpusimHostTimeNs() - before) / 1000.0;
  }

  // `count` handles of `bytes` each, mapped one after another into `va`.
  std::vector<CUmemGenericAllocationHandle> map_handles(CUdeviceptr va, std::size_t count, std::size_t bytes) {
    const CUmemAllocationProp prop = device_memory();
    std::vector<CUmemGenericAllocationHandle> handles(count);
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_EQ(cuMemCreate(&handles[i], bytes, &prop, 0), CUDA_SUCCESS);
      EXPECT_EQ(cuMemMap(va + i * bytes, bytes, 0, handles[i], 0), CUDA_SUCCESS);
    }
    return handles;
  }
};

// What the H200 paid per 2 MiB handle to bring a unit back during training:
// its maps and one set-access over the unit, 77-109 µs per handle; unmapping
// it in one call 33-41 µs per handle (docs/results.md).
TEST_F(HostCosts, AUnitOfSmallHandlesCostsWhatTheH200PaidPerHandle) {
  constexpr std::size_t kHandles = 16;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, kHandles * 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  const CUmemAllocationProp prop = device_memory();
  std::vector<CUmemGenericAllocationHandle> handles(kHandles);
  for (auto& handle : handles) ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  const CUmemAccessDesc access = read_write();
  const double map_us = us_of([&] {
    for (std::size_t i = 0; i < kHandles; ++i) ASSERT_EQ(cuMemMap(va + i * 2 * kMiB, 2 * kMiB, 0, handles[i], 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemSetAccess(va, kHandles * 2 * kMiB, &access, 1), CUDA_SUCCESS);
  });
  EXPECT_NEAR(map_us, kHandles * (10.1 + 78.6) + 30.0, 0.01);
  EXPECT_GE(map_us / kHandles, 77.0);
  EXPECT_LE(map_us / kHandles, 109.0);
  const double unmap_us = us_of([&] { ASSERT_EQ(cuMemUnmap(va, kHandles * 2 * kMiB), CUDA_SUCCESS); });
  EXPECT_NEAR(unmap_us, 20.0 + kHandles * 39.0, 0.01);
  EXPECT_GE(unmap_us / kHandles, 33.0);
  EXPECT_LE(unmap_us / kHandles, 41.0);
  for (auto handle : handles) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, kHandles * 2 * kMiB), CUDA_SUCCESS);
}

// The same 32 MiB as one handle: one map, one handle under the set-access.
TEST_F(HostCosts, OneLargeHandleCostsAFractionOfManySmallOnes) {
  CUdeviceptr small_va = 0, large_va = 0;
  ASSERT_EQ(cuMemAddressReserve(&small_va, 32 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&large_va, 32 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  std::vector<CUmemGenericAllocationHandle> small, large;
  const CUmemAccessDesc access = read_write();
  const double small_us = us_of([&] {
    small = map_handles(small_va, 16, 2 * kMiB);
    ASSERT_EQ(cuMemSetAccess(small_va, 32 * kMiB, &access, 1), CUDA_SUCCESS);
  });
  const double large_us = us_of([&] {
    large = map_handles(large_va, 1, 32 * kMiB);
    ASSERT_EQ(cuMemSetAccess(large_va, 32 * kMiB, &access, 1), CUDA_SUCCESS);
  });
  EXPECT_LT(large_us * 10, small_us) << "per handle, not per byte: " << large_us << " against " << small_us;
  for (CUdeviceptr va : {small_va, large_va}) ASSERT_EQ(cuMemUnmap(va, 32 * kMiB), CUDA_SUCCESS);
  for (auto handle : small) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  for (auto handle : large) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

// The calibrated cost does not depend on the device being busy: the H200 was
// always busy during training, and the cost stayed when it briefly was not.
TEST_F(HostCosts, AMapCostsTheSameWhetherTheDeviceWorksOrNot) {
  CUfunction spin = register_kernel("host_costs_spin_10ms", nothing, {}, 10'000'000);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  const auto map_us = [&] {
    const double us = us_of([&] { ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS); });
    EXPECT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
    return us;
  };
  const double idle = map_us();
  ASSERT_EQ(launch(spin, nullptr, {}), CUDA_SUCCESS);
  const double busy = map_us();
  EXPECT_NEAR(idle, 10.1, 0.01);
  EXPECT_NEAR(busy, 10.1, 0.01);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 2 * kMiB), CUDA_SUCCESS);
}

// Two threads creating at the same simulated time: the second waits for the
// first, whichever thread that is. A call that comes later in real time but
// earlier in simulated time takes an earlier gap.
TEST_F(HostCosts, VmmCallsOfAllThreadsQueueBehindOneDriverLock) {
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle mine = 0, theirs = 0;
  const unsigned long long start = vgpusimHostTimeNs();
  unsigned long long theirs_done = 0;
  std::thread other([&] {
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    vgpusimHostHandoff(start);
    ASSERT_EQ(cuMemCreate(&theirs, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
    theirs_done = vgpusimHostTimeNs();
  });
  other.join();
  EXPECT_NEAR(static_cast<double>(theirs_done - start) / 1000.0, 70.8, 0.01) << "the lock was free";
  const double mine_us = us_of([&] { ASSERT_EQ(cuMemCreate(&mine, 2 * kMiB, &prop, 0), CUDA_SUCCESS); });
  EXPECT_NEAR(mine_us, 2 * 70.8, 0.01) << "waited for the other thread's call, then made its own";

  // A thread far ahead books the lock in its future; one behind still gets
  // the gap before it.
  CUmemGenericAllocationHandle ahead = 0, behind = 0;
  const unsigned long long now = vgpusimHostTimeNs();
  std::thread later([&] {
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    vgpusimHostHandoff(now + 1'000'000);
    ASSERT_EQ(cuMemCreate(&ahead, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  });
  later.join();
  const double behind_us = us_of([&] { ASSERT_EQ(cuMemCreate(&behind, 2 * kMiB, &prop, 0), CUDA_SUCCESS); });
  EXPECT_NEAR(behind_us, 70.8, 0.01) << "the call 1 ms later does not hold this one up";
  for (auto handle : {mine, theirs, ahead, behind}) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
}

// Pinning: 0.24 s per GiB as the H200's pager paid, registering half of it,
// both behind the driver's lock.
TEST_F(HostCosts, PinningHostMemoryCostsPerGiB) {
  void* pinned = nullptr;
  const double alloc_us = us_of([&] { ASSERT_EQ(cuMemHostAlloc(&pinned, 64 * kMiB, 0), CUDA_SUCCESS); });
  EXPECT_NEAR(alloc_us, 10.0 + 0.24e6 / 16, 0.5);
  std::vector<char> pageable(64 * kMiB);
  const double register_us =
      us_of([&] { ASSERT_EQ(cuMemHostRegister(pageable.data(), pageable.size(), 0), CUDA_SUCCESS); });
  EXPECT_NEAR(register_us, 10.0 + 0.12e6 / 16, 0.5);
  ASSERT_EQ(cuMemHostUnregister(pageable.data()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
}

TEST_F(HostCosts, IssuingWorkCostsTheIssuingThread) {
  CUfunction quick = register_kernel("host_costs_quick", nothing, {}, 1000);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent timed = nullptr, untimed = nullptr;
  ASSERT_EQ(cuEventCreate(&timed, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  CUdeviceptr device = 0;
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAlloc(&device, 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemHostAlloc(&pinned, 4096, 0), CUDA_SUCCESS);
  EXPECT_NEAR(us_of([&] { ASSERT_EQ(launch(quick, stream, {}), CUDA_SUCCESS); }), 3.0, 0.01);
  EXPECT_NEAR(us_of([&] { ASSERT_EQ(cuMemcpyHtoDAsync(device, pinned, 4096, stream), CUDA_SUCCESS); }), 3.0, 0.01);
  EXPECT_NEAR(us_of([&] { ASSERT_EQ(cuEventRecord(timed, stream), CUDA_SUCCESS); }), 2.5, 0.01);
  EXPECT_NEAR(us_of([&] { ASSERT_EQ(cuEventRecord(untimed, stream), CUDA_SUCCESS); }), 0.25, 0.01);
  EXPECT_NEAR(us_of([&] { ASSERT_EQ(cuStreamWaitEvent(stream, timed, 0), CUDA_SUCCESS); }), 1.5, 0.01);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuEventDestroy(timed), CUDA_SUCCESS);
  ASSERT_EQ(cuEventDestroy(untimed), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(device), CUDA_SUCCESS);
}

// Device memory given back is scrubbed by a copy engine before it is handed
// out again: an upload issued right after a 64 MiB release waits for it.
TEST_F(HostCosts, ReleasedMemoryIsScrubbedOnTheCopyEngine) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr device = 0;
  void* pinned = nullptr;
  ASSERT_EQ(cuMemAlloc(&device, 4096), CUDA_SUCCESS);
  ASSERT_EQ(cuMemHostAlloc(&pinned, 4096, 0), CUDA_SUCCESS);
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  const unsigned long long released = vgpusimHostTimeNs();
  ASSERT_EQ(cuMemcpyHtoDAsync(device, pinned, 4096, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  const double scrub_us = 64.0 * kMiB / 1000.0 / 1000.0;  // at 1 TB/s
  EXPECT_GE(static_cast<double>(vgpusimHostTimeNs() - released) / 1000.0, scrub_us)
      << "the upload waited for the scrub";
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(device), CUDA_SUCCESS);
}

// Each thread's VMM and pinning calls are counted on it, with the time they
// took it: what a program's launch thread spent on paging, from the driver.
TEST_F(HostCosts, EachThreadsDriverCallsAreCountedOnIt) {
  unsigned long long vmm_before = 0, pin_before = 0, ns_before = 0;
  vgpusimThreadDriverCalls(&vmm_before, &pin_before, &ns_before);
  const CUmemAllocationProp prop = device_memory();
  std::thread other([&] {
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    CUmemGenericAllocationHandle handle = 0;
    ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
    unsigned long long vmm = 0;
    vgpusimThreadDriverCalls(&vmm, nullptr, nullptr);
    EXPECT_EQ(vmm, 2u) << "the other thread's own";
  });
  other.join();
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  const auto handles = map_handles(va, 1, 2 * kMiB);
  const CUmemAccessDesc access = read_write();
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, 2 * kMiB, 0), CUDA_SUCCESS);
  unsigned long long vmm = 0, pin = 0, ns = 0;
  vgpusimThreadDriverCalls(&vmm, &pin, &ns);
  EXPECT_EQ(vmm - vmm_before, 4u) << "reserve, create, map, set-access: not the other thread's two";
  EXPECT_EQ(pin - pin_before, 1u);
  // Its calls, and the wait for the driver's lock behind the other thread's
  // create and release, which started at this thread's time.
  EXPECT_NEAR(static_cast<double>(ns - ns_before) / 1000.0,
              (0.5 + 70.8 + 10.1 + 30.0 + 78.6 + 10.0 + 0.24e6 / 512) + (70.8 + 34.6), 0.5);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  for (auto handle : handles) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
}

// The idle model charges the H100's idle medians per call and nothing for
// pinning, issuing or scrubbing.
TEST_F(HostCosts, TheIdleModelChargesOnlyTheIdleMedians) {
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 32 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  std::vector<CUmemGenericAllocationHandle> handles;
  const CUmemAccessDesc access = read_write();
  const double map_us = us_of([&] {
    handles = map_handles(va, 16, 2 * kMiB);
    ASSERT_EQ(cuMemSetAccess(va, 32 * kMiB, &access, 1), CUDA_SUCCESS);
  });
  // 16 creates and maps at 2 MiB, one set-access at 32 MiB (46.7 + 12/44 of the way to 49.5).
  EXPECT_NEAR(map_us, 16 * (12.5 + 1.0) + 46.7 + (49.5 - 46.7) * 12.0 / 44.0, 0.01);
  void* pinned = nullptr;
  EXPECT_EQ(us_of([&] { ASSERT_EQ(cuMemHostAlloc(&pinned, 64 * kMiB, 0), CUDA_SUCCESS); }), 0.0);
  ASSERT_EQ(cuMemUnmap(va, 32 * kMiB), CUDA_SUCCESS);
  for (auto handle : handles) ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  EXPECT_EQ(vgpusimSetCostModel("fast"), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  simtest::g_self = argv[0];
  return RUN_ALL_TESTS();
}
