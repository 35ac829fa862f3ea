// hoist_prefetches_over_program_copies(): the copy-in engine kept busy
// while the program waits for its own copy to the host.
//
// A step ends with the loss read back, which the program then waits for:
// nothing after it is issued until it lands, and it lands behind every save
// queued on the copy-out engine. A prefetch triggered by an operation after
// the read starts only then, though the copy-in engine may have finished the
// step's last prefetch well before: on a link-bound step the engine idles
// for that wait every step (VGG-16 at half its peak: 1.8 ms of a 103 ms
// step on the simulated timeline, 2026-11-28). Triggered by the operation
// before the read instead, the prefetches the next step's first operations
// need queue behind the step's last ones and run while the program waits.
// Each is moved where the plan still fits and the step is then faster (by
// simulate(), which starts no operation after such a copy before the copy
// ends), the earliest needed first.
#include <algorithm>
#include <utility>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

namespace {

// The unrolled position (from `swap`'s last use) of the program's copy to
// the host that lies last in the swap's gap before its prefetch, or 0 if
// none does.
std::size_t copy_before_prefetch(const IterationProfile& profile, const PlannedSwap& swap) {
  const std::size_t period = profile.period();
  const std::size_t issued = timeline::offload_issued_unrolled(profile, swap);
  for (std::size_t x = timeline::prefetch_unrolled(profile, swap); x > issued + 1; --x) {
    if (profile.ops[(x - 1) % period].to_host) return x - 1;
  }
  return 0;
}

}  // namespace

void hoist_prefetches_over_program_copies(const IterationProfile& profile, const LinkModel& link, Plan* plan) {
  const std::size_t period = profile.period();
  if (period == 0 || plan->swaps.empty()) return;
  // (unrolled need, swap) of each prefetch triggered after such a copy.
  std::vector<std::pair<std::size_t, std::size_t>> after_a_copy;
  for (std::size_t s = 0; s < plan->swaps.size(); ++s) {
    const PlannedSwap& swap = plan->swaps[s];
    if (!swap.no_copy_in && copy_before_prefetch(profile, swap) != 0) {
      after_a_copy.emplace_back(timeline::needed_unrolled(profile, swap), s);
    }
  }
  std::stable_sort(after_a_copy.begin(), after_a_copy.end());
  double best_ns = simulate(profile, *plan, link).step_ns;
  for (const auto& [need, s] : after_a_copy) {
    PlannedSwap& swap = plan->swaps[s];
    const std::size_t copy = copy_before_prefetch(profile, swap);
    // The operation before the copy: its triggers fire before the copy is
    // enqueued, and it must come after the offload is issued.
    if (copy == 0 || copy - 1 <= timeline::offload_issued_unrolled(profile, swap)) continue;
    const PlannedSwap before = swap;
    swap.prefetch_at = static_cast<std::uint32_t>((copy - 1) % period);
    swap.not_before = std::min<std::uint32_t>(swap.not_before, static_cast<std::uint32_t>(copy - 1));
    if (plan_fits(profile, *plan)) {
      if (const double ns = simulate(profile, *plan, link).step_ns; ns < best_ns) {
        best_ns = ns;
        continue;
      }
    }
    swap = before;
  }
}

}  // namespace vgpumem::scheduler
