// The pager's mover (vmm/mover.h) on the simulated driver: the plan's moves
// are made on the mover's thread, not the program's, and whenever they are
// made, against whatever the program's threads do meanwhile, no byte is lost
// and the cap holds at every instant.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "pager_fixture.h"
#include "vgpusim_driver_calls.h"
#include <nlohmann/json.hpp>

namespace vgpumem::test {
namespace {

// The first unit of the last operation the calling thread issued: a feed is
// told on the thread that issued, so each program thread reads its own.
class ThreadUnitCatcher final : public vmm::AccessFeed {
 public:
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    last() = record.count > 0 ? record.units[0] : nullptr;
    return false;
  }
  static vmm::Unit*& last() {
    thread_local vmm::Unit* unit = nullptr;
    return unit;
  }
};

using vgpusim::DriverCalls;

class MoverTest : public PagerTest {
 protected:
  // The unit behind `p`, touched once more on this thread.
  vmm::Unit* unit_of(CUdeviceptr p, std::uint64_t bytes) {
    vmm::Access access;
    EXPECT_EQ(pager_->prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    access.release();
    return ThreadUnitCatcher::last();
  }
  ThreadUnitCatcher catcher_;
};

// With the mover, the thread that fires a plan's moves makes none of their
// driver calls; without it (VGPUMEM_MOVER=off), it makes them all. The
// second half is the first's control: the count can tell the two apart.
TEST_F(MoverTest, ThePlansMovesMakeNoDriverCallOnTheThreadThatFiresThem) {
  for (const bool with_mover : {true, false}) {
    SCOPED_TRACE(with_mover ? "with the mover" : "without");
    make_pager(4 * kChunk, std::nullopt, [&](vmm::PagerOptions& options) {
      options.mover = with_mover;
      options.grace_operations = 0;
    });
    pager_->set_access_feed(&catcher_);
    std::array<CUdeviceptr, 6> buffers{};
    ASSERT_NO_FATAL_FAILURE(allocate_written(buffers, kChunk));
    std::vector<vmm::Unit*> units;
    for (const CUdeviceptr p : buffers) units.push_back(unit_of(p, kChunk));
    // The last four are resident (the cap holds four); the first two went out.
    const std::array<vmm::Unit*, 2> out = {units[4], units[5]}, in = {units[0], units[1]};
    const vmm::MoveCounts before = pager_->moves_made();
    const nlohmann::json path_before = pager_->summary()["host_path"];
    const DriverCalls calls_before = DriverCalls::of_this_thread();
    pager_->move_ahead(out, in, false);
    const DriverCalls calls_after = DriverCalls::of_this_thread();
    pager_->drain_moves();
    // The trace's count by side agrees with the simulator's by thread.
    const nlohmann::json path_after = pager_->summary()["host_path"];
    const auto vmm_calls = [](const nlohmann::json& path, const char* side) {
      return path[side]["vmm_calls"].get<std::uint64_t>();
    };
    EXPECT_EQ(vmm_calls(path_after, "program_threads") - vmm_calls(path_before, "program_threads"),
              calls_after.vmm - calls_before.vmm)
        << path_after.dump();
    if (with_mover) {
      EXPECT_GT(vmm_calls(path_after, "pager_threads"), vmm_calls(path_before, "pager_threads"));
    }
    // What each fetch's mapping cost, as the plan is told (PagerControl::
    // driver_ns_per_move): a 2 MiB unit is one handle, mapped and granted
    // access at the simulator's calibrated prices (10.1 + 30 + 78.6 µs).
    EXPECT_GE(pager_->driver_ns_per_move(false), 118'700) << path_after.dump();
    EXPECT_LT(pager_->driver_ns_per_move(false), 1'000'000) << path_after.dump();
    EXPECT_DOUBLE_EQ(path_after["driver_us_per_fetch"].get<double>(), pager_->driver_ns_per_move(false) / 1e3);
    const vmm::MoveCounts after = pager_->moves_made();
    EXPECT_EQ(after.offloads - before.offloads, 2u);
    EXPECT_EQ(after.prefetches - before.prefetches, 2u);
    EXPECT_EQ(after.refused, before.refused);
    if (with_mover) {
      EXPECT_EQ(calls_after.vmm, calls_before.vmm) << "a map or unmap on the firing thread";
      EXPECT_EQ(calls_after.ns, calls_before.ns);
      const nlohmann::json mover = pager_->summary()["mover"];
      EXPECT_TRUE(mover["running"].get<bool>());
      EXPECT_EQ(mover["made"].get<std::uint64_t>(), 4u) << mover.dump();
    } else {
      EXPECT_GT(calls_after.vmm, calls_before.vmm) << "the control: the moves' calls on the calling thread";
      EXPECT_FALSE(pager_->summary()["mover"]["running"].get<bool>());
    }
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    expect_held(buffers, kChunk);
    pager_->set_access_feed(nullptr);
    for (const CUdeviceptr p : buffers) {
      CUresult result = CUDA_SUCCESS;
      EXPECT_TRUE(pager_->free(p, &result));
    }
  }
}

// Two program threads, as PyTorch's forward and autograd threads, each on
// its own stream: asynchronous writes of new versions, frees and new
// allocations in their place, and random moves of either thread's units
// posted to the mover between them. At every check each buffer holds its
// latest version, and at no instant did the device hold more than the cap.
TEST_F(MoverTest, RandomMovesAgainstTwoThreadsWritesAndFreesLoseNothing) {
  constexpr unsigned kThreads = 2, kBuffers = 5, kSources = 6;
  constexpr std::uint64_t kBytes = kChunk;
  make_pager(6 * kChunk, std::nullopt, [](vmm::PagerOptions& options) { options.grace_operations = 0; });
  pager_->set_access_feed(&catcher_);
  CUcontext context = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&context), CUDA_SUCCESS);
  static_cast<void>(vgpusimPhysicalPeak(0, 1));

  // Every thread's units, readable by all (a plan names any thread's units).
  std::array<std::array<std::atomic<vmm::Unit*>, kBuffers>, kThreads> units{};
  std::atomic<unsigned> writes{0}, frees{0}, checks{0}, posted{0}, lost{0};

  auto program_thread = [&](unsigned me) {
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    std::vector<unsigned char*> sources(kSources);
    for (auto*& source : sources) ASSERT_EQ(cuMemAllocHost(reinterpret_cast<void**>(&source), kBytes), CUDA_SUCCESS);
    std::array<CUdeviceptr, kBuffers> buffers{};
    std::array<unsigned, kBuffers> version{};
    const auto fresh = [&](unsigned i) {  // a new allocation holding its version, its unit published
      ASSERT_EQ(pager_->allocate(0, kBytes, &buffers[i]), CUDA_SUCCESS);
      version[i] = me * 1000 + i + 7 * frees.load();
      write(buffers[i], kBytes, version[i]);
      units[me][i].store(ThreadUnitCatcher::last());
    };
    for (unsigned i = 0; i < kBuffers; ++i) ASSERT_NO_FATAL_FAILURE(fresh(i));

    std::mt19937 random(2026 + me);
    unsigned next_source = 0;
    for (int step = 0; step < 400; ++step) {
      const unsigned i = random() % kBuffers;
      switch (random() % 5) {
        case 0: {  // an asynchronous write of a new version, as a kernel would
          if (next_source == kSources) {
            ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
            next_source = 0;
          }
          version[i] += 11;
          unsigned char* source = sources[next_source++];
          fill_pattern(source, kBytes, version[i]);
          vmm::Access access;
          ASSERT_EQ(pager_->prepare_range(buffers[i], kBytes, stream, false, access), CUDA_SUCCESS);
          ASSERT_EQ(cuMemcpyHtoDAsync(buffers[i], source, kBytes, stream), CUDA_SUCCESS);
          units[me][i].store(ThreadUnitCatcher::last());
          writes.fetch_add(1);
          break;
        }
        case 1: {  // freed (cuMemFree waits for the work using it) and made again
          CUresult result = CUDA_SUCCESS;
          ASSERT_TRUE(pager_->free(buffers[i], &result));
          ASSERT_EQ(result, CUDA_SUCCESS);
          frees.fetch_add(1);
          ASSERT_NO_FATAL_FAILURE(fresh(i));
          break;
        }
        case 2:
        case 3: {  // a plan's moves: any thread's units, out and in
          std::vector<vmm::Unit*> out, in;  // (not yet made, or gone at the end: none)
          for (int k = 0; k < 2; ++k) {
            if (vmm::Unit* unit = units[random() % kThreads][random() % kBuffers].load()) out.push_back(unit);
            if (vmm::Unit* unit = units[random() % kThreads][random() % kBuffers].load()) in.push_back(unit);
          }
          pager_->move_ahead(out, in, false);
          posted.fetch_add(static_cast<unsigned>(out.size() + in.size()));
          break;
        }
        default: {  // the program looks, synchronously
          ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
          next_source = 0;
          if (!holds(buffers[i], kBytes, version[i])) {
            lost.fetch_add(1);
            ADD_FAILURE() << "thread " << me << " buffer " << i << " at step " << step;
          }
          units[me][i].store(ThreadUnitCatcher::last());
          checks.fetch_add(1);
          break;
        }
      }
    }
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    for (unsigned i = 0; i < kBuffers; ++i) {
      EXPECT_TRUE(holds(buffers[i], kBytes, version[i])) << "thread " << me << " buffer " << i << " at the end";
    }
    // The mover may still be moving these units: let it finish before they go.
    pager_->drain_moves();
    for (unsigned i = 0; i < kBuffers; ++i) {
      units[me][i].store(nullptr);
      CUresult result = CUDA_SUCCESS;
      EXPECT_TRUE(pager_->free(buffers[i], &result));
    }
    for (auto* source : sources) cuMemFreeHost(source);
    cuStreamDestroy(stream);
  };
  std::thread a(program_thread, 0), b(program_thread, 1);
  a.join();
  b.join();
  pager_->drain_moves();
  pager_->set_access_feed(nullptr);

  EXPECT_EQ(lost.load(), 0u);
  EXPECT_LE(vgpusimPhysicalPeak(0, 0) - baseline_, cap_) << "the device held more than the cap at some instant";
  const vmm::MoveCounts moves = pager_->moves_made();
  EXPECT_GT(writes.load(), 100u);
  EXPECT_GT(frees.load(), 100u);
  EXPECT_GT(checks.load(), 100u);
  EXPECT_GT(moves.offloads + moves.prefetches, 100u) << "the moves must happen for this test to mean anything";
  EXPECT_EQ(moves.offloads + moves.prefetches + moves.refused, posted.load());
}

}  // namespace
}  // namespace vgpumem::test
