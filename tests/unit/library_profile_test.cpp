// Profiles of steps whose heavy work runs inside library calls (common/
// library_op.h): layers and the backward pass read from the calls exactly,
// whatever the kernels' durations say and wherever the iteration starts;
// which uses overwrite their unit whole; and all of it kept by the trace's
// profiled step.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scheduler/iteration_profile.h"
#include "scheduler/profile_json.h"
#include "scheduler/swap_plan.h"
#include "scheduler/trigger_table.h"
#include "vmm/unit.h"

namespace vgpumem::scheduler {
namespace {

// One operation of a hand-made step: a kernel (or not), the library call
// it belongs to (0: none), what it touches and which of those it overwrites
// whole, and its duration.
struct Step {
  bool kernel = true;
  LibraryOp op = LibraryOp::none;
  std::uint64_t call = 0;
  std::vector<std::uint32_t> touches;
  std::uint64_t overwritten = 0;
  double duration_ns = 1000;
};

IterationProfile profile_of(const std::vector<Step>& steps, std::vector<vmm::Unit>& units, std::size_t rotate = 0,
                            const std::vector<std::uint64_t>& bytes = {}) {
  RecordedIteration recorded;
  std::vector<double> durations;
  for (std::size_t n = 0; n < steps.size(); ++n) {
    const Step& step = steps[(n + rotate) % steps.size()];
    RecordedOp op;
    op.identity = n + 1;
    op.function = step.kernel ? reinterpret_cast<CUfunction>(n + 1) : nullptr;
    op.first_unit = static_cast<std::uint32_t>(recorded.units.size());
    op.unit_count = static_cast<std::uint32_t>(step.touches.size());
    op.library_op = step.op;
    op.library_call = step.call;
    op.overwritten = step.overwritten;
    for (std::uint32_t u : step.touches) recorded.units.push_back(&units[u]);
    recorded.ops.push_back(op);
    durations.push_back(step.duration_ns);
  }
  ProfileSources sources;
  sources.time = [durations](std::size_t op, double* duration, double* stall) {
    *duration = durations[op];
    *stall = 0;
  };
  sources.bytes = [&units, bytes](const vmm::Unit* unit) {
    const auto u = static_cast<std::size_t>(unit - units.data());
    return u < bytes.size() ? bytes[u] : std::uint64_t{2} << 20;
  };
  return build_profile(recorded, sources);
}

// Two convolution layers: forward (a call of two kernels each, then a short
// activation kernel), a loss, backward (data and filter calls per layer,
// the activation's backward between), an optimizer kernel. Durations that
// would mislead the kernel-stream rule: the activations are the longest
// kernels, and one convolution kernel is as short as they are not.
std::vector<Step> two_conv_layers() {
  using L = LibraryOp;
  return {
      {true, L::conv_forward, 1, {0, 1, 2}, 0b100, 3000}, {true, L::conv_forward, 1, {2}, 0, 500},     // layer 1
      {true, L::none, 0, {2, 3}, 0, 9000},                                                             // relu
      {true, L::conv_forward, 2, {3, 4, 5}, 0b100, 3000}, {true, L::conv_forward, 2, {5}, 0, 500},     // layer 2
      {true, L::none, 0, {5, 6}, 0, 9000},                                                             // relu
      {true, L::none, 0, {6, 7}, 0, 200},                                                              // loss
      {true, L::conv_backward_data, 3, {7, 4, 8}, 0b100, 3000},                                        // layer 2
      {true, L::conv_backward_filter, 4, {7, 3, 9}, 0b100, 3000},
      {true, L::none, 0, {8, 2}, 0, 9000},                                                             // relu'
      {true, L::conv_backward_filter, 5, {8, 0, 10}, 0b100, 3000},                                     // layer 1
      {true, L::none, 0, {1, 10, 4, 9}, 0, 200},                                                       // optimizer
  };
}

TEST(LibraryProfile, LayersAreTheComputingCallsAndTheBackwardPassItsFirstCall) {
  std::vector<vmm::Unit> units(11);
  const IterationProfile profile = profile_of(two_conv_layers(), units);
  std::vector<std::size_t> heavy, convolutions;
  for (std::size_t i = 0; i < profile.period(); ++i) {
    if (profile.ops[i].heavy) heavy.push_back(i);
    if (profile.ops[i].convolution) convolutions.push_back(i);
  }
  EXPECT_EQ(heavy, (std::vector<std::size_t>{0, 3, 7, 8, 10})) << "each call's first kernel, never an activation";
  EXPECT_EQ(convolutions, (std::vector<std::size_t>{0, 1, 3, 4})) << "the forward convolutions' kernels";
  EXPECT_EQ(profile.backward_begins, 7u);
}

TEST(LibraryProfile, TheBackwardPassIsFoundWhereverTheIterationStarts) {
  std::vector<vmm::Unit> units(11);
  const std::size_t period = two_conv_layers().size();
  for (std::size_t rotate = 0; rotate < period; ++rotate) {
    const IterationProfile profile = profile_of(two_conv_layers(), units, rotate);
    EXPECT_EQ(profile.backward_begins, (7 + period - rotate) % period) << "iteration starting at operation " << rotate;
  }
}

// The control: without the calls, the kernel-stream rule takes the long
// activations for layers (which is why the calls are worth hooking).
TEST(LibraryProfile, WithoutTheCallsTheLongestKernelsLeadLayers) {
  std::vector<Step> steps = two_conv_layers();
  for (Step& step : steps) {
    step.op = LibraryOp::none;
    step.call = 0;
  }
  std::vector<vmm::Unit> units(11);
  const IterationProfile profile = profile_of(steps, units);
  EXPECT_TRUE(profile.ops[2].heavy);
  EXPECT_FALSE(profile.ops[1].heavy);
}

TEST(LibraryProfile, UsesThatOverwriteTheirUnitWholeAreMarked) {
  std::vector<vmm::Unit> units(11);
  const IterationProfile profile = profile_of(two_conv_layers(), units);
  const ProfileOp& first = profile.ops[0];
  ASSERT_EQ(first.use_count, 3u);
  EXPECT_FALSE(profile.overwrites_at(first.first_use));
  EXPECT_FALSE(profile.overwrites_at(first.first_use + 1));
  EXPECT_TRUE(profile.overwrites_at(first.first_use + 2)) << "unit 2, the first layer's output";
  std::size_t marked = 0;
  for (std::size_t at = 0; at < profile.uses.size(); ++at) marked += profile.overwrites_at(at) ? 1 : 0;
  EXPECT_EQ(marked, 5u);
}

TEST(LibraryProfile, TheProfiledStepKeepsTheCallsAndTheOverwrites) {
  std::vector<vmm::Unit> units(11);
  const IterationProfile written = profile_of(two_conv_layers(), units, 4);
  const IterationProfile read = profile_from_json(nlohmann::json::parse(profile_to_json(written).dump()));
  ASSERT_EQ(read.period(), written.period());
  for (std::size_t i = 0; i < read.period(); ++i) {
    EXPECT_EQ(read.ops[i].library, written.ops[i].library) << i;
    EXPECT_EQ(read.ops[i].call_start, written.ops[i].call_start) << i;
    EXPECT_EQ(read.ops[i].heavy, written.ops[i].heavy) << i;
  }
  EXPECT_EQ(read.overwrites, written.overwrites);
  EXPECT_EQ(read.backward_begins, written.backward_begins) << "read back from the calls, not the curve";
  nlohmann::json bad = profile_to_json(written);
  bad["overwrites"] = {{0, 9}};
  EXPECT_THROW(profile_from_json(bad), ProfileFormatError) << "operation 0 does not touch unit 9";
}

// A 128 MiB buffer written and read; 2.8 ms of other work once its copy
// out (2.4 ms at 55 GB/s) has begun, which makes room for a 16 MiB buffer;
// 0.5 ms over that one; 1.05 ms more while that one leaves; then the big
// buffer is overwritten whole by a library call and read again. The budget holds either buffer with the
// other away. The big one's copy back (2.4 ms more, after its copy out)
// cannot hide in what is left of its gap; with no copy back nothing waits.
std::vector<Step> overwritten_after_a_gap(bool said) {
  std::vector<Step> steps = {{true, LibraryOp::none, 0, {0}, 0, 1e6}, {true, LibraryOp::none, 0, {0, 2}, 0, 1e6}};
  for (int i = 0; i < 6; ++i) steps.push_back({true, LibraryOp::none, 0, {2}, 0, i < 2 ? 9e5 : 7e5});
  for (int i = 0; i < 10; ++i) steps.push_back({true, LibraryOp::none, 0, {1}, 0, 5e4});
  for (int i = 0; i < 3; ++i) steps.push_back({true, LibraryOp::none, 0, {2}, 0, 3.5e5});
  steps.push_back({true, said ? LibraryOp::matmul : LibraryOp::none, said ? 1u : 0u, {0}, said ? 1u : 0u, 1e6});
  steps.push_back({true, LibraryOp::none, 0, {0, 2}, 0, 1e6});
  return steps;
}

TEST(LibraryPlan, AUnitItsNextUseOverwritesComesBackWithoutTheLink) {
  constexpr std::uint64_t kMiB = 1 << 20;
  const std::vector<std::uint64_t> bytes = {128 * kMiB, 16 * kMiB, 2 * kMiB};
  const std::uint64_t budget = 136 * kMiB;
  const LinkModel link;
  for (const bool said : {true, false}) {
    std::vector<vmm::Unit> units(3);
    const IterationProfile profile = profile_of(overwritten_after_a_gap(said), units, 0, bytes);
    const Plan plan = plan_auto(profile, budget, link);
    ASSERT_TRUE(plan.fits) << said;
    const PlannedSwap* big = nullptr;
    for (const PlannedSwap& swap : plan.swaps) {
      if (swap.unit == 0) big = &swap;
    }
    ASSERT_NE(big, nullptr) << said;
    EXPECT_EQ(big->needed_by, 21u);
    EXPECT_EQ(big->no_copy_in, said);
    const PlanTiming timing = simulate(profile, plan, link);
    const double floor = step_floor(profile, budget, link);
    if (said) {
      EXPECT_EQ(timing.bytes_to_device, 16 * kMiB) << "only the 16 MiB buffer comes back over the link";
      EXPECT_NEAR(timing.step_ns, profile.step_ns, 1.0) << "every copy hides";
      EXPECT_NEAR(floor, profile.step_ns, 1.0);
      const TriggerTable table = make_trigger_table(profile, plan);
      EXPECT_EQ(table.prefetches.size(), plan.swaps.size() - 1) << "the overwritten buffer's use brings it back";
      for (vmm::Unit* unit : table.prefetches) EXPECT_NE(unit, &units[0]);
    } else {
      EXPECT_GE(timing.bytes_to_device, 144 * kMiB) << "both buffers come back over the link";
      EXPECT_GT(timing.step_ns, profile.step_ns + 1e5) << "both copies cannot hide in the gap";
      EXPECT_LE(floor, timing.step_ns);
    }
  }
}

}  // namespace
}  // namespace vgpumem::scheduler
