// The pager in process, on the simulated driver: allocations beyond the cap,
// offload and fetch bit-identical at the same address, packing, the host
// limit, and the physical bytes the simulator itself counts.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <span>
#include <thread>
#include <chrono>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "pager_fixture.h"
#include "sim_driver_ops.h"
#include "trace/recorder.h"
#include "vgpusim.h"
#include "vmm/pager.h"

namespace vgpumem::test {
namespace {

TEST_F(PagerTest, ThreeTimesTheCapComesBackBitIdenticalAtTheSameAddress) {
  make_pager(8 * kMiB);
  std::vector<CUdeviceptr> buffers(6);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, 4 * kMiB));
  for (int round = 0; round < 2; ++round) {
    expect_held(buffers, 4 * kMiB);
  }
  const nlohmann::json summary = pager_->summary();
  EXPECT_GE(summary["offloads"].get<int>(), 10);
  EXPECT_EQ(summary["bytes_offloaded"].get<std::uint64_t>(), summary["offloads"].get<std::uint64_t>() * 4 * kMiB);
  EXPECT_LE(ledger_->usage(0).peak, 8 * kMiB);
  EXPECT_EQ(summary["devices"][0]["resident_bytes_peak"].get<std::uint64_t>(), 8 * kMiB) << "two 4 MiB buffers at once";
  for (CUdeviceptr p : buffers) {
    CUresult result = CUDA_ERROR_UNKNOWN;
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

TEST_F(PagerTest, SmallAllocationsShareAChunk) {
  make_pager(64 * kMiB);
  std::vector<CUdeviceptr> small(100);
  for (unsigned i = 0; i < small.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 512, &small[i]), CUDA_SUCCESS);
    EXPECT_EQ(small[i] % 512, 0u);
    write(small[i], 512, i);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 2 * kMiB) << "100 buffers of 512 bytes in one 2 MiB chunk";
  for (unsigned i = 0; i < small.size(); ++i) EXPECT_TRUE(holds(small[i], 512, i));
  CUresult result = CUDA_SUCCESS;
  EXPECT_TRUE(pager_->free(small[0] + 8, &result));
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE) << "not the start of an allocation";
  for (CUdeviceptr p : small) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

TEST_F(PagerTest, FreedSmallAllocationsLeaveHolesTheNextOnesReuse) {
  make_pager(64 * kMiB);
  // Two slabs' worth of 1 KiB buffers; then every other one is freed.
  std::vector<CUdeviceptr> small(4096);
  for (unsigned i = 0; i < small.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 1000, &small[i]), CUDA_SUCCESS);
    write(small[i], 1000, i);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 4 * kMiB);
  CUresult result = CUDA_SUCCESS;
  for (unsigned i = 0; i < small.size(); i += 2) ASSERT_TRUE(pager_->free(small[i], &result));
  // Half the room is free again, in 1 KiB holes: 2048 more buffers fit.
  for (unsigned i = 0; i < small.size(); i += 2) {
    ASSERT_EQ(pager_->allocate(0, 900, &small[i]), CUDA_SUCCESS);
    write(small[i], 900, i + 7);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 4 * kMiB) << "the holes were reused: no third slab";
  for (unsigned i = 0; i < small.size(); ++i) {
    EXPECT_TRUE(i % 2 == 0 ? holds(small[i], 900, i + 7) : holds(small[i], 1000, i)) << i;
  }
  // Freeing neighbours merges their holes: a buffer twice the size fits.
  ASSERT_TRUE(pager_->free(small[0], &result));
  ASSERT_TRUE(pager_->free(small[1], &result));
  CUdeviceptr merged = 0;
  ASSERT_EQ(pager_->allocate(0, 2048, &merged), CUDA_SUCCESS);
  EXPECT_EQ(merged, small[0]) << "first fit, in the merged hole";
  EXPECT_EQ(pager_->resident_bytes(0), 4 * kMiB);
  ASSERT_TRUE(pager_->free(merged, &result));
  for (unsigned i = 2; i < small.size(); ++i) ASSERT_TRUE(pager_->free(small[i], &result));
  EXPECT_EQ(pager_->resident_bytes(0), 0u) << "empty slabs are released";
}

TEST_F(PagerTest, HostLimitEndsInOutOfMemoryAndKeepsWhatIsStored) {
  make_pager(4 * kMiB, 4 * kMiB);
  // 8 MiB of room, less one unit kept free to swap through: three units.
  std::vector<CUdeviceptr> buffers(3);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, 2 * kMiB));
  CUdeviceptr extra = 0;
  EXPECT_EQ(pager_->allocate(0, 2 * kMiB, &extra), CUDA_ERROR_OUT_OF_MEMORY)
      << "4 MiB on the device and 4 MiB on the host are full";
  expect_held(buffers, 2 * kMiB);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : buffers) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

TEST_F(PagerTest, PinnedUnitsStayAndAFullyPinnedCapIsOutOfMemory) {
  make_pager(4 * kMiB);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &a), CUDA_SUCCESS);
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &b), CUDA_SUCCESS);
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->pin(a, &result));
  ASSERT_TRUE(pager_->pin(b, &result));
  EXPECT_EQ(pager_->allocate(0, 2 * kMiB, &c), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_TRUE(pager_->unpin(b));
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &c), CUDA_SUCCESS) << "b can go to the host now";
  for (CUdeviceptr p : {a, b, c}) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

TEST_F(PagerTest, StreamOrderedFreeWaitsForTheWorkAheadOfIt) {
  make_pager(64 * kMiB);
  const size_t sizes[] = {sizeof(CUdeviceptr)};
  vgpusimKernelDesc desc{};
  desc.name = "pager_test_touch";
  desc.body = [](void** params, const vgpusimLaunch*, void*) {
    int* p = nullptr;
    std::memcpy(&p, params[0], sizeof p);
    *p = 42;
  };
  desc.paramCount = 1;
  desc.paramSizes = sizes;
  desc.durationNs = 1e6;
  CUfunction touch = nullptr;
  ASSERT_EQ(vgpusimRegisterKernel(&desc, &touch), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(pager_->allocate(0, 4 * kMiB, &p), CUDA_SUCCESS);
  {
    vmm::Access access;
    const std::uint64_t word = p;
    ASSERT_EQ(pager_->prepare(&word, 1, stream, false, access), CUDA_SUCCESS);
    void* params[] = {&p};
    ASSERT_EQ(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  }
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->free_async(p, stream, false, &result));
  EXPECT_EQ(result, CUDA_SUCCESS);
  EXPECT_EQ(pager_->resident_bytes(0), 4 * kMiB) << "the kernel ahead of the free has not run";
  EXPECT_TRUE(pager_->free_async(p, stream, false, &result));
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE) << "freed twice";
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS) << "the kernel ran on live memory";
  CUdeviceptr other = 0;
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &other), CUDA_SUCCESS);  // reaps the reached free
  EXPECT_EQ(pager_->resident_bytes(0), 2 * kMiB);
  ASSERT_TRUE(pager_->free(other, &result));
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

// The simulated driver, but a wait for an event on any thread other than
// the test's returns only some milliseconds after the event completes: the
// reclaimer holds the stall timers it has taken, their waits over, for that
// long before it adds their lengths up.
struct SlowReader {
  static inline std::thread::id test_thread;
  static CUresult event_synchronize(CUevent event) {
    const CUresult result = cuEventSynchronize(event);
    if (std::this_thread::get_id() != test_thread) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return result;
  }
  static const vmm::DriverOps& ops() {
    static const vmm::DriverOps slow = [] {
      vmm::DriverOps o = simulated_driver_ops();
      o.event_synchronize = &event_synchronize;
      return o;
    }();
    return slow;
  }
};

// A stall's length, timed between the user stream's arrival at its wait and
// the end of the copies it waits for. With the reclaimer on, its own marks on
// the copy stream land at its thread's simulated clock, so the length depends
// on how the two threads interleave: only the lower bound is exact then. And
// the reclaimer reads the timers slowly, so a stall whose length is not yet
// added up still counts as being timed: a reader who sees none being timed
// sees every stall's length.
class StallTimingTest : public PagerTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool reclaimer() const { return GetParam(); }
  void SetUp() override {
    SlowReader::test_thread = std::this_thread::get_id();
    driver_ops_ = &SlowReader::ops();
  }
  // Waits until every stall timer has been read: by the reclaimer, or
  // without one by the next pager call (any call reaps them).
  void read_timers() {
    ASSERT_TRUE(eventually([&] {
      if (!reclaimer()) pager_->pin_for_life(nullptr, 0, vmm::LifetimePin::ipc);
      return pager_->summary()["stalls_being_timed"].get<int>() == 0;
    })) << "every timer is read once its wait is over";
  }
};

TEST_P(StallTimingTest, AStreamThatWaitsForAUnitOnItsWayInIsTimed) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  // Units large enough that bringing one in outlasts the slow path's own
  // host time (its VMM calls): the stream reaches its wait with the copy
  // still under way, whether or not a save had to finish first.
  constexpr std::uint64_t kUnit = 32 * kMiB;
  constexpr std::uint64_t kCopyNs = kUnit / 55 + 2'000;  // at the simulator's 55 GB/s, plus its 2 us
  make_pager(2 * kUnit, std::nullopt, [&](vmm::PagerOptions& options) { options.reclaimer = reclaimer(); });
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(pager_->allocate(0, kUnit, &a), CUDA_SUCCESS);
  write(a, kUnit, 1);
  ASSERT_EQ(pager_->allocate(0, kUnit, &b), CUDA_SUCCESS);
  write(b, kUnit, 2);
  ASSERT_EQ(pager_->allocate(0, kUnit, &c), CUDA_SUCCESS);  // a goes to the host
  write(c, kUnit, 3);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(read_timers());
  const nlohmann::json before = pager_->summary();  // c's first write waited for a's offload
  EXPECT_GE(before["stall_ns"].get<std::uint64_t>(), kCopyNs / 4) << "that wait is timed";
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  {
    vmm::Access access;  // a comes back: b out for room (copy-out stream), a in (copy-in stream)
    ASSERT_EQ(pager_->prepare_range(a, kUnit, stream, false, access), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD8Async(a, 9, 1, stream), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(read_timers());
  const nlohmann::json summary = pager_->summary();
  EXPECT_EQ(summary["stalled_operations"].get<int>() - before["stalled_operations"].get<int>(), 1);
  // At most b's save and a's arrival one after the other, less the host
  // time the slow path spent before the stream reached its wait; at least
  // what is left of a's arrival then.
  const auto stall_ns = summary["stall_ns"].get<std::uint64_t>() - before["stall_ns"].get<std::uint64_t>();
  EXPECT_GE(stall_ns, kCopyNs / 4) << summary.dump();
  EXPECT_LE(stall_ns, 2 * kCopyNs) << summary.dump();
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : {a, b, c}) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
}

std::string reclaimer_name(const ::testing::TestParamInfo<bool>& param) { return param.param ? "On" : "Off"; }
INSTANTIATE_TEST_SUITE_P(Reclaimer, StallTimingTest, ::testing::Bool(), reclaimer_name);

// ---- the reclaimer: the slow work off the program's threads -------------------------------

// Counts chunk creations and host pins made on the test's own thread.
struct CallerCalls {
  static inline std::thread::id caller;
  static inline std::atomic<int> creates{0}, host_allocs{0};
  static void reset() {
    caller = std::this_thread::get_id();
    creates = 0;
    host_allocs = 0;
  }
};

const vmm::DriverOps& counting_driver_ops() {
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.create = [](CUmemGenericAllocationHandle* h, size_t n, const CUmemAllocationProp* p, unsigned long long f) {
      if (std::this_thread::get_id() == CallerCalls::caller) ++CallerCalls::creates;
      return cuMemCreate(h, n, p, f);
    };
    o.host_alloc = [](void** p, size_t n, unsigned f) {
      if (std::this_thread::get_id() == CallerCalls::caller) ++CallerCalls::host_allocs;
      return cuMemHostAlloc(p, n, f);
    };
    return o;
  }();
  return ops;
}

class ReclaimerTest : public PagerTest {
 protected:
  void make_counted_pager(std::uint64_t cap) {
    CallerCalls::reset();
    cap_ = cap;
    ledger_ = std::make_unique<vmm::CapLedger>([cap](int) { return cap; });
    pager_ = std::make_unique<vmm::Pager>(counting_driver_ops(), *ledger_, recorder_, test_pager_options());
    baseline_ = physical_bytes_now();
  }
  std::uint64_t reclaimer_stat(const char* name) { return pager_->summary()["reclaimer"][name].get<std::uint64_t>(); }
  void TearDown() override {
    CUresult result = CUDA_SUCCESS;
    for (CUdeviceptr p : buffers_) {
      EXPECT_TRUE(pager_->free(p, &result));
      EXPECT_EQ(result, CUDA_SUCCESS);
    }
    pager_.reset();  // joins the reclaimer
  }
  std::vector<CUdeviceptr> buffers_;
};

TEST_F(ReclaimerTest, UnmapsFinishedOffloadsWithNoFurtherCall) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  make_counted_pager(4 * kMiB);
  buffers_.resize(3);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));
  // The third allocation offloaded the first; nothing on this thread waits for that copy.
  EXPECT_TRUE(eventually([&] { return pager_->summary()["unmaps_pending"].get<int>() == 0; }))
      << pager_->summary().dump();
  EXPECT_GE(reclaimer_stat("unmaps"), 1u);
  expect_held(buffers_, 2 * kMiB);
}

TEST_F(ReclaimerTest, CreatesChunksAheadOffTheCallingThread) {
  make_counted_pager(64 * kMiB);
  buffers_.resize(2);
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[0]), CUDA_SUCCESS);
  EXPECT_EQ(CallerCalls::creates, 1) << "the first chunk is made on demand";
  ASSERT_TRUE(eventually([&] { return pager_->idle_chunk_bytes(0) >= 8 * kChunk; }));
  ASSERT_EQ(pager_->allocate(0, 8 * kMiB, &buffers_[1]), CUDA_SUCCESS);
  write(buffers_[1], 8 * kMiB, 7);
  EXPECT_EQ(CallerCalls::creates, 1) << "the next four chunks existed already";
  EXPECT_GE(reclaimer_stat("chunks_created_ahead"), 8u);
  EXPECT_LE(ledger_->usage(0).peak, 64 * kMiB) << "spares are charged to the cap";
}

TEST_F(ReclaimerTest, PinsTheNextHostBufferAhead) {
  make_counted_pager(4 * kMiB);
  buffers_.resize(4);
  ASSERT_NO_FATAL_FAILURE(allocate_written(std::span(buffers_).first(3), 2 * kMiB));
  EXPECT_EQ(CallerCalls::host_allocs, 1) << "the first offload pins on demand";
  ASSERT_TRUE(eventually([&] { return reclaimer_stat("host_buffers_pinned_ahead") >= 1; }));
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[3]), CUDA_SUCCESS);  // offloads a second unit
  write(buffers_[3], 2 * kMiB, 3);
  EXPECT_EQ(CallerCalls::host_allocs, 1) << "the second offload found its buffer pinned";
  expect_held(buffers_, 2 * kMiB);
}

TEST_F(ReclaimerTest, RoomMadeForUnpagedMemoryIsNotTakenBack) {
  make_counted_pager(16 * kMiB);
  buffers_.resize(2);
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[0]), CUDA_SUCCESS);
  ASSERT_TRUE(eventually([&] { return ledger_->usage(0).counted == 16 * kMiB; })) << "spares fill the cap";
  ASSERT_TRUE(pager_->make_room(0, 6 * kMiB));
  const std::uint64_t passes = reclaimer_stat("passes");
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers_[1]), CUDA_SUCCESS);  // takes a spare, wakes the reclaimer
  ASSERT_TRUE(eventually([&] { return reclaimer_stat("passes") > passes; })) << "the reclaimer has run since";
  EXPECT_TRUE(ledger_->charge(0, 6 * kMiB)) << "the program's allocation gets the room it was made";
  ledger_->refund(0, 6 * kMiB);
}

// ---- faults: the driver refuses one call; the pager ends in an out-of-memory
// error or a logged retry, and every byte already stored is kept ----------------------------

// Which call fails, and after how many successes (-1: none).
struct Faults {
  static inline int create = -1, host_alloc = -1, to_host = -1, to_device = -1, unmap = -1;
  static bool hit(int& countdown) { return countdown >= 0 && countdown-- == 0; }
};

const vmm::DriverOps& flaky_driver_ops() {
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.create = [](CUmemGenericAllocationHandle* h, size_t n, const CUmemAllocationProp* p, unsigned long long f) {
      return Faults::hit(Faults::create) ? CUDA_ERROR_OUT_OF_MEMORY : cuMemCreate(h, n, p, f);
    };
    o.host_alloc = [](void** p, size_t n, unsigned f) {
      return Faults::hit(Faults::host_alloc) ? CUDA_ERROR_OUT_OF_MEMORY : cuMemHostAlloc(p, n, f);
    };
    o.unmap = [](CUdeviceptr p, size_t n) { return Faults::hit(Faults::unmap) ? CUDA_ERROR_UNKNOWN : cuMemUnmap(p, n); };
    o.copy_to_host_async = [](void* d, CUdeviceptr s, size_t n, CUstream st) {
      return Faults::hit(Faults::to_host) ? CUDA_ERROR_UNKNOWN : cuMemcpyDtoHAsync(d, s, n, st);
    };
    o.copy_to_device_async = [](CUdeviceptr d, const void* s, size_t n, CUstream st) {
      return Faults::hit(Faults::to_device) ? CUDA_ERROR_UNKNOWN : cuMemcpyHtoDAsync(d, s, n, st);
    };
    return o;
  }();
  return ops;
}

class PagerFaultTest : public PagerTest {
 protected:
  void SetUp() override {
    Faults::create = Faults::host_alloc = Faults::to_host = Faults::to_device = Faults::unmap = -1;
    ledger_ = std::make_unique<vmm::CapLedger>([](int) { return 4 * kMiB; });
    cap_ = 4 * kMiB;
    vmm::PagerOptions options = test_pager_options();
    options.reclaimer = false;  // each fault hits the call the test means, on the test's thread
    // A block a chunk, whatever the run: make_room gives back exactly one
    // chunk, and the next chunk is the next cuMemCreate. (Refused creations
    // on larger blocks: PagingFaults.RefusedChunkCreationIsWorkedAround.)
    options.block_chunks = 1;
    pager_ = std::make_unique<vmm::Pager>(flaky_driver_ops(), *ledger_, recorder_, options);
    baseline_ = physical_bytes_now();
    // Three 2 MiB buffers under a 4 MiB cap: one is always on the host.
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers_, 2 * kMiB));
  }
  void TearDown() override {
    Faults::create = Faults::host_alloc = Faults::to_host = Faults::to_device = Faults::unmap = -1;
    expect_held(buffers_, 2 * kMiB);
    CUresult result = CUDA_SUCCESS;
    for (CUdeviceptr p : buffers_) {
      ASSERT_TRUE(pager_->free(p, &result));
      EXPECT_EQ(result, CUDA_SUCCESS);
    }
  }
  // Touches every buffer once, as three launches would; the first error.
  CUresult touch_all() {
    for (CUdeviceptr p : buffers_) {
      vmm::Access access;
      if (CUresult r = pager_->prepare_range(p, 2 * kMiB, nullptr, false, access)) return r;
    }
    return CUDA_SUCCESS;
  }
  CUdeviceptr buffers_[3] = {};
};

TEST_F(PagerFaultTest, ChunkCreationFailureOffloadsInstead) {
  ASSERT_TRUE(pager_->make_room(0, 2 * kMiB));  // one chunk back to the driver: the next must be created
  Faults::create = 0;
  EXPECT_EQ(touch_all(), CUDA_SUCCESS) << "a refused cuMemCreate is worked around by offloading";
}

TEST_F(PagerFaultTest, PinnedHostAllocationFailureTriesAnotherVictim) {
  Faults::host_alloc = 0;
  EXPECT_EQ(touch_all(), CUDA_SUCCESS) << "one refused pinned allocation: the next victim goes";
  EXPECT_EQ(Faults::host_alloc, -1) << "the refusal was met";
  // A pinned buffer a fetch gave back serves the next offload: no new pin is
  // asked for, so a refusal waiting for the next one changes nothing.
  Faults::host_alloc = 0;
  CUdeviceptr extra = 0;
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &extra), CUDA_SUCCESS);
  EXPECT_EQ(Faults::host_alloc, 0) << "no pinned allocation was needed";
  CUresult freed = CUDA_ERROR_UNKNOWN;
  EXPECT_TRUE(pager_->free(extra, &freed));
  EXPECT_EQ(freed, CUDA_SUCCESS);
}

// The range of an offloaded unit the driver would not unmap is unmapped
// again before the unit maps there next; it comes back (it was stranded on
// the host, every later map of its range refused).
TEST_F(PagerFaultTest, ARefusedUnmapIsRetriedBeforeTheUnitComesBack) {
  Faults::unmap = 0;
  EXPECT_EQ(touch_all(), CUDA_SUCCESS);
  EXPECT_EQ(Faults::unmap, -1) << "the refusal was met";
  EXPECT_EQ(touch_all(), CUDA_SUCCESS);
  EXPECT_EQ(touch_all(), CUDA_SUCCESS) << "every unit comes and goes as before";
}

TEST_F(PagerFaultTest, OffloadCopyFailureKeepsTheUnitResident) {
  Faults::to_host = 0;
  EXPECT_EQ(touch_all(), CUDA_SUCCESS) << "the failed offload is undone and another unit goes";
}

TEST_F(PagerFaultTest, FetchCopyFailureIsOutOfMemoryAndTheDataStaysOnTheHost) {
  Faults::to_device = 0;
  EXPECT_EQ(touch_all(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(touch_all(), CUDA_SUCCESS) << "the next attempt brings it back";
}

TEST_F(PagerTest, ADriverThatUnmapsOneMappingPerCallStillGetsEveryRangeUnmapped) {
  // The pager unmaps a unit's chunks in one call; a driver may insist on one
  // call per mapping, and then gets that.
  static std::atomic<int> refused{0};
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.unmap = [](CUdeviceptr p, size_t n) {
      if (n > kChunk) {
        ++refused;
        return CUDA_ERROR_INVALID_VALUE;
      }
      return cuMemUnmap(p, n);
    };
    return o;
  }();
  driver_ops_ = &ops;
  make_pager(8 * kMiB, std::nullopt, [](vmm::PagerOptions& options) {
    // One mapping a chunk, so that chunk-sized unmaps are whole mappings (on
    // blocks: ADriverThatUnmapsOneMappingPerCallGetsEachRunOfABlockWhole).
    options.block_chunks = 1;
  });
  std::vector<CUdeviceptr> buffers(4);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, 4 * kMiB));
  expect_held(buffers, 4 * kMiB);
  EXPECT_EQ(refused, 1) << "asked once, then chunk by chunk";
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : buffers) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

// On blocks, a unit is mapped in runs of several chunks; a driver that
// unmaps only whole mappings, one per call (as the CUDA documentation says
// of cuMemUnmap), gets each run whole: unmapped chunk by chunk, every call
// would be refused and the range would stay mapped.
TEST_F(PagerTest, ADriverThatUnmapsOneMappingPerCallGetsEachRunOfABlockWhole) {
  static std::mutex mutex;
  static std::map<CUdeviceptr, size_t> mappings;  // what the driver has mapped: address -> bytes
  static std::atomic<int> refused{0};
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.map = [](CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f) {
      const CUresult r = cuMemMap(p, n, offset, h, f);
      if (r == CUDA_SUCCESS) {
        std::lock_guard lock(mutex);
        mappings[p] = n;
      }
      return r;
    };
    o.unmap = [](CUdeviceptr p, size_t n) {
      {
        std::lock_guard lock(mutex);
        const auto it = mappings.find(p);
        if (it == mappings.end() || it->second != n) {
          ++refused;
          return CUDA_ERROR_INVALID_VALUE;
        }
        mappings.erase(it);
      }
      return cuMemUnmap(p, n);
    };
    return o;
  }();
  driver_ops_ = &ops;
  make_pager(16 * kMiB, std::nullopt, [](vmm::PagerOptions& options) {
    options.block_chunks = 2;  // 4 MiB blocks: a 6 MiB unit spans two mappings at least
  });
  std::vector<CUdeviceptr> buffers(6);
  ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, 6 * kMiB));
  expect_held(buffers, 6 * kMiB);
  EXPECT_GE(pager_->summary()["offloads"].get<int>(), 4) << "36 MiB under a 16 MiB cap";
  EXPECT_EQ(refused, 1) << "one unmap over several mappings asked once, then each mapping whole";
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : buffers) {
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

TEST_F(PagerTest, ASmallerArenaWhenTheDriverRefusesTheLargeOne) {
  // Some processes cannot map 1 TiB (sanitizer runtimes, address-space limits).
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.address_reserve = [](CUdeviceptr* p, size_t n, size_t a, CUdeviceptr at, unsigned long long f) {
      return n > (std::uint64_t{16} << 30) ? CUDA_ERROR_OUT_OF_MEMORY : cuMemAddressReserve(p, n, a, at, f);
    };
    return o;
  }();
  vmm::CapLedger ledger([](int) { return 8 * kMiB; });
  vmm::Pager pager(ops, ledger, recorder_, test_pager_options());
  CUdeviceptr p = 0;
  ASSERT_EQ(pager.allocate(0, 2 * kMiB, &p), CUDA_SUCCESS);
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager.free(p, &result));
  EXPECT_EQ(result, CUDA_SUCCESS);
}

// Room for the program's own memory comes from releasing whole blocks, and
// a unit's blocks are its own: 8 MiB of room moves 8 MiB, whichever units go.
// Under a 32 MiB cap in blocks of up to 8 MiB: two 8 MiB units (a block
// each) and eight 2 MiB units; one 8 MiB unit is pinned and stays.
TEST_F(PagerTest, MakingRoomReleasesWholeBlocksAndMovesNoMoreThanTheRoom) {
  make_pager(32 * kMiB, std::nullopt, [](vmm::PagerOptions& options) {
    options.block_chunks = 4;
    options.reclaimer = false;  // no spare blocks: the units' own hold the cap
  });
  std::vector<CUdeviceptr> large(2), small(8);
  ASSERT_NO_FATAL_FAILURE(allocate_written(large, 8 * kMiB));
  for (unsigned i = 0; i < small.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &small[i]), CUDA_SUCCESS);
    write(small[i], 2 * kMiB, 100 + i);
  }
  ASSERT_EQ(pager_->summary()["devices"][0]["blocks"].get<int>(), 10);
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->pin(large[0], &result));  // its block stays
  ASSERT_EQ(result, CUDA_SUCCESS);
  const std::uint64_t offloaded = pager_->summary()["bytes_offloaded"].get<std::uint64_t>();
  ASSERT_TRUE(pager_->make_room(0, 8 * kMiB));
  EXPECT_EQ(pager_->summary()["bytes_offloaded"].get<std::uint64_t>() - offloaded, 8 * kMiB)
      << "no unit shares a block: what goes is the room";
  ASSERT_TRUE(ledger_->charge(0, 8 * kMiB)) << "the room is there";
  expect_held(std::span<const CUdeviceptr>(large).first(1), 8 * kMiB);
  ledger_->refund(0, 8 * kMiB);
  EXPECT_TRUE(holds(large[1], 8 * kMiB, 1));
  for (unsigned i = 0; i < small.size(); ++i) EXPECT_TRUE(holds(small[i], 2 * kMiB, 100 + i)) << i;
  EXPECT_TRUE(pager_->unpin(large[0]));
  for (CUdeviceptr p : large) ASSERT_TRUE(pager_->free(p, &result));
  for (CUdeviceptr p : small) ASSERT_TRUE(pager_->free(p, &result));
}

// The trace's mappings count what was mapped, a map the driver refused
// part of the way through included: `chunks / made` is what a call carried.
TEST_F(PagerTest, MappingsCountWhatWasMappedBeforeARefusal) {
  static std::atomic<int> maps{0};
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o = simulated_driver_ops();
    o.map = [](CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f) {
      return ++maps == 2 ? CUDA_ERROR_OUT_OF_MEMORY : cuMemMap(p, n, offset, h, f);
    };
    return o;
  }();
  driver_ops_ = &ops;
  make_pager(16 * kMiB, std::nullopt, [](vmm::PagerOptions& options) {
    options.block_chunks = 2;  // 4 MiB blocks: a 6 MiB unit maps in two calls
    options.reclaimer = false;
  });
  CUdeviceptr refused = 0, mapped = 0;
  EXPECT_NE(pager_->allocate(0, 6 * kMiB, &refused), CUDA_SUCCESS) << "its second mapping was refused";
  ASSERT_EQ(pager_->allocate(0, 6 * kMiB, &mapped), CUDA_SUCCESS);
  const nlohmann::json mappings = pager_->summary()["mappings"];
  EXPECT_EQ(mappings["made"].get<int>(), 3) << "one before the refusal, two for the unit mapped";
  EXPECT_EQ(mappings["chunks"].get<int>(), 2 + 3) << mappings.dump();
  CUresult result = CUDA_SUCCESS;
  EXPECT_TRUE(pager_->free(mapped, &result));
}

}  // namespace
}  // namespace vgpumem::test

int main(int argc, char** argv) {
  // A pager's blocks live as long as the process (vmm/chunk_pool.cpp), as in
  // a program: the tests' pagers, one after another in this process, hold
  // about 1.2 GiB of the simulated device by the last test.
  setenv("VGPUSIM_DEVICE_MEMORY", "4GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
