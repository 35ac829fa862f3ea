// defer_saves_behind_program_copies(): the copy-out engine kept clear for
// the program's own copies to the host.
//
// A training step ends with the loss (or a metric) read back to the host,
// which the program then waits for. The plan's saves issued just before it
// — the optimizer's state, sent out after its update — queue ahead of it
// on the copy-out engine, so the program waits for them, and the next step
// starts that much later, though none of those saves was needed that soon:
// the room they make is taken in the next step's forward pass. Issued just
// after the copy instead, they run while that step begins. (Measured on the
// BERT-large workload at half its peak on a 450 GB/s link: the step's
// compute engine idled only at its end, 4.2 ms behind the loss read.)
#include <algorithm>
#include <utility>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/swap_plan.h"

// Note [The program's copies to the host]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The program's copies to the host (`save_deferral.cpp`): a step that
// ends with the loss read back (`cuMemcpyDtoH*`, which the program then
// waits for) finds it queued on the copy-out engine behind the saves the
// plan issued before it — the optimizer's state, sent out after its update
// — though the room they make is wanted only in the next step's forward
// pass. A plan that fits holds the closest of those saves (1, 2, 4, …, the
// fastest that still fits, by `simulate()`) until just after the copy
// (`PlannedSwap::offload_late`). BERT-large at half its peak on a 450 GB/s
// link: the compute engine idled 4.2 ms a step, all of it behind the loss
// read; with the saves held back and the pager no longer asking every save
// in flight whether it is done before each move, the step is 1.04× its
// uncapped time (docs/journal/2026-11-25-benchmarks.md#where-the-link-leaves-room-a-450-gbs-link).
// The same wait leaves the copy-in engine idle: nothing after the copy is
// issued until it lands, so a prefetch the next step's first operations
// need, triggered by one of them, starts only then
// (`prefetch_hoisting.cpp`). Each such prefetch is triggered by the
// operation before the copy instead, where the plan still fits that way and
// `simulate()` finds the step faster, the earliest needed first (VGG-16 at
// half its peak: the copy-in engine idled 1.8 ms a step behind the loss
// read, 0.9 ms after).

namespace vgpumem::scheduler {

namespace {

// Holds `swap`'s offload back until the operation after `copy` (unrolled
// from the swap's own positions); false, changing nothing, if the unit
// would then no longer be away before it is wanted again.
bool hold_past(const IterationProfile& profile, std::size_t copy, PlannedSwap* swap) {
  const std::size_t period = profile.period();
  const std::size_t issued = timeline::offload_issued_unrolled(profile, *swap);
  const std::size_t late = (copy + period - issued % period) % period + 1;  // to the operation after the copy
  const std::size_t back = swap->no_copy_in ? timeline::needed_unrolled(profile, *swap) - 1
                                            : timeline::prefetch_unrolled(profile, *swap);
  if (issued + late >= back) return false;
  swap->offload_late += static_cast<std::uint32_t>(late);
  return true;
}

}  // namespace

void defer_saves_behind_program_copies(const IterationProfile& profile, const LinkModel& link, Plan* plan) {
  const std::size_t period = profile.period();
  if (period == 0 || plan->swaps.empty()) return;
  for (std::size_t copy = 0; copy < period; ++copy) {
    if (!profile.ops[copy].to_host) continue;
    // The saves issued in the half step up to the copy (its own triggers
    // included: they are fired before it is enqueued), closest first.
    std::vector<std::pair<std::size_t, std::size_t>> before;  // (operations before the copy, swap)
    for (std::size_t s = 0; s < plan->swaps.size(); ++s) {
      const std::size_t issued = timeline::offload_issued_unrolled(profile, plan->swaps[s]) % period;
      const std::size_t distance = (copy + period - issued) % period;
      if (distance < period / 2) before.emplace_back(distance, s);
    }
    if (before.empty()) continue;
    std::stable_sort(before.begin(), before.end());
    // Hold back the closest 1, 2, 4, ... of them; keep the fastest plan that
    // still fits.
    Plan best = *plan;
    double best_ns = simulate(profile, *plan, link).step_ns;
    for (std::size_t n = 1;; n = std::min(2 * n, before.size())) {
      Plan trial = *plan;
      bool held = false;
      for (std::size_t i = 0; i < n; ++i) held = hold_past(profile, copy, &trial.swaps[before[i].second]) || held;
      if (held && plan_fits(profile, trial)) {
        if (const double ns = simulate(profile, trial, link).step_ns; ns < best_ns) {
          best = std::move(trial);
          best_ns = ns;
        }
      }
      if (n == before.size()) break;
    }
    *plan = std::move(best);
  }
}

}  // namespace vgpumem::scheduler
