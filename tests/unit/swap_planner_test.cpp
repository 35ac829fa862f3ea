// The planners on synthetic steps: what auto and vDNN choose, where the
// prefetches go, what the plan costs on the two-engine timeline, and that
// no plan that fits beats the independent floor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/freed_bytes.h"
#include "vmm/move_pieces.h"
#include "scheduler/iteration_profile.h"
#include "scheduler/plan_pacing.h"
#include "scheduler/plan_placement.h"
#include "scheduler/swap_plan.h"
#include "scheduler/trigger_table.h"
#include "vmm/unit.h"

namespace vgpumem::scheduler {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

// A step written as operations over numbered units, profiled as the
// scheduler profiles a recording (build_profile).
struct SyntheticStep {
  std::vector<vmm::Unit> units;
  std::vector<std::uint64_t> bytes;
  std::vector<double> durations;
  std::vector<std::vector<std::uint32_t>> touches;
  std::set<std::size_t> convolutions;
  std::set<std::size_t> copies_to_host;  // operations that are the program's copies to the host

  explicit SyntheticStep(std::size_t unit_count) : units(unit_count), bytes(unit_count, 0) {}

  void op(double duration, std::vector<std::uint32_t> touched) {
    durations.push_back(duration);
    touches.push_back(std::move(touched));
  }

  IterationProfile profile(std::size_t offload_delay = 1) {
    RecordedIteration recorded;
    for (std::size_t i = 0; i < durations.size(); ++i) {
      RecordedOp op;
      op.identity = i + 1;
      op.function = copies_to_host.count(i) != 0 ? nullptr : reinterpret_cast<CUfunction>(i + 1);
      op.api = copies_to_host.count(i) != 0 ? "cuMemcpyDtoHAsync_v2" : "cuLaunchKernel";
      op.first_unit = static_cast<std::uint32_t>(recorded.units.size());
      op.unit_count = static_cast<std::uint32_t>(touches[i].size());
      for (std::uint32_t u : touches[i]) recorded.units.push_back(&units[u]);
      recorded.ops.push_back(op);
    }
    ProfileSources sources;
    sources.time = [this](std::size_t op, double* duration, double* stall) {
      *duration = durations[op];
      *stall = 0;
    };
    sources.bytes = [this](const vmm::Unit* unit) { return bytes[static_cast<std::size_t>(unit - units.data())]; };
    sources.convolution = [this](CUfunction f) {
      return convolutions.count(reinterpret_cast<std::uintptr_t>(f) - 1) != 0;
    };
    IterationProfile result = build_profile(recorded, sources);
    result.offload_delay = offload_delay;
    return result;
  }
};

// A CNN-shaped step: `layers` forward operations, each reading its input
// activation and weights and writing its output; the loss; the backward
// operations in reverse, each reading the layer's input, weights and
// incoming gradient; an optimizer update per layer. Activation a_l is unit
// l (a_0 the batch), weights w_l unit layers + 1 + l, gradient buffer one
// unit more.
SyntheticStep cnn(int layers, std::uint64_t activation, std::uint64_t weights, double forward_ns) {
  const std::uint32_t n = static_cast<std::uint32_t>(layers);
  SyntheticStep step(2 * n + 2);
  const std::uint32_t grad = 2 * n + 1;
  for (std::uint32_t l = 0; l <= n; ++l) step.bytes[l] = activation;
  for (std::uint32_t l = 0; l < n; ++l) step.bytes[n + 1 + l] = weights;
  step.bytes[grad] = activation;
  for (std::uint32_t l = 0; l < n; ++l) step.op(forward_ns, {l, n + 1 + l, l + 1});
  step.op(forward_ns / 4, {n, grad});  // the loss
  for (std::uint32_t l = n; l-- > 0;) step.op(2 * forward_ns, {l, n + 1 + l, grad});
  for (std::uint32_t l = 0; l < n; ++l) step.op(forward_ns / 8, {n + 1 + l});
  return step;
}

// A random step: min_units + up to unit_span - 1 units of 2 to 64 MiB;
// min_ops + up to op_span - 1 operations, each touching one to three of
// them and lasting 1 µs plus up to duration_span - 1 ns.
SyntheticStep random_step(std::mt19937& random, std::uint32_t min_units, std::uint32_t unit_span, int min_ops,
                          int op_span, std::uint32_t duration_span) {
  const std::uint32_t unit_count = min_units + random() % unit_span;
  SyntheticStep step(unit_count);
  for (auto& b : step.bytes) b = (1 + random() % 32) * 2 * kMiB;
  const int ops = min_ops + static_cast<int>(random() % static_cast<std::uint32_t>(op_span));
  for (int i = 0; i < ops; ++i) {
    std::vector<std::uint32_t> touched;
    for (int k = 0, n = 1 + static_cast<int>(random() % 3); k < n; ++k) touched.push_back(random() % unit_count);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    step.op(1'000 + random() % duration_span, touched);
  }
  return step;
}

TEST(IterationProfile, FindsTheTurnAndTheLayerHeads) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile profile = step.profile();
  EXPECT_EQ(profile.period(), 8u + 1 + 8 + 8);
  // The peak of idle bytes lies between the last forward and the first
  // backward operation.
  EXPECT_GE(profile.backward_begins, 7u);
  EXPECT_LE(profile.backward_begins, 9u);
  for (std::size_t op = 0; op < profile.period(); ++op) {
    const bool layer = op < 8 || (op >= 9 && op < 17);
    EXPECT_EQ(profile.ops[op].heavy, layer) << op;
  }
  EXPECT_EQ(profile.total_bytes, 10 * 64 * kMiB + 8 * 4 * kMiB);
  EXPECT_DOUBLE_EQ(profile.step_ns, 8 * 100'000 + 25'000 + 8 * 200'000 + 8 * 12'500);
}

TEST(SwapPlanner, NothingMovesWhenTheStepFits) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile profile = step.profile();
  const Plan plan = plan_auto(profile, 2 * profile.total_bytes, LinkModel{});
  EXPECT_TRUE(plan.swaps.empty());
  EXPECT_TRUE(plan.fits);
}

TEST(SwapPlanner, ACnnStepWithComputeToSpareFitsUnderHalfItsBytesAndHidesEveryCopy) {
  // 64 MiB crosses the link in 1.2 ms; each forward layer runs 2 ms.
  SyntheticStep step = cnn(12, 64 * kMiB, 4 * kMiB, 2'000'000);
  const IterationProfile profile = step.profile();
  const std::uint64_t budget = profile.total_bytes / 2;
  const LinkModel link;
  const Plan plan = plan_auto(profile, budget, link);
  ASSERT_TRUE(plan.fits) << plan.peak_after << " > " << plan.target;
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  EXPECT_LE(*std::max_element(curve.begin(), curve.end()), plan.target);
  const PlanTiming timing = simulate(profile, plan, link);
  EXPECT_LE(timing.step_ns, 1.05 * profile.step_ns) << "stall " << timing.stall_ns;
  EXPECT_GE(timing.bytes_to_host, profile.total_bytes - budget);
  // A buffer the step keeps may go out twice a step (before the backward
  // pass and after it), never more.
  EXPECT_LE(timing.bytes_to_host, 2 * profile.total_bytes);
}

TEST(SwapPlanner, PrefetchesLandBeforeTheirUseWhenTheLinkAndMemoryAllow) {
  // Half the bytes: room for the chunks a prefetch takes to be emptied by
  // saves that ended long before (at a third, they are the saves of the
  // layer just done: see APrefetchWaitsForThePieceOfTheSaveThatEmptiesItsChunks).
  SyntheticStep step = cnn(12, 64 * kMiB, 4 * kMiB, 2'000'000);
  const IterationProfile profile = step.profile();
  const LinkModel link;
  const Plan plan = plan_auto(profile, profile.total_bytes / 2, link);
  ASSERT_TRUE(plan.fits);
  EXPECT_LT(simulate(profile, plan, link).stall_ns, 0.01 * profile.step_ns);
  for (const PlannedSwap& swap : plan.swaps) {
    const std::size_t need = timeline::needed_unrolled(profile, swap);
    const std::size_t at = timeline::prefetch_unrolled(profile, swap);
    EXPECT_LT(at, need);
    EXPECT_GT(at, timeline::offload_issued_unrolled(profile, swap)) << "a unit is away for at least one operation";
  }
}

// Units 0 and 1, 64 MiB each, under a 64 MiB budget: 0 goes out after op
// 0 and its chunks are all the room 1 has to come back into, at op 1.
struct TwoUnitsOneRoom {
  IterationProfile profile;
  Plan plan;
  TwoUnitsOneRoom() {
    SyntheticStep step(2);
    step.bytes = {64 * kMiB, 64 * kMiB};
    step.op(10'000, {0});
    step.op(10'000, {});
    step.op(10'000, {1});
    step.op(10'000, {});
    profile = step.profile(0);
    plan.budget = plan.target = 64 * kMiB;
    PlannedSwap zero, one;
    zero.unit = 0, zero.offload_after = 0, zero.needed_by = 0, zero.prefetch_at = 3;
    one.unit = 1, one.offload_after = 2, one.needed_by = 2, one.prefetch_at = 1;
    plan.swaps = {zero, one};
  }
};

TEST(PlanTiming, APrefetchWaitsForThePieceOfTheSaveThatEmptiesItsChunks) {
  TwoUnitsOneRoom two;
  const IterationProfile& profile = two.profile;
  Plan& plan = two.plan;
  const LinkModel link;
  const double copy = link.to_host_ns(64 * kMiB);
  const double piece = link.to_device_ns(vmm::kMovePieceBytes);
  // Each piece of unit 1 (vmm/move_pieces.h) starts coming in once the
  // piece of unit 0's save that empties its chunks ends: the step waits
  // for a copy and one piece more, twice (unit 0 comes back the same way),
  // and not for both copies in turn.
  const PlanTiming timing = simulate(profile, plan, link);
  EXPECT_GE(timing.step_ns, 2 * (copy + piece) - 40'000);
  EXPECT_LT(timing.step_ns, 2 * (copy + piece) + 100'000) << "a piece waited for more than the save of its chunks";
  // With room for both, each copy starts at its trigger.
  plan.budget = 128 * kMiB;
  EXPECT_LT(simulate(profile, plan, link).step_ns, timing.step_ns - piece);
}

// simulate(..., explain) says which prefetches land late and what held
// each back: in the step above, unit 1 waits for unit 0's save (the room
// it takes); with room for both, unit 1 fired one short operation ahead of
// a 64 MiB copy is late for its own copy's time.
TEST(PlanTiming, ALatePrefetchIsExplained) {
  TwoUnitsOneRoom two;
  const IterationProfile& profile = two.profile;
  Plan& plan = two.plan;
  const LinkModel link;
  EXPECT_TRUE(simulate(profile, plan, link).late.empty()) << "explained only when asked";
  const auto cause_of = [&](std::uint32_t swap) {
    const PlanTiming timing = simulate(profile, plan, link, true);
    for (const PlanTiming::Late& late : timing.late) {
      if (late.swap == swap) {
        EXPECT_GT(late.waited_ns, 0);
        return late.cause;
      }
    }
    ADD_FAILURE() << "swap " << swap << " is not late";
    return PlanTiming::Cause::link;
  };
  EXPECT_EQ(cause_of(1), PlanTiming::Cause::room);
  plan.budget = plan.target = 128 * kMiB;
  EXPECT_EQ(cause_of(1), PlanTiming::Cause::trigger);
}

// The driver's lane (LinkModel::fetch_driver_ns): a fetch's copy starts
// once its unit is mapped, and every fetch's mapping waits for those before
// it. Unit 0 goes out after op 0 and is fetched at op 1's start, 10 ms
// before op 2 needs it: its copy (1.2 ms) hides. Mapping it first for
// 12 ms makes op 2 wait, for the driver; two such fetches in a row make
// the second wait for the first's mapping too.
TEST(PlanTiming, TheDriverWorkBeforeAFetchsCopyIsChargedInTurnAndExplained) {
  SyntheticStep step(2);
  step.bytes = {64 * kMiB, 64 * kMiB};
  step.op(10'000, {0, 1});
  step.op(10'000'000, {});
  step.op(10'000, {0, 1});
  const IterationProfile profile = step.profile(0);
  Plan plan;
  plan.budget = plan.target = 256 * kMiB;
  PlannedSwap zero;
  zero.unit = 0, zero.offload_after = 0, zero.needed_by = 2, zero.prefetch_at = 1;
  plan.swaps = {zero};
  LinkModel link;
  const PlanTiming free_driver = simulate(profile, plan, link);
  EXPECT_NEAR(free_driver.stall_ns, 0, 1.0) << "the copy hides behind op 1";

  link.fetch_driver_ns = 12'000'000;
  const PlanTiming mapped_first = simulate(profile, plan, link, true);
  const double copy = link.to_device_ns(vmm::kMovePieceBytes) * (64 * kMiB / vmm::kMovePieceBytes);
  EXPECT_NEAR(mapped_first.stall_ns, 12'000'000 + copy - 10'000'000, 50'000);
  ASSERT_EQ(mapped_first.late.size(), 1u);
  EXPECT_EQ(mapped_first.late[0].cause, PlanTiming::Cause::driver);

  PlannedSwap one = zero;
  one.unit = 1;
  plan.swaps = {zero, one};
  link.fetch_driver_ns = 6'000'000;  // each hides alone (6 + 1.2 < 10 ms); the second's waits for the first's
  const PlanTiming in_turn = simulate(profile, plan, link, true);
  EXPECT_NEAR(in_turn.stall_ns, 2 * 6'000'000 + copy - 10'000'000, 50'000);
  bool driver_late = false;
  for (const PlanTiming::Late& late : in_turn.late) driver_late |= late.cause == PlanTiming::Cause::driver;
  EXPECT_TRUE(driver_late);
  // And a save's unmapping is on the same lane: the next fetch's mapping waits for it.
  link.save_driver_ns = 2'000'000;
  plan.swaps = {zero};
  link.fetch_driver_ns = 6'000'000;
  EXPECT_NEAR(simulate(profile, plan, link).stall_ns, 0, 1.0) << "an unmap, a mapping and the copy: 9.2 ms, hidden";
  link.save_driver_ns = 5'000'000;
  EXPECT_GT(simulate(profile, plan, link).stall_ns, 500'000) << "the unmap ahead of it delays the mapping";
}

// Where each move costs the driver work besides its bytes (on an H200 under
// training more, for a 2 MiB unit, than its copy), the greedy by coverage
// per move ranks gaps per byte with that work counted as bytes of link
// time: on random steps it moves fewer, larger units than by coverage, and
// its plans still fit; and plan_auto keeps whichever the model finds
// faster.
TEST(SwapPlanner, WhereEachMoveCostsDriverWorkTheGreedyByCoverageMovesFewerLargerUnits) {
  std::mt19937 random(16);
  LinkModel dear_moves;
  dear_moves.fetch_driver_ns = 120'000;  // the H200's map and set-access of a one-handle unit
  dear_moves.save_driver_ns = 60'000;    // and its unmap
  int fewer = 0, more = 0, compared = 0;
  std::uint64_t moves_by_coverage = 0, moves_dear = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SyntheticStep step = random_step(random, 8, 24, 20, 80, 200'000);
    const IterationProfile profile = step.profile(random() % 3);
    const std::uint64_t budget = profile.total_bytes * (30 + random() % 50) / 100;
    const std::vector<PlannedSwap> pool = auto_candidates(profile, dear_moves, {});
    const Plan plain = plan_auto_greedy(profile, budget, dear_moves, {}, pool, GapOrder::coverage);
    const Plan dear = plan_auto_greedy(profile, budget, dear_moves, {}, pool, GapOrder::coverage_per_move);
    const Plan chosen = plan_auto(profile, budget, dear_moves, {}, /*refine=*/false);
    if (plain.fits && dear.fits) {
      EXPECT_LE(simulate(profile, chosen, dear_moves).step_ns,
                std::min(simulate(profile, plain, dear_moves).step_ns, simulate(profile, dear, dear_moves).step_ns) *
                    1.000001)
          << "trial " << trial;
    }
    if (!plain.fits) continue;
    ++compared;
    EXPECT_TRUE(dear.fits) << "trial " << trial;
    moves_by_coverage += plain.swaps.size();
    moves_dear += dear.swaps.size();
    fewer += dear.swaps.size() < plain.swaps.size();
    more += dear.swaps.size() > plain.swaps.size();
  }
  EXPECT_GE(compared, 20);
  EXPECT_GT(fewer, 2 * more) << "of " << compared;
  EXPECT_LT(static_cast<double>(moves_dear), 0.95 * static_cast<double>(moves_by_coverage));
}

// The pool simulate() follows: a prefetch that takes bytes while the
// start's debt is still being paid owes them too, so the saves after it pay
// them back before their bytes are free. (Taken for nothing, the model once
// found that much phantom room in every later step.)
TEST(PlanTiming, BytesTakenWhileOwedAreOwedTooAndFreedOnlyOncePaidBack) {
  constexpr double kBytes = 64.0 * kMiB;
  FreedBytes pool(128 * kMiB, 192 * kMiB);  // a unit's worth over the budget at the start
  EXPECT_EQ(pool.take(kBytes), -std::numeric_limits<double>::infinity()) << "taken at once: the warm-up";
  pool.give_back(kBytes, 10);  // both pay back what is owed
  pool.give_back(kBytes, 20);
  pool.give_back(kBytes, 30);
  EXPECT_EQ(pool.take(kBytes), 30) << "the only bytes free are the last save's";
  FreedBytes roomy(256 * kMiB, 192 * kMiB);
  EXPECT_EQ(roomy.take(kBytes), -std::numeric_limits<double>::infinity()) << "spare room: at once";
  roomy.give_back(kBytes, 10);
  EXPECT_EQ(roomy.take(kBytes), 10);
}

// The program's copy to the host (a loss read) runs on the copy-out engine
// behind the saves issued before it: a 64 MiB save issued just before it
// holds it (and the step after it) back by the save's time.
TEST(PlanTiming, AProgramsCopyToTheHostWaitsBehindTheSavesBeforeIt) {
  SyntheticStep step(2);
  step.bytes = {64 * kMiB, 2 * kMiB};
  step.op(10'000, {0});
  step.op(10'000, {});
  step.op(2'000, {1});  // the copy
  step.op(4'000'000, {});  // room for unit 0 to go out and come back
  step.op(10'000, {});
  step.copies_to_host.insert(2);
  const IterationProfile profile = step.profile(0);
  ASSERT_TRUE(profile.ops[2].to_host);
  EXPECT_FALSE(profile.ops[1].to_host);
  Plan plan;
  plan.budget = plan.target = 128 * kMiB;
  PlannedSwap out;
  out.unit = 0, out.offload_after = 0, out.needed_by = 0, out.prefetch_at = 3;  // saved at op 1
  plan.swaps = {out};
  const LinkModel link;
  const double save = link.to_host_ns(64 * kMiB);
  const double with_copy = simulate(profile, plan, link).step_ns;
  EXPECT_GE(with_copy, profile.step_ns + save - 30'000) << "the copy waited for the save";
  step.copies_to_host.clear();  // the same operation as a kernel
  EXPECT_LT(simulate(step.profile(0), plan, link).step_ns, profile.step_ns + 1'000) << "nothing waits";
}

// A step that ends with the loss read: the optimizer's updates just before
// it send their state out, and those saves would hold the read (and the
// next step) back. The plan holds the closest of them until just after the
// read, where it still fits, and is faster for it.
TEST(SwapPlanner, SavesJustBeforeTheProgramsCopyToTheHostAreHeldBackUntilAfterIt) {
  constexpr std::uint32_t n = 8;
  SyntheticStep step(2 * n + 2);
  const std::uint32_t loss = 2 * n + 1;
  for (std::uint32_t l = 0; l <= n; ++l) step.bytes[l] = 8 * kMiB;   // activations
  for (std::uint32_t l = 0; l < n; ++l) step.bytes[n + 1 + l] = 16 * kMiB;  // weights and their state
  step.bytes[loss] = 2 * kMiB;
  for (std::uint32_t l = 0; l < n; ++l) step.op(400'000, {l, n + 1 + l, l + 1});
  step.op(100'000, {n, loss});
  for (std::uint32_t l = n; l-- > 0;) step.op(800'000, {l, n + 1 + l, l + 1});
  for (std::uint32_t l = 0; l < n; ++l) step.op(50'000, {n + 1 + l});  // the optimizer
  step.copies_to_host.insert(step.durations.size());
  step.op(2'000, {loss});  // the loss read
  const IterationProfile profile = step.profile(1);
  const LinkModel link;
  const Plan plan = plan_auto(profile, profile.total_bytes * 3 / 4, link, {}, /*refine=*/false);
  ASSERT_TRUE(plan.fits);
  std::size_t held = 0;
  Plan unheld = plan;
  for (PlannedSwap& swap : unheld.swaps) {
    held += swap.offload_late != 0 ? 1 : 0;
    swap.offload_late = 0;
  }
  EXPECT_GT(held, 0u) << "some save is held back past the read";
  EXPECT_LT(simulate(profile, plan, link).step_ns, simulate(profile, unheld, link).step_ns);
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  EXPECT_LE(*std::max_element(curve.begin(), curve.end()), plan.target);
  // Each held save now goes right after the read, the step's last operation.
  for (const PlannedSwap& swap : plan.swaps) {
    if (swap.offload_late != 0) {
      EXPECT_EQ(timeline::offload_issued_unrolled(profile, swap) % profile.period(), 0u);
    }
  }
}

// A step that ends with the loss read, which the program waits for: a
// prefetch triggered after it (by the next step's first operation) starts
// only once the read is done. Triggered by the operation before the read,
// it lands while the program waits, and the step is faster for it; with
// the read a kernel (nothing waits for it) the trigger stays.
TEST(SwapPlanner, APrefetchTriggeredAfterTheProgramsCopyToTheHostGoesBeforeIt) {
  SyntheticStep step(2);
  step.bytes = {64 * kMiB, 2 * kMiB};
  step.op(10'000, {});      // 0: the batch
  step.op(10'000, {0});     // 1: needs unit 0
  step.op(4'000'000, {});   // 2
  step.op(10'000, {1});     // 3
  step.op(4'000'000, {});   // 4: room for the copy back
  step.op(2'000, {1});      // 5: the loss read
  step.copies_to_host.insert(5);
  const IterationProfile profile = step.profile(0);
  Plan plan;
  plan.budget = plan.target = 128 * kMiB;
  PlannedSwap away;
  away.unit = 0, away.offload_after = 1, away.needed_by = 1, away.prefetch_at = 0;  // fired by the next step's first
  plan.swaps = {away};
  const LinkModel link;
  const double before = simulate(profile, plan, link).step_ns;
  Plan hoisted = plan;
  hoist_prefetches_over_program_copies(profile, link, &hoisted);
  EXPECT_EQ(hoisted.swaps[0].prefetch_at, 4u) << "the operation before the read";
  EXPECT_LT(simulate(profile, hoisted, link).step_ns, before - link.to_device_ns(64 * kMiB) / 2);

  step.copies_to_host.clear();
  const IterationProfile no_copy = step.profile(0);
  Plan kept = plan;
  hoist_prefetches_over_program_copies(no_copy, link, &kept);
  EXPECT_EQ(kept.swaps[0].prefetch_at, 0u) << "no copy to the host, nothing moved";
}

// The same, where another unit fills the room before the read: brought back
// there, unit 0 would not fit, so its trigger stays.
TEST(SwapPlanner, APrefetchGoesBeforeTheProgramsCopyToTheHostOnlyWhereItFits) {
  SyntheticStep step(3);
  step.bytes = {64 * kMiB, 2 * kMiB, 62 * kMiB};
  step.op(10'000, {});        // 0
  step.op(10'000, {0});       // 1
  step.op(4'000'000, {});     // 2
  step.op(10'000, {1, 2});    // 3
  step.op(4'000'000, {2});    // 4
  step.op(2'000, {1, 2});     // 5: the loss read (and the metric beside it)
  step.copies_to_host.insert(5);
  const IterationProfile profile = step.profile(0);
  Plan plan;
  plan.budget = plan.target = 66 * kMiB;
  PlannedSwap zero, two;
  zero.unit = 0, zero.offload_after = 1, zero.needed_by = 1, zero.prefetch_at = 0;
  two.unit = 2, two.offload_after = 5, two.needed_by = 3, two.prefetch_at = 2;
  plan.swaps = {zero, two};
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  ASSERT_LE(*std::max_element(curve.begin(), curve.end()), plan.target) << "the plan fits as it is";
  Plan unfit = plan;
  unfit.swaps[0].prefetch_at = 4;
  const std::vector<std::uint64_t> hoisted_curve = resident_curve(profile, unfit);
  ASSERT_GT(*std::max_element(hoisted_curve.begin(), hoisted_curve.end()), plan.target);
  hoist_prefetches_over_program_copies(profile, LinkModel{}, &plan);
  EXPECT_EQ(plan.swaps[0].prefetch_at, 0u) << "unit 0 beside unit 2 at operation 4 would not fit";
}

TEST(StepFloor, ActivationsThatGoOutInTheForwardPassAndComeBackInTheBackwardCostBothWays) {
  // Eight 64 MiB activations written in a forward pass and read back in
  // reverse, 10 µs an operation: the link sets the pace. Half the bytes
  // away at the turn go out before it and come back after it, so the step
  // is at least that link time twice over, not once (the plain bound).
  SyntheticStep step(8);
  for (auto& b : step.bytes) b = 64 * kMiB;
  for (std::uint32_t l = 0; l < 8; ++l) step.op(10'000, {l});
  for (std::uint32_t l = 8; l-- > 0;) step.op(10'000, {l});
  const IterationProfile profile = step.profile(0);
  const LinkModel link;
  const std::uint64_t budget = profile.total_bytes / 2;
  const double one_way = static_cast<double>(profile.total_bytes - budget) / link.to_host_bytes_per_ns;
  const double floor = step_floor(profile, budget, link);
  // Not quite twice: the first and last layers' own operations are not
  // needed to be away, the compute of the stretches is counted once.
  EXPECT_GT(floor, 1.7 * one_way);
  EXPECT_LE(floor, 2.0 * one_way + profile.step_ns);
  const Plan plan = plan_auto(profile, budget, link);
  ASSERT_TRUE(plan.fits);
  EXPECT_GE(simulate(profile, plan, link).step_ns, floor);
}

// The least bytes on steps solved by hand. Two 10 MiB units, a used at
// operation 0 and b at 1 of three, room for one: at 0 only b can be away,
// at 1 only a, at 2 either; each leaves once a step, 20 MiB. The bound is
// the unrolled line's least over 66 steps where it spans 64: at most the
// exact least, at least 64 / 66 of it.
TEST(LeastBytes, IsTheLeastCoverOfTheExcessOnStepsSolvedByHand) {
  SyntheticStep step(2);
  step.bytes = {10 * kMiB, 10 * kMiB};
  step.op(1'000, {0});
  step.op(1'000, {1});
  step.op(1'000, {});
  IterationProfile profile = step.profile(0);
  const auto near = [](double bytes, double exact) { return bytes <= exact && bytes >= exact * 64 / 66; };
  EXPECT_PRED2(near, least_bytes_moved(profile, 10 * kMiB), 20.0 * kMiB);
  EXPECT_EQ(least_bytes_moved(profile, 20 * kMiB), 0) << "nothing need move";
  EXPECT_EQ(least_bytes_moved(profile, 5 * kMiB), 0) << "no schedule fits: a alone is over the budget";
  // a's next use overwrites it whole: its gap is free (a schedule may drop
  // its bytes), and only b's 10 MiB need cross.
  profile.units[0].overwritten = {1};
  EXPECT_PRED2(near, least_bytes_moved(profile, 10 * kMiB), 10.0 * kMiB);
}

// Kept past each last use (the pager's launch grace), a unit is away for
// less of each gap, and any schedule keeping it so moves more, or none
// fits. Three 10 MiB units used in turn twice a step (a b c a b c), room
// for two: one away at every operation. Away from the operation after a
// last use, each gap covers the two operations before its next use: three
// gaps, 30 MiB. Kept one operation, each gap covers one: all six, 60 MiB.
// Kept two, no gap covers any operation.
TEST(LeastBytes, KeepingUnitsPastTheirLastUseMovesMoreOrLeavesNoScheduleThatFits) {
  SyntheticStep step(3);
  step.bytes = {10 * kMiB, 10 * kMiB, 10 * kMiB};
  for (std::uint32_t round = 0; round < 2; ++round) {
    for (std::uint32_t u = 0; u < 3; ++u) step.op(1'000, {u});
  }
  const IterationProfile profile = step.profile(0);
  const auto near = [](std::optional<double> bytes, double exact) {
    return bytes.has_value() && *bytes <= exact && *bytes >= exact * 64 / 66;
  };
  EXPECT_PRED2(near, least_bytes_keeping(profile, 20 * kMiB, 0), 30.0 * kMiB);
  EXPECT_EQ(least_bytes_keeping(profile, 20 * kMiB, 0), least_bytes_moved(profile, 20 * kMiB));
  EXPECT_PRED2(near, least_bytes_keeping(profile, 20 * kMiB, 1), 60.0 * kMiB);
  EXPECT_EQ(least_bytes_keeping(profile, 20 * kMiB, 2), std::nullopt) << "kept through the next use";
  EXPECT_EQ(least_bytes_keeping(profile, 30 * kMiB, 2), 0.0) << "nothing need move";
}

// Where units leave more than once a step, two cuts see each unit away
// once or twice, and the least bytes are the floor. Four 64 MiB units each
// used three times a step (u at u, u + 4 and u + 8), room for one: all
// three others are away at every operation, every gap whole, 12 gaps of
// 64 MiB each way a step; the two cuts count at most twice the 192 MiB
// away at a cut.
TEST(StepFloor, UnitsThatLeaveThreeTimesAStepCostThreeCrossingsEachWay) {
  SyntheticStep step(4);
  for (auto& b : step.bytes) b = 64 * kMiB;
  for (std::uint32_t round = 0; round < 3; ++round) {
    for (std::uint32_t u = 0; u < 4; ++u) step.op(10'000, {u});
  }
  const IterationProfile profile = step.profile(0);
  const LinkModel link;
  const double least = least_bytes_moved(profile, 64 * kMiB);
  EXPECT_LE(least, 12.0 * 64 * kMiB);
  EXPECT_GE(least, 12.0 * 64 * kMiB * 64 / 66);
  const double floor = step_floor(profile, 64 * kMiB, link);
  EXPECT_GE(floor, least / link.to_host_bytes_per_ns);
  EXPECT_GT(floor, 1.4 * 2 * 192 * kMiB / link.to_host_bytes_per_ns + profile.step_ns)
      << "more than two cuts alone can say";
}

// Skipping the pairs of cuts whose search cannot raise the bound found so
// far gives the bound of searching them all, on random steps, link-bound
// and compute-bound, with whole overwrites, at every cut and at a few.
TEST(StepFloor, SkippingPairsThatCannotRaiseItGivesTheSameFloor) {
  std::mt19937 random(31);
  int raised_by_a_search = 0;
  for (int trial = 0; trial < 80; ++trial) {
    SyntheticStep step = random_step(random, 3, 16, 8, 60, trial % 2 == 0 ? 200'000 : 5'000'000);
    IterationProfile profile = step.profile(random() % 4);
    for (ProfileUnit& unit : profile.units) {
      if (random() % 5 == 0 && !unit.uses.empty()) unit.overwritten.assign(unit.uses.size(), 1);
    }
    LinkModel link;
    link.to_device_bytes_per_ns = link.to_host_bytes_per_ns * (0.5 + 0.1 * static_cast<double>(random() % 10));
    const std::uint64_t budget = profile.total_bytes * (20 + random() % 70) / 100;
    for (const std::size_t cuts : {std::size_t{0}, std::size_t{7}}) {
      const double skipping = step_floor(profile, budget, link, cuts);
      const double every = step_floor(profile, budget, link, cuts, FloorSearch::every_pair);
      EXPECT_EQ(skipping, every) << "trial " << trial << ", cuts " << cuts;
      const double plain = std::max(profile.step_ns, least_bytes_moved(profile, budget) / link.to_host_bytes_per_ns);
      raised_by_a_search += every > plain * 1.0001;
    }
  }
  EXPECT_GT(raised_by_a_search, 20) << "steps where the pairs of cuts, not the plain bound, set the floor";
}

TEST(StepFloor, IsTheComputeWhenNothingNeedsToMoveAndThePlainBoundAtLeast) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile profile = step.profile();
  const LinkModel link;
  EXPECT_DOUBLE_EQ(step_floor(profile, profile.total_bytes, link), profile.step_ns);
  const std::uint64_t budget = profile.total_bytes / 2;
  const double plain = static_cast<double>(profile.total_bytes - budget) / link.to_host_bytes_per_ns;
  EXPECT_GE(step_floor(profile, budget, link), std::max(plain, profile.step_ns));
}

TEST(SwapPlanner, ALinkBoundStepStillFitsAndCostsNoLessThanTheFloor) {
  // 64 MiB layers of 100 µs: the link, not compute, sets the pace. (Each
  // operation and the two before it hold their units: half the step's
  // bytes leaves them room.)
  SyntheticStep step = cnn(12, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile profile = step.profile();
  const LinkModel link;
  const std::uint64_t budget = profile.total_bytes / 2;
  const Plan plan = plan_auto(profile, budget, link);
  EXPECT_TRUE(plan.fits);
  const double floor = step_floor(profile, budget, link);
  EXPECT_GT(floor, profile.step_ns) << "the floor is the link's here";
  EXPECT_GE(simulate(profile, plan, link).step_ns, floor);
}

// The launch grace keeps every unit an operation names on the device for
// the next K operations. On a short step of large units, holding eight
// operations' worth leaves no plan room under the cap; with the grace cut
// (halved until a plan fits) one fits, and its offloads are issued that
// much sooner after each last use: the trigger table says they may take
// units inside the grace.
TEST(SwapPlanner, WhereTheGraceLeavesNoRoomAPlanCutsItAsFarAsItMust) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile graced = step.profile(/*offload_delay=*/8);
  const LinkModel link;
  std::uint64_t budget = graced.total_bytes;
  while (budget > 0 && plan_auto(graced, budget, link).fits) budget -= 16 * kMiB;
  ASSERT_GT(budget, 0u);
  ASSERT_FALSE(plan_auto(graced, budget, link).fits) << "the full grace leaves no room here";
  const Plan cut = plan_auto_cutting_grace(graced, budget, link);
  ASSERT_TRUE(cut.fits) << "budget " << budget / kMiB << " MiB";
  ASSERT_TRUE(cut.offload_delay.has_value());
  EXPECT_LT(*cut.offload_delay, graced.offload_delay);
  // The largest of the halvings (4, 2, 1, 0 operations) that fits.
  const std::size_t grace = *cut.offload_delay;
  if (grace < 4) {
    IterationProfile more = graced;
    more.offload_delay = grace == 0 ? 1 : 2 * grace;
    EXPECT_FALSE(plan_auto(more, budget, link).fits) << "a longer grace would have fitted: " << more.offload_delay;
  }
  const IterationProfile planned = profile_for(graced, cut);
  EXPECT_EQ(planned.offload_delay, grace);
  // Refined like any plan that fits (plan_refinement.h): the trial measures
  // it, and keeps it if it is the fastest way.
  const Plan greedy = plan_auto(planned, budget, link, {}, /*refine=*/false);
  ASSERT_TRUE(greedy.fits);
  EXPECT_LT(simulate(planned, cut, link).step_ns, simulate(planned, greedy, link).step_ns);
  const std::vector<std::uint64_t> curve = resident_curve(planned, cut);
  EXPECT_LE(*std::max_element(curve.begin(), curve.end()), cut.target);
  const TriggerTable table = make_trigger_table(graced, cut);
  EXPECT_TRUE(table.inside_grace);
  const std::size_t period = graced.period();
  for (const PlannedSwap& swap : cut.swaps) {
    const std::size_t at = (swap.offload_after + grace) % period;
    const vmm::Unit* unit = graced.units[swap.unit].unit;
    EXPECT_NE(std::ranges::find(table.offloads_at(at), unit), table.offloads_at(at).end())
        << "unit " << swap.unit << " goes out " << grace << " operations after its last use";
  }
  EXPECT_FALSE(make_trigger_table(graced, plan_auto(graced, graced.total_bytes / 2 + 64 * kMiB, link)).inside_grace);
}

// A step one operation of which names more than the cap (three 100 MiB
// units at once): no plan fits there, whatever it moves. The plan still
// brings every other operation under its target, so that on demand has
// only that one to make room for: the greedy does not stop at the first
// peak it cannot lower.
TEST(SwapPlanner, APeakNoPlanCanLowerLeavesTheOthersToThePlanNotToOnDemand) {
  SyntheticStep step(10);
  for (std::uint32_t u = 0; u < 3; ++u) step.bytes[u] = 100 * kMiB;
  for (std::uint32_t u = 3; u < 9; ++u) step.bytes[u] = 40 * kMiB;
  step.bytes[9] = 2 * kMiB;
  step.op(1'000'000, {0, 1, 2});  // over the cap by itself
  for (std::uint32_t u = 3; u < 9; ++u) step.op(1'000'000, {u});
  step.op(1'000'000, {9});
  for (std::uint32_t u = 9; u-- > 3;) step.op(1'000'000, {u});
  const IterationProfile profile = step.profile();
  const LinkModel link;
  const std::uint64_t budget = 250 * kMiB;
  const Plan plan = plan_auto(profile, budget, link, {}, /*refine=*/false);
  EXPECT_FALSE(plan.fits);
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  EXPECT_GT(curve[0], plan.target) << "the operation over the cap by itself";
  for (std::size_t op = 3; op + 3 < curve.size(); ++op) {
    EXPECT_LE(curve[op], plan.target) << "operation " << op << ": " << curve[op] / kMiB << " MiB resident";
  }
  EXPECT_GT(excess_left(profile, plan), 0u);
  EXPECT_EQ(excess_left(profile, plan_auto(profile, 2 * budget, link)), 0u);
}

// Where no grace lets a plan fit, auto's partial plan is the one that
// leaves on demand less: with the grace cut, the units of the last eight
// operations can go too, and fewer bytes are left over the target.
TEST(SwapPlanner, WhereNoGraceFitsThePartialPlanLeavingOnDemandLessIsKept) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile graced = step.profile(/*offload_delay=*/8);
  const LinkModel link;
  // Below one operation's operands (each names 132 MiB): nothing fits.
  const std::uint64_t budget = 130 * kMiB;
  IterationProfile ungraced = graced;
  ungraced.offload_delay = 0;
  ASSERT_FALSE(plan_auto(ungraced, budget, link).fits);
  const Plan full = plan_auto(graced, budget, link);
  ASSERT_FALSE(full.fits);
  const Plan kept = fit_by_cutting_grace(graced, budget, link, {}, full);
  EXPECT_FALSE(kept.fits);
  EXPECT_EQ(kept.offload_delay, std::optional<std::size_t>(0)) << "the grace cut to none";
  EXPECT_LT(excess_left(graced, kept), excess_left(graced, full));
  EXPECT_TRUE(make_trigger_table(graced, kept).inside_grace);
}

TEST(SwapPlanner, NoPlanThatFitsBeatsTheFloorOnRandomSteps) {
  std::mt19937 random(14);
  const LinkModel link;
  int kept_moves_more = 0;  // plans whose grace raises the least they could move
  for (int trial = 0; trial < 60; ++trial) {
    SyntheticStep step = random_step(random, 4, 24, 10, 80, 2'000'000);
    const IterationProfile profile = step.profile(random() % 9);
    const std::uint64_t budget = profile.total_bytes * (20 + random() % 70) / 100;
    const Plan plan = plan_auto(profile, budget, link);
    const PlanTiming timing = simulate(profile, plan, link);
    if (plan.fits) {
      EXPECT_GE(timing.step_ns * 1.000001, step_floor(profile, budget, link)) << "trial " << trial;
      // A plan is a schedule: it moves no fewer bytes than the least.
      const double least = least_bytes_moved(profile, budget);
      EXPECT_GE(static_cast<double>(timing.bytes_to_host), least * 0.999999) << "trial " << trial;
      EXPECT_GE(static_cast<double>(timing.bytes_to_device), least * 0.999999) << "trial " << trial;
      // And no fewer than the least under the grace it keeps each unit for.
      const std::optional<double> kept = least_bytes_keeping(profile, budget, profile.offload_delay);
      ASSERT_TRUE(kept.has_value()) << "a plan fits keeping units so: trial " << trial;
      EXPECT_GE(static_cast<double>(timing.bytes_to_host), *kept * 0.999999) << "trial " << trial;
      EXPECT_GE(static_cast<double>(timing.bytes_to_device), *kept * 0.999999) << "trial " << trial;
      EXPECT_GE(*kept, least * 0.999999) << "trial " << trial;
      kept_moves_more += *kept > least * 1.01;
      const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
      EXPECT_LE(*std::max_element(curve.begin(), curve.end()), plan.target) << "trial " << trial;
    }
    EXPECT_GE(timing.step_ns, profile.step_ns) << "trial " << trial;
    // The table fires each swap once each way.
    const TriggerTable table = make_trigger_table(profile, plan);
    EXPECT_EQ(table.offloads.size(), plan.swaps.size());
    EXPECT_EQ(table.steps.back().offloads_to, plan.swaps.size());
    EXPECT_EQ(table.steps.back().prefetches_to, plan.swaps.size());
  }
  EXPECT_GT(kept_moves_more, 5) << "steps where the grace, not the floor's least, bounds what a plan moves";
}

// plan_auto runs two greedy orders and the model keeps the faster: never
// slower than either, and on link-bound steps the order by coverage (fewest
// bytes) is the faster in some (if it never were, it would be dead weight,
// or broken).
TEST(SwapPlanner, TheGreedyOrderByCoverageWinsSomeLinkBoundStepsAndAutoKeepsTheFaster) {
  std::mt19937 random(15);
  const LinkModel link;
  int coverage_faster = 0, compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SyntheticStep step = random_step(random, 8, 24, 20, 80, 200'000);  // short kernels: the link sets the pace
    const IterationProfile profile = step.profile(random() % 3);
    const std::uint64_t budget = profile.total_bytes * (30 + random() % 50) / 100;
    const std::vector<PlannedSwap> pool = auto_candidates(profile, link, {});
    const Plan by_free_time = plan_auto_greedy(profile, budget, link, {}, pool, GapOrder::free_time);
    const Plan by_coverage = plan_auto_greedy(profile, budget, link, {}, pool, GapOrder::coverage);
    const Plan chosen = plan_auto(profile, budget, link, {}, /*refine=*/false);
    if (!by_free_time.fits || !by_coverage.fits) continue;
    ++compared;
    const double free_time_ns = simulate(profile, by_free_time, link).step_ns;
    const double coverage_ns = simulate(profile, by_coverage, link).step_ns;
    EXPECT_TRUE(chosen.fits) << "trial " << trial;
    EXPECT_LE(simulate(profile, chosen, link).step_ns, std::min(free_time_ns, coverage_ns) * 1.000001) << "trial " << trial;
    coverage_faster += coverage_ns < free_time_ns * 0.99;
  }
  EXPECT_GE(compared, 20);
  EXPECT_GE(coverage_faster, 10) << "of " << compared;  // 23 of 33 when written
}

// The placement's search for the last operation that starts by a time, on
// timelines with operations of no duration (equal starts) and paced ones,
// over ranges across rounds: the answer a scan over start() gives.
TEST(CopyTimeline, LastStartingByIsWhatAScanFinds) {
  std::mt19937 random(17);
  for (int trial = 0; trial < 200; ++trial) {
    IterationProfile profile;
    const std::size_t period = 1 + random() % 40;
    double at = 0;
    for (std::size_t op = 0; op < period; ++op) {
      ProfileOp o;
      o.duration_ns = random() % 3 == 0 ? 0.0 : static_cast<double>(1 + random() % 5'000);
      o.start_ns = at;
      at += o.duration_ns + (trial % 2 == 1 ? static_cast<double>(random() % 3'000) : 0.0);  // odd: paced, with waits
      profile.ops.push_back(o);
    }
    profile.step_ns = at + (trial % 2 == 1 ? static_cast<double>(random() % 3'000) : 0.0);
    for (int query = 0; query < 50; ++query) {
      const std::size_t lo = random() % (3 * period), hi = lo + random() % (3 * period);
      const double span = timeline::start(profile, hi + 1) + 1'000;
      const double time = query % 5 == 0 ? timeline::start(profile, lo + (hi - lo) / 2)  // a tie with a start
                                         : -1'000 + static_cast<double>(random() % 1'000'000) / 1e6 * span;
      std::size_t expected = lo;
      for (std::size_t x = lo; x <= hi; ++x) {
        if (timeline::start(profile, x) <= time) expected = x;
      }
      EXPECT_EQ(timeline::last_starting_by(profile, time, lo, hi), expected)
          << "trial " << trial << " lo " << lo << " hi " << hi << " time " << time;
    }
  }
}

// A plan's own timeline: each operation starts when it does under the
// plan, its waits for the link included; the plan costs the same on it.
TEST(PlanTiming, APlansOwnTimelineHasItsWaitsAndCostsTheSame) {
  SyntheticStep step = cnn(12, 64 * kMiB, 4 * kMiB, 100'000);  // the link sets the pace
  const IterationProfile profile = step.profile();
  const LinkModel link;
  const Plan plan = plan_auto(profile, profile.total_bytes / 2, link, {}, /*refine=*/false);
  ASSERT_TRUE(plan.fits);
  const PlanTiming timing = simulate(profile, plan, link);
  ASSERT_GT(timing.stall_ns, 0);
  const std::shared_ptr<const Pace> pace = pace_of(profile, plan, link);
  ASSERT_EQ(pace->start_ns.size(), profile.period());
  EXPECT_DOUBLE_EQ(pace->step_ns, timing.step_ns);
  EXPECT_GE(pace->start_ns.front(), 0) << "from the end of the step before: its first operation's wait included";
  // Each operation starts no sooner than on the stall-free timeline, and
  // no sooner than the one before it ends.
  for (std::size_t op = 1; op < profile.period(); ++op) {
    EXPECT_GE(pace->start_ns[op] + 1e-6, profile.ops[op].start_ns) << op;
    EXPECT_GE(pace->start_ns[op] + 1e-6, pace->start_ns[op - 1] + profile.ops[op - 1].duration_ns) << op;
  }
  EXPECT_GT(pace->start_ns.back(), profile.ops.back().start_ns) << "the waits stretch the step";
  const IterationProfile timeline = paced(profile, *pace);
  EXPECT_DOUBLE_EQ(simulate(timeline, plan, link).step_ns, timing.step_ns);
  // Unrolled, the next step starts a paced step later.
  EXPECT_DOUBLE_EQ(timeline::start(timeline, profile.period()), pace->step_ns + pace->start_ns.front());
}

// Where the link sets the pace, the greedy placed on the timeline a plan
// runs on (not the kernels back to back) keeps units away over more
// operations: on some steps it finds a faster plan, and what replaces the
// plan always fits and is never slower (a pacing that changed nothing
// would never win: the test fails on it).
TEST(SwapPlanner, OnLinkBoundStepsTheGreedyOnThePlansOwnTimelineWinsSomeAndNeverLoses) {
  std::mt19937 random(16);
  const LinkModel link;
  int faster = 0, compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SyntheticStep step = random_step(random, 8, 24, 20, 80, 200'000);  // short kernels: the link sets the pace
    const IterationProfile profile = step.profile(random() % 3);
    const std::uint64_t budget = profile.total_bytes * (30 + random() % 50) / 100;
    const Plan greedy = plan_auto(profile, budget, link, {}, /*refine=*/false);
    if (!greedy.fits || greedy.swaps.empty()) continue;
    ++compared;
    Plan replanned = greedy;
    replan_on_own_timeline(profile, link, {}, &replanned);
    ASSERT_TRUE(replanned.fits) << "trial " << trial;
    const std::vector<std::uint64_t> curve = resident_curve(profile, replanned);
    EXPECT_LE(*std::max_element(curve.begin(), curve.end()), replanned.target) << "trial " << trial;
    const double before = simulate(profile, greedy, link).step_ns;
    const double after = simulate(profile, replanned, link).step_ns;
    EXPECT_LE(after, before * 1.000001) << "trial " << trial;
    if (after < before * 0.99) {
      ++faster;
      EXPECT_NE(replanned.pace, nullptr) << "trial " << trial << ": a replaced plan says what it was placed on";
    }
    // The refinement keeps the timeline's gain: never slower than it.
    Plan refined = replanned;
    refine_auto_plan(profile, link, {}, &refined);
    EXPECT_LE(simulate(profile, refined, link).step_ns, after * 1.000001) << "trial " << trial;
  }
  EXPECT_GE(compared, 20);
  EXPECT_GE(faster, 10) << "of " << compared;  // 21 of 30 when written
}

TEST(SwapPlanner, APrefetchThatArrivedLateGoesEarlierNextTime) {
  SyntheticStep step = cnn(12, 64 * kMiB, 4 * kMiB, 2'000'000);
  const IterationProfile profile = step.profile();
  const LinkModel link;
  const Plan before = plan_auto(profile, profile.total_bytes / 2, link);
  // One placed by the link alone (not held back to cover a peak).
  const auto free = std::find_if(before.swaps.begin(), before.swaps.end(), [&](const PlannedSwap& swap) {
    return timeline::prefetch_unrolled(profile, swap) > swap.not_before;
  });
  ASSERT_NE(free, before.swaps.end());
  const PlannedSwap late = *free;
  PrefetchLeads leads;
  leads[{profile.units[late.unit].unit, late.needed_by}] = 3 * 2'000'000;
  const Plan after = plan_auto(profile, profile.total_bytes / 2, link, leads);
  bool found = false;
  for (const PlannedSwap& swap : after.swaps) {
    if (swap.unit != late.unit || swap.needed_by != late.needed_by) continue;
    found = true;
    EXPECT_LT(timeline::prefetch_unrolled(profile, swap), timeline::prefetch_unrolled(profile, late));
  }
  EXPECT_TRUE(found);
}

TEST(VdnnPlanner, OffloadsEachForwardLayersInputAndPrefetchesItOneLayerAhead) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  const IterationProfile profile = step.profile();
  const Plan plan = plan_vdnn(profile, profile.total_bytes, LinkModel{}, false);
  // Every activation a forward layer reads waits for the backward pass
  // (the weights too: the access stream does not say which is which).
  std::set<std::uint32_t> offloaded;
  for (const PlannedSwap& swap : plan.swaps) {
    offloaded.insert(swap.unit);
    EXPECT_LT(swap.offload_after, profile.backward_begins);
    EXPECT_GE(swap.needed_by, profile.backward_begins);
    // One layer ahead: at the head of the backward layer before its user's
    // (or as early as it may go).
    EXPECT_LT(swap.prefetch_at, swap.needed_by);
    EXPECT_GE(swap.prefetch_at + 2, swap.needed_by > 0 ? std::min<std::uint32_t>(swap.needed_by, 2) : 0);
  }
  for (std::uint32_t l = 0; l < 7; ++l) {  // the last layer's input is needed again at once
    const std::uint32_t activation = static_cast<std::uint32_t>(
        std::find_if(profile.units.begin(), profile.units.end(),
                     [&](const ProfileUnit& u) { return u.unit == &step.units[l]; }) -
        profile.units.begin());
    EXPECT_TRUE(offloaded.count(activation)) << "layer " << l << "'s input";
  }
  // vDNN moves what it moves whatever the cap: here the step fits.
  EXPECT_FALSE(plan.swaps.empty());
}

TEST(VdnnPlanner, TheConvolutionVariantMovesOnlyTheInputsOfConvolutionLayers) {
  SyntheticStep step = cnn(8, 64 * kMiB, 4 * kMiB, 100'000);
  for (std::size_t op : {0, 1, 2}) step.convolutions.insert(op);
  const IterationProfile profile = step.profile();
  const Plan all = plan_vdnn(profile, profile.total_bytes, LinkModel{}, false);
  const Plan conv = plan_vdnn(profile, profile.total_bytes, LinkModel{}, true);
  EXPECT_LT(conv.swaps.size(), all.swaps.size());
  for (const PlannedSwap& swap : conv.swaps) {
    bool led_by_a_convolution = false;
    for (std::size_t op : {0, 1, 2}) {
      const ProfileOp& head = profile.ops[op];
      for (std::uint32_t k = 0; k < head.use_count; ++k) {
        led_by_a_convolution |= profile.uses[head.first_use + k] == swap.unit;
      }
    }
    EXPECT_TRUE(led_by_a_convolution) << "unit " << swap.unit;
  }
}

}  // namespace
}  // namespace vgpumem::scheduler
