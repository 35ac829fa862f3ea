// The simulated driver's timeline: streams are asynchronous, work lands when
// the host waits for it, the legacy default stream synchronises implicitly,
// per-thread default streams are per thread, engines overlap as the H100's,
// and an illegal access surfaces at synchronisation.
#include <atomic>
#include <cmath>
#include <thread>

#include "sim_test_support.h"

extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void*, size_t, CUstream);
}

namespace {

using namespace simtest;

constexpr std::size_t kLinkBytes = 55'000'000;  // 1 ms at 55 GB/s

// out[0] = in[0], at the kernel's start.
void read_body(void** params, const vgpusimLaunch*, void*) {
  *param<int*>(params, 0) = *param<const int*>(params, 1);
}
// p[0] += add.
void add_body(void** params, const vgpusimLaunch*, void*) { *param<int*>(params, 0) += param<int>(params, 1); }

class Timeline : public Simulator {
 protected:
  void SetUp() override {
    Simulator::SetUp();
    static CUfunction read = register_kernel("timeline_read", read_body, {8, 8}, 1000);
    static CUfunction add_1ms = register_kernel("timeline_add_1ms", add_body, {8, 4}, 1'000'000);
    read_ = read;
    add_1ms_ = add_1ms;
    ASSERT_EQ(cuMemAlloc(&buffer_, kLinkBytes), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&out_, 4), CUDA_SUCCESS);
    ASSERT_EQ(cuMemHostAlloc(&pinned_, kLinkBytes, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&non_blocking_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&blocking_, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    reset(1);
  }
  void TearDown() override {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamDestroy(non_blocking_), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamDestroy(blocking_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFreeHost(pinned_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(out_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(buffer_), CUDA_SUCCESS);
  }
  // The device buffer holds `device_value`, the pinned buffer 5; nothing pending.
  void reset(int device_value) {
    ASSERT_EQ(cuMemsetD32(buffer_, static_cast<unsigned>(device_value), kLinkBytes / 4), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    static_cast<int*>(pinned_)[0] = 5;
  }
  // A 1 ms copy of the pinned buffer (5) into the device buffer, on `stream`.
  void copy_in(CUstream stream) {
    ASSERT_EQ(cuMemcpyHtoDAsync(buffer_, pinned_, kLinkBytes, stream), CUDA_SUCCESS);
  }
  // What the read kernel saw, once the whole context is idle.
  int seen() {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    int value = 0;
    EXPECT_EQ(cuMemcpyDtoH(&value, out_, 4), CUDA_SUCCESS);
    return value;
  }
  CUresult read_on(CUstream stream) { return launch(read_, stream, {&out_, &buffer_}); }
  // The clock of another thread once it has synchronised with `stream`.
  unsigned long long clock_of_a_thread_that_waits_for(CUstream stream) {
    unsigned long long waited_until = 0;
    std::thread waiter([&] {
      ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
      ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
      waited_until = vgpusimHostTimeNs();
    });
    waiter.join();
    return waited_until;
  }

  CUfunction read_ = nullptr, add_1ms_ = nullptr;
  CUdeviceptr buffer_ = 0, out_ = 0;
  void* pinned_ = nullptr;
  CUstream non_blocking_ = nullptr, blocking_ = nullptr;
};

TEST_F(Timeline, KernelThatDoesNotWaitForACopyReadsTheOldBytes) {
  CUstream other = nullptr;
  ASSERT_EQ(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  copy_in(non_blocking_);
  ASSERT_EQ(read_on(other), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 1) << "no ordering between independent streams";

  reset(1);
  CUevent copied = nullptr;
  ASSERT_EQ(cuEventCreate(&copied, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  copy_in(non_blocking_);
  ASSERT_EQ(cuEventRecord(copied, non_blocking_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(other, copied, 0), CUDA_SUCCESS);
  ASSERT_EQ(read_on(other), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 5) << "the event orders the kernel after the copy";
  ASSERT_EQ(cuEventDestroy(copied), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(other), CUDA_SUCCESS);
}

TEST_F(Timeline, LegacyStreamSynchronisesWithBlockingStreamsOnly) {
  copy_in(blocking_);
  ASSERT_EQ(read_on(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 5) << "the legacy stream waits for a blocking stream";
  reset(1);
  copy_in(non_blocking_);
  ASSERT_EQ(read_on(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 1) << "but not for a non-blocking one";
  reset(1);
  copy_in(nullptr);
  ASSERT_EQ(read_on(blocking_), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 5) << "a blocking stream waits for the legacy stream";
  reset(1);
  copy_in(CU_STREAM_LEGACY);
  ASSERT_EQ(read_on(non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 1) << "a non-blocking one does not";
  unsigned flags = 99;
  ASSERT_EQ(cuStreamGetFlags(non_blocking_, &flags), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
}

TEST_F(Timeline, PerThreadDefaultStreamsBelongToTheirThread) {
  auto on_thread = [this](auto&& body) {
    std::thread t([&] {
      ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
      body();
    });
    t.join();
  };
  on_thread([&] { ASSERT_EQ(cuMemcpyHtoDAsync_v2_ptsz(buffer_, pinned_, kLinkBytes, nullptr), CUDA_SUCCESS); });
  on_thread([&] {
    void* params[] = {&out_, &buffer_};
    ASSERT_EQ(cuLaunchKernel_ptsz(read_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  });
  EXPECT_EQ(seen(), 1) << "another thread's default stream is another stream";
  reset(1);
  on_thread([&] { ASSERT_EQ(cuMemcpyHtoDAsync_v2_ptsz(buffer_, pinned_, kLinkBytes, CU_STREAM_PER_THREAD), CUDA_SUCCESS); });
  ASSERT_EQ(read_on(CU_STREAM_LEGACY), CUDA_SUCCESS);
  EXPECT_EQ(seen(), 5) << "a per-thread stream is blocking: the legacy stream waits for it";
}

TEST_F(Timeline, AThreadThatWaitsDelaysOnlyItself) {
  const unsigned long long before = vgpusimHostTimeNs();
  int one = 1;
  ASSERT_EQ(launch(add_1ms_, non_blocking_, {&out_, &one}), CUDA_SUCCESS);
  const unsigned long long waited_until = clock_of_a_thread_that_waits_for(non_blocking_);
  EXPECT_GE(waited_until - before, 1'000'000u) << "the waiting thread is at the kernel's end";
  EXPECT_LT(vgpusimHostTimeNs() - before, 100'000u) << "the launching thread ran on meanwhile";
  ASSERT_EQ(cuStreamSynchronize(non_blocking_), CUDA_SUCCESS);
  EXPECT_GE(vgpusimHostTimeNs() - before, 1'000'000u) << "and waits itself when it synchronises";
}

// A framework hands backward to another thread and waits for it (PyTorch's
// autograd engine): the time it waited is carried across by hand, as the
// simulator cannot see the mutex, and only forward, never back.
TEST_F(Timeline, AHandoffCarriesAThreadsClockToAnother) {
  int one = 1;
  ASSERT_EQ(launch(add_1ms_, non_blocking_, {&out_, &one}), CUDA_SUCCESS);
  const unsigned long long worker_done = clock_of_a_thread_that_waits_for(non_blocking_);
  const unsigned long long mine = vgpusimHostTimeNs();
  ASSERT_LT(mine, worker_done) << "the worker waited, this thread did not";
  vgpusimHostHandoff(worker_done);
  EXPECT_EQ(vgpusimHostTimeNs(), worker_done) << "the handoff moves the clock to the worker's";
  vgpusimHostHandoff(mine);
  EXPECT_EQ(vgpusimHostTimeNs(), worker_done) << "and never back";
}

TEST_F(Timeline, CopyEnginesOverlapAcrossDirectionsAndWithCompute) {
  CUdeviceptr second = 0;
  void* pinned_second = nullptr;
  ASSERT_EQ(cuMemAlloc(&second, kLinkBytes), CUDA_SUCCESS);
  ASSERT_EQ(cuMemHostAlloc(&pinned_second, kLinkBytes, 0), CUDA_SUCCESS);
  auto elapsed_ms = [](auto&& issue) {
    const unsigned long long before = vgpusimHostTimeNs();
    issue();
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return static_cast<double>(vgpusimHostTimeNs() - before) / 1e6;
  };
  EXPECT_NEAR(elapsed_ms([&] {
                ASSERT_EQ(cuMemcpyHtoDAsync(buffer_, pinned_, kLinkBytes, non_blocking_), CUDA_SUCCESS);
                ASSERT_EQ(cuMemcpyDtoHAsync(pinned_second, second, kLinkBytes, blocking_), CUDA_SUCCESS);
              }),
              1.0, 0.01)
      << "H2D and D2H run on their own engines";
  EXPECT_NEAR(elapsed_ms([&] {
                ASSERT_EQ(cuMemcpyHtoDAsync(buffer_, pinned_, kLinkBytes, non_blocking_), CUDA_SUCCESS);
                ASSERT_EQ(cuMemcpyHtoDAsync(second, pinned_second, kLinkBytes, blocking_), CUDA_SUCCESS);
              }),
              2.0, 0.01)
      << "two copies in one direction share its engine";
  EXPECT_NEAR(elapsed_ms([&] {
                int one = 1;
                ASSERT_EQ(launch(add_1ms_, non_blocking_, {&out_, &one}), CUDA_SUCCESS);
                ASSERT_EQ(cuMemcpyHtoDAsync(buffer_, pinned_, kLinkBytes, blocking_), CUDA_SUCCESS);
              }),
              1.0, 0.01)
      << "compute does not slow copies";
  ASSERT_EQ(cuMemFreeHost(pinned_second), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(second), CUDA_SUCCESS);
}

TEST_F(Timeline, HostWaitsFollowCudaSynchronisationRules) {
  ASSERT_EQ(cuMemsetD32(out_, 9, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  auto* host = static_cast<int*>(pinned_);
  host[0] = 0;
  ASSERT_EQ(cuMemcpyDtoHAsync(host, out_, 4, non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(host[0], 0) << "an async copy into pinned memory lands later";
  ASSERT_EQ(cuStreamSynchronize(non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(host[0], 9);

  int pageable = 0;
  ASSERT_EQ(cuMemcpyDtoHAsync(&pageable, out_, 4, non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(pageable, 9) << "an async copy into pageable memory returns when done";

  int source = 3;
  ASSERT_EQ(cuMemcpyHtoD(out_, &source, 4), CUDA_SUCCESS);
  source = 4;  // a pageable source is staged: the caller may reuse it at once
  int back = 0;
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&back, out_, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 3);

  host[0] = 6;
  ASSERT_EQ(cuMemcpyHtoDAsync(out_, host, 4, non_blocking_), CUDA_SUCCESS);
  host[0] = 8;  // a pinned source is read when the copy runs
  ASSERT_EQ(cuStreamSynchronize(non_blocking_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&back, out_, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 8);
}

TEST_F(Timeline, EventsMeasureAndOrderWork) {
  // The clock's mechanics, exactly: the idle model charges no host time per call.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(cuEventCreate(&start, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&end, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  int one = 1;
  ASSERT_EQ(cuEventRecord(start, non_blocking_), CUDA_SUCCESS);
  ASSERT_EQ(launch(add_1ms_, non_blocking_, {&out_, &one}), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(end, non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(end), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(non_blocking_), CUDA_ERROR_NOT_READY);
  ASSERT_EQ(cuEventSynchronize(end), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(end), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(non_blocking_), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime(&ms, start, end), CUDA_SUCCESS);
  EXPECT_NEAR(ms, 1.0, 1e-3);
  ASSERT_EQ(cuEventDestroy(start), CUDA_SUCCESS);
  ASSERT_EQ(cuEventDestroy(end), CUDA_SUCCESS);
}

TEST_F(Timeline, HostFunctionRunsInStreamOrder) {
  struct Seen {
    CUdeviceptr buffer;
    std::atomic<int> value{0};
  } seen_by_host{buffer_, {}};
  copy_in(non_blocking_);
  ASSERT_EQ(cuLaunchHostFunc(
                non_blocking_,
                [](void* data) {
                  auto* s = static_cast<Seen*>(data);
                  s->value = *reinterpret_cast<const int*>(s->buffer);  // device memory is host memory here
                },
                &seen_by_host),
            CUDA_SUCCESS);
  EXPECT_EQ(seen_by_host.value, 0) << "not yet run";
  ASSERT_EQ(cuStreamSynchronize(non_blocking_), CUDA_SUCCESS);
  EXPECT_EQ(seen_by_host.value, 5) << "after the copy ahead of it";
}

TEST_F(Timeline, FreeWaitsForTheWorkThatUsesTheMemory) {
  CUdeviceptr scratch = 0;
  ASSERT_EQ(cuMemAlloc(&scratch, 4), CUDA_SUCCESS);
  int one = 1;
  ASSERT_EQ(launch(add_1ms_, non_blocking_, {&scratch, &one}), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(scratch), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS) << "cuMemFree synchronises: the kernel ran on live memory";
}

TEST_F(Timeline, UnmapAfterSynchronisingIsSafe) {
  const CUmemAllocationProp prop = device_memory();
  const CUmemAccessDesc access = read_write();
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  int one = 1;
  ASSERT_EQ(launch(add_1ms_, non_blocking_, {&va, &one}), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(non_blocking_), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 2 * kMiB), CUDA_SUCCESS);
}

// The idle model (host_costs_test.cpp tests the calibrated one).
TEST_F(Timeline, VmmCallsCostWhatTheyCostOnAnIdleH100UnderTheIdleModel) {
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);
  const CUmemAllocationProp prop = device_memory();
  const CUmemAccessDesc access = read_write();
  // gpu-facts §8.6, µs: create/map/set-access/unmap/release for 2 and 64 MiB.
  const std::pair<std::size_t, double> expected[] = {{2 * kMiB, 12.5 + 1.0 + 26.9 + 18.6 + 12.9},
                                                     {64 * kMiB, 33.7 + 1.4 + 49.5 + 29.3 + 46.4}};
  for (const auto& [bytes, cycle_us] : expected) {
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle handle = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, bytes, 0, 0, 0), CUDA_SUCCESS);
    const unsigned long long before = vgpusimHostTimeNs();
    ASSERT_EQ(cuMemCreate(&handle, bytes, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemMap(va, bytes, 0, handle, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemSetAccess(va, bytes, &access, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuMemUnmap(va, bytes), CUDA_SUCCESS);
    ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
    EXPECT_NEAR(static_cast<double>(vgpusimHostTimeNs() - before) / 1000.0, cycle_us, 0.01) << bytes;
    ASSERT_EQ(cuMemAddressFree(va, bytes), CUDA_SUCCESS);
  }
}

TEST(TimelineProcess, UnmapUnderARunningKernelFaultsAtSynchronisation) {
  EXPECT_EQ(run_child("unmap_under_kernel"), 0);
}

// VGPUSIM_MAP_BUSY_US (idle model): a map while the device works costs what the H200
// showed under training (per handle), an idle map what the H100 took idle.
TEST(TimelineProcess, MappingWhileTheDeviceWorksCostsWhatItIsSetTo) {
  EXPECT_EQ(run_child("map_while_busy", {"VGPUSIM_MAP_BUSY_US=90", "VGPUSIM_COST_MODEL=idle"}), 0);
}

TEST(TimelineProcess, KernelDurationsScaleWithTheKernelTimeScale) {
  EXPECT_EQ(run_child("kernel_time_scale", {"VGPUSIM_KERNEL_TIME_SCALE=2.5", "VGPUSIM_COST_MODEL=idle"}), 0);
  EXPECT_EQ(run_child("kernel_time_scale", {"VGPUSIM_KERNEL_TIME_SCALE=0"}), 2) << "refused before anything runs";
}

// ---- child scenarios (exit 0 on success) -------------------------------------------------
int child_map_while_busy() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUfunction spin = register_kernel("child_spin_10ms", add_body, {8, 4}, 10'000'000);
  const CUmemAllocationProp prop = device_memory();
  CUdeviceptr va = 0, data = 0;
  CUmemGenericAllocationHandle handle = 0;
  if (cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0) || cuMemCreate(&handle, 2 * kMiB, &prop, 0) ||
      cuMemAlloc(&data, 4096)) {
    return 11;
  }
  const auto map_costs_us = [&] {
    const unsigned long long before = vgpusimHostTimeNs();
    if (cuMemMap(va, 2 * kMiB, 0, handle, 0) != CUDA_SUCCESS) return -1.0;
    const double us = static_cast<double>(vgpusimHostTimeNs() - before) / 1000.0;
    return cuMemUnmap(va, 2 * kMiB) == CUDA_SUCCESS ? us : -1.0;
  };
  if (std::abs(map_costs_us() - 1.0) > 0.01) return 12;  // idle: the H100's median
  int one = 1;
  if (launch(spin, nullptr, {&data, &one})) return 13;
  if (std::abs(map_costs_us() - 90.0) > 0.01) return 14;  // while the kernel runs
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 15;
  if (std::abs(map_costs_us() - 1.0) > 0.01) return 16;  // idle again
  return 0;
}

// A 1 ms kernel under VGPUSIM_KERNEL_TIME_SCALE=2.5 takes 2.5 ms.
int child_kernel_time_scale() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUfunction add = register_kernel("child_scaled_1ms", add_body, {8, 4}, 1'000'000);
  CUdeviceptr data = 0;
  if (cuMemAlloc(&data, 4096)) return 11;
  CUevent start = nullptr, end = nullptr;
  if (cuEventCreate(&start, 0) || cuEventCreate(&end, 0)) return 12;
  int one = 1;
  if (cuEventRecord(start, nullptr) || launch(add, nullptr, {&data, &one}) || cuEventRecord(end, nullptr)) return 13;
  float ms = 0;
  if (cuEventSynchronize(end) || cuEventElapsedTime(&ms, start, end)) return 14;
  return std::abs(ms - 2.5f) < 1e-3f ? 0 : 15;
}

int child_unmap_under_kernel() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUfunction add = register_kernel("child_add_1ms", add_body, {8, 4}, 1'000'000);
  const CUmemAllocationProp prop = device_memory();
  const CUmemAccessDesc access = read_write();
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  if (cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0) || cuMemCreate(&handle, 2 * kMiB, &prop, 0) ||
      cuMemMap(va, 2 * kMiB, 0, handle, 0) || cuMemSetAccess(va, 2 * kMiB, &access, 1)) {
    return 11;
  }
  CUstream stream = nullptr;
  if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) return 12;
  int one = 1;
  // Queue two kernels: the second starts after the unmap below, as a kernel
  // that is still queued or running when the host unmaps.
  if (launch(add, stream, {&va, &one}) || launch(add, stream, {&va, &one})) return 13;
  if (cuMemUnmap(va, 2 * kMiB) != CUDA_SUCCESS) return 14;  // unmap does not wait (H100, gpu-facts 8.6c)
  if (cuStreamSynchronize(stream) != CUDA_ERROR_ILLEGAL_ADDRESS) return 15;
  if (cuCtxSynchronize() != CUDA_ERROR_ILLEGAL_ADDRESS) return 16;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 3 && std::string(argv[1]) == "--child") {
    const std::string name = argv[2];
    if (name == "unmap_under_kernel") return child_unmap_under_kernel();
    if (name == "map_while_busy") return child_map_while_busy();
    if (name == "kernel_time_scale") return child_kernel_time_scale();
    return 99;
  }
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
