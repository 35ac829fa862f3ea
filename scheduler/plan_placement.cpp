#include "scheduler/plan_placement.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "scheduler/copy_timeline.h"

namespace vgpumem::scheduler {

namespace timeline {

std::size_t last_starting_by(const IterationProfile& profile, double time, std::size_t lo, std::size_t hi) {
  if (hi < lo || start(profile, lo) > time) return lo;
  // start() grows with x: the last x in [lo, hi] with start(x) <= time.
  std::size_t good = lo, bad = hi + 1;
  while (bad - good > 1) {
    const std::size_t middle = good + (bad - good) / 2;
    if (start(profile, middle) <= time) good = middle;
    else bad = middle;
  }
  return good;
}

}  // namespace timeline

void place_copies(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, Plan* plan) {
  std::vector<PlannedSwap>& swaps = plan->swaps;
  const std::size_t period = profile.period();
  std::vector<std::size_t> order(swaps.size());
  std::iota(order.begin(), order.end(), std::size_t{0});

  // The copy-out engine, in issue order.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return timeline::offload_issued_unrolled(profile, swaps[a]) < timeline::offload_issued_unrolled(profile, swaps[b]);
  });
  std::vector<double> saved(swaps.size());
  double out_free = -std::numeric_limits<double>::infinity();
  for (const std::size_t s : order) {
    const double start = std::max(out_free, timeline::end(profile, timeline::offload_issued_unrolled(profile, swaps[s])));
    saved[s] = out_free = start + link.to_host_ns(profile.units[swaps[s].unit].bytes);
  }

  // The copy-in engine, from the last use backwards.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return timeline::needed_unrolled(profile, swaps[a]) > timeline::needed_unrolled(profile, swaps[b]);
  });
  double in_free_by = std::numeric_limits<double>::infinity();  // when the next prefetch must start
  for (const std::size_t s : order) {
    PlannedSwap& swap = swaps[s];
    const ProfileUnit& unit = profile.units[swap.unit];
    const std::size_t need = timeline::needed_unrolled(profile, swap);
    if (swap.no_copy_in) {  // away until its use, which takes it back without the link
      swap.prefetch_at = static_cast<std::uint32_t>((need - 1) % period);
      continue;
    }
    const std::size_t first_absent = timeline::offload_issued_unrolled(profile, swap) + 1;
    const auto lead = leads.find({unit.unit, swap.needed_by});
    const double land_by =
        std::min(timeline::start(profile, need) - (lead == leads.end() ? 0.0 : lead->second), in_free_by);
    const double in_ns = link.to_device_ns(unit.bytes);
    const std::size_t hold = std::clamp<std::size_t>(swap.not_before, first_absent, need - 1);
    const std::size_t k = std::max(hold, timeline::last_starting_by(profile, land_by - in_ns, first_absent, need - 1));
    swap.prefetch_at = static_cast<std::uint32_t>(k % period);
    in_free_by = std::max(timeline::prefetch_start(profile, k), saved[s]);
  }
}

}  // namespace vgpumem::scheduler
