// A timed step read through the kernel clock over the simulated CUPTI
// (scheduler::read_step_times, shim/cupti_kernel_clock.h): each kernel's
// duration is exactly the simulated clock's, the stall before a kernel is
// the gap on its stream as events see it, spans of a later step wait for
// it, and a clock that stepped aside mid-step says which kernels it never
// timed without making the planner wait.
#include <gtest/gtest.h>

#include <cupti.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "cupti/kernel_times.h"
#include "cupti_test_support.h"
#include "scheduler/step_times.h"
#include "vmm/pager_control.h"
#include "shim/cupti_kernel_clock.h"
#include "vgpusim.h"

namespace {

using vgpumem::CuptiKernelClock;
using vgpumem::cupti::KernelTimes;
using vgpumem::cupti::TimerState;
using vgpumem::scheduler::KernelClock;
using vgpumem::scheduler::KernelSpan;
using vgpumem::scheduler::KernelSpans;
using vgpumem::scheduler::read_step_times;
using vgpumem::scheduler::RecordedIteration;
using vgpumem::scheduler::RecordedOp;
using vgpumem::scheduler::StepTimes;


class StepTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuptiFinalize(), CUPTI_SUCCESS);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice device = 0;
    ASSERT_EQ(cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    times_ = std::make_unique<KernelTimes>(test_cupti_options());
    ASSERT_EQ(times_->start(), TimerState::active);
    pointer_.store(times_.get());
  }
  void TearDown() override {
    pointer_.store(nullptr);
    times_.reset();
    cuptiFinalize();
  }

  // Launches `f` on `stream` with `id` pushed, as the runtime's timed_launch
  // does, and records it as the step's next operation.
  void clocked(RecordedIteration& step, std::uint64_t id, CUfunction f, CUstream stream, std::uint64_t stream_bit) {
    times_->begin(id);
    ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), CUDA_SUCCESS);
    times_->end();
    RecordedOp& op = step.ops.emplace_back();
    op.function = f;
    op.stream_bit = stream_bit;
    op.launch_id = id;
  }

  CUcontext context_ = nullptr;
  std::unique_ptr<KernelTimes> times_;
  std::atomic<KernelTimes*> pointer_{nullptr};
};

TEST_F(StepTimesTest, KernelDurationsAreTheSimulatedClocksExactly) {
  CuptiKernelClock clock(pointer_);
  KernelSpans spans(clock);
  CUfunction conv = simulated_kernel("step_conv", 12500), relu = simulated_kernel("step_relu", 800);
  CUfunction gemm = simulated_kernel("step_gemm", 4321);
  RecordedIteration step;
  step.timed = true;
  clocked(step, 11, conv, nullptr, 1);
  clocked(step, 12, relu, nullptr, 1);
  clocked(step, 13, gemm, nullptr, 1);
  clocked(step, 14, conv, nullptr, 1);
  // The step's kernels complete (the simulator runs them) only once the
  // program synchronizes, after the read has begun: the read waits for them.
  std::thread program([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cuCtxSetCurrent(context_);
    cuCtxSynchronize();
  });
  const StepTimes times = read_step_times(step, nullptr, &spans);
  program.join();
  EXPECT_EQ(times.duration_ns, (std::vector<double>{12500, 800, 4321, 12500}));
  EXPECT_EQ(times.stall_ns, (std::vector<double>{-1, 0, 0, 0})) << "back to back on one stream";
  EXPECT_EQ(times.kernels_clocked, 4u);
  EXPECT_EQ(times.kernels_missing, 0u);
  EXPECT_EQ(times.marks(), 0u) << "no event on the program's stream";
  EXPECT_EQ(times.source, "cupti");
  EXPECT_EQ(spans.kept(), 0u);
}

// A kernel whose stream waits for a copy on another stream: its stall is the
// gap after the kernel before it, the same as events around it measure.
TEST_F(StepTimesTest, StallIsTheGapOnTheStreamAsEventsSeeIt) {
  // What the host waits for, on the simulated clock: under the idle cost model,
  // which charges no host time for the driver calls around it.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  CuptiKernelClock clock(pointer_);
  KernelSpans spans(clock);
  CUfunction first = simulated_kernel("step_first", 800), second = simulated_kernel("step_second", 1500);
  CUstream copies = nullptr, compute = nullptr;
  ASSERT_EQ(cuStreamCreate(&copies, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUevent landed = nullptr, first_ended = nullptr, second_started = nullptr;
  for (CUevent* event : {&landed, &first_ended, &second_started}) ASSERT_EQ(cuEventCreate(event, 0), CUDA_SUCCESS);
  constexpr std::size_t kBytes = 8 << 20;
  CUdeviceptr device_buffer = 0;
  ASSERT_EQ(cuMemAlloc(&device_buffer, kBytes), CUDA_SUCCESS);
  std::vector<unsigned char> host(kBytes, 7);

  RecordedIteration step;
  ASSERT_EQ(cuMemcpyHtoDAsync(device_buffer, host.data(), kBytes, copies), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(landed, copies), CUDA_SUCCESS);
  clocked(step, 21, first, compute, 2);
  ASSERT_EQ(cuEventRecord(first_ended, compute), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(compute, landed, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(second_started, compute), CUDA_SUCCESS);
  clocked(step, 22, second, compute, 2);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);

  const StepTimes times = read_step_times(step, nullptr, &spans);
  float waited_ms = 0;
  ASSERT_EQ(cuEventElapsedTime(&waited_ms, first_ended, second_started), CUDA_SUCCESS);
  ASSERT_GT(waited_ms, 0.001f) << "the copy should outlast the first kernel";
  EXPECT_EQ(times.duration_ns, (std::vector<double>{800, 1500}));
  EXPECT_NEAR(times.stall_ns[1], waited_ms * 1e6, 1.0);
  for (CUevent event : {landed, first_ended, second_started}) cuEventDestroy(event);
  cuMemFree(device_buffer);
  cuStreamDestroy(copies);
  cuStreamDestroy(compute);
}

TEST_F(StepTimesTest, SpansOfTheNextStepAreKeptForItAndOrphansForgotten) {
  CuptiKernelClock clock(pointer_);
  KernelSpans spans(clock);
  CUfunction f = simulated_kernel("step_next", 1000);
  RecordedIteration step, next, orphan;
  clocked(step, 31, f, nullptr, 1);
  clocked(next, 32, f, nullptr, 1);    // already running when `step` is read
  clocked(orphan, 33, f, nullptr, 1);  // a step that is never read
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(read_step_times(step, nullptr, &spans).kernels_clocked, 1u);
  EXPECT_EQ(spans.kept(), 2u);
  EXPECT_EQ(read_step_times(next, nullptr, &spans).duration_ns, (std::vector<double>{1000}));
  EXPECT_EQ(spans.kept(), 0u) << "kept through two reads, taken by neither";
}

TEST_F(StepTimesTest, ClockSteppingAsideMidStepLeavesTheRestMissingWithoutWaiting) {
  CuptiKernelClock clock(pointer_);
  KernelSpans spans(clock);
  CUfunction f = simulated_kernel("step_aside", 1000);
  RecordedIteration step;
  clocked(step, 41, f, nullptr, 1);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  times_->step_aside();  // a profiler started
  clocked(step, 42, f, nullptr, 1);
  EXPECT_FALSE(clock.active());
  const auto began = std::chrono::steady_clock::now();
  const StepTimes times = read_step_times(step, nullptr, &spans);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(500));
  EXPECT_EQ(times.duration_ns, (std::vector<double>{1000, -1}));
  EXPECT_EQ(times.kernels_clocked, 1u);
  EXPECT_EQ(times.kernels_missing, 1u);
}

// A clock that never delivers (its records dropped): the read gives up after
// its patience, counting what is missing.
class SilentClock final : public KernelClock {
 public:
  bool active() const noexcept override { return true; }
  std::string_view name() const noexcept override { return "silent"; }
  void collect(const std::function<void(const KernelSpan&)>&) override {}
};

// Marks that stand for times on a clock of their own: a mark is its time
// in nanoseconds, so elapsed is the difference.
class ClockMarks final : public vgpumem::vmm::PagerControl {
 public:
  bool offload_unit(vgpumem::vmm::Unit*, bool) override { return false; }
  bool prefetch_unit(vgpumem::vmm::Unit*) override { return false; }
  vgpumem::vmm::UnitFacts facts(const vgpumem::vmm::Unit*) const override { return {}; }
  std::uint64_t paging_budget(int) const override { return 0; }
  double link_bytes_per_ns(bool) const override { return 0; }
  CUevent mark(CUstream) override { return nullptr; }
  void elapsed_ns(std::span<const vgpumem::vmm::ElapsedQuery> queries, std::span<std::int64_t> nanoseconds) override {
    for (std::size_t i = 0; i < queries.size(); ++i) nanoseconds[i] = at(queries[i].to) - at(queries[i].from);
  }
  void release_mark(int, CUevent) override {}
  static CUevent at_ns(std::int64_t ns) { return reinterpret_cast<CUevent>(static_cast<std::intptr_t>(ns)); }

 private:
  static std::int64_t at(CUevent mark) { return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(mark)); }
};

// The first step timed after a lock marks every kernel besides giving it a
// launch id (not yet seen whole: which neighbour is a copy is not known).
// Its read waits for no span, so the first plan never waits out the
// clock's patience for records that may never come (an H200's CUPTI
// records that never joined our ids cost the first plan two seconds): a
// marked kernel whose span has not come is timed by its marks.
TEST(KernelSpansTest, MarkedKernelsAreNotWaitedForAndTheirMarksTimeThem) {
  SilentClock clock;
  KernelSpans spans(clock);
  ClockMarks marks;
  RecordedIteration step;
  step.timed = true;
  for (std::int64_t k = 0; k < 3; ++k) {
    RecordedOp& op = step.ops.emplace_back();
    op.function = reinterpret_cast<CUfunction>(k + 1);
    op.stream_bit = 1;
    op.launch_id = static_cast<std::uint64_t>(k + 1);
    op.started = ClockMarks::at_ns(1000 * (k + 1));
    op.ended = ClockMarks::at_ns(1000 * (k + 1) + 100 * (k + 1));
  }
  const auto began = std::chrono::steady_clock::now();
  const StepTimes times = read_step_times(step, &marks, &spans);
  EXPECT_LT(std::chrono::steady_clock::now() - began, KernelSpans::kPatience / 4) << "waited for the silent clock";
  EXPECT_EQ(times.duration_ns, (std::vector<double>{100, 200, 300}));
  EXPECT_EQ(times.stall_ns, (std::vector<double>{-1, 900, 800}));
  EXPECT_EQ(times.kernels_marked, 3u);
  EXPECT_EQ(times.kernels_clocked, 0u);
  EXPECT_EQ(times.kernels_missing, 0u) << "every kernel has its time";
  EXPECT_EQ(times.source, "events");
}

TEST(KernelSpansTest, MissingSpansAreAwaitedOnlyAsLongAsThePatience) {
  SilentClock clock;
  KernelSpans spans(clock);
  const std::vector<std::uint64_t> ids{1, 0, 2};
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(spans.await(ids, std::chrono::milliseconds(20)), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(1000));
}

}  // namespace
