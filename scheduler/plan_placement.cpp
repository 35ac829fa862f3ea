#include "scheduler/plan_placement.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "scheduler/copy_timeline.h"

namespace vgpumem::scheduler {

namespace timeline {

std::size_t last_starting_by(const IterationProfile& profile, double time, std::size_t lo, std::size_t hi) {
  if (hi < lo || start(profile, lo) > time) return lo;
  if (start(profile, hi) <= time) return hi;
  // start() grows with x: the last x in [lo, hi) with start(x) <= time. It
  // lies in the round `time` falls in, found by one division, then by a
  // binary search over that round's starts (no division per probe: this
  // is the planners' innermost call).
  const std::size_t period = profile.period();
  const std::size_t first_round = lo / period;
  std::size_t round = first_round;
  if (profile.step_ns > 0) {
    const double rounds = (time - profile.ops.front().start_ns) / profile.step_ns;
    if (rounds >= static_cast<double>(hi / period)) round = hi / period;
    else if (rounds > static_cast<double>(first_round)) round = static_cast<std::size_t>(rounds);
  }
  // Rounding may put the answer a round off either way.
  while (round > first_round && start(profile, round * period) > time) --round;
  while (round < hi / period && start(profile, (round + 1) * period) <= time) ++round;
  // The round's operations that start by `time` come first (the same sum
  // start() makes, so the answer is the one a search over start() gives).
  std::size_t good = 0, bad = period;  // start(op, round) <= time for op < good, > time from bad
  while (good < bad) {
    const std::size_t middle = good + (bad - good) / 2;
    if (profile.start(middle, round) <= time) good = middle + 1;
    else bad = middle;
  }
  const std::size_t in_round = good == 0 ? 0 : good - 1;
  return std::clamp(round * period + in_round, lo, hi);
}

}  // namespace timeline

void place_copies(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, Plan* plan) {
  std::vector<PlannedSwap>& swaps = plan->swaps;
  const std::size_t period = profile.period();
  std::vector<std::size_t> order(swaps.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Sort keys made once (the planners place copies after every change).
  std::vector<std::size_t> key(swaps.size());

  // The copy-out engine, in issue order.
  for (std::size_t s = 0; s < swaps.size(); ++s) key[s] = timeline::offload_issued_unrolled(profile, swaps[s]);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  std::vector<double> saved(swaps.size());
  double out_free = -std::numeric_limits<double>::infinity();
  for (const std::size_t s : order) {
    const double start = std::max(out_free, timeline::end(profile, timeline::offload_issued_unrolled(profile, swaps[s])));
    saved[s] = out_free = start + link.to_host_ns(profile.units[swaps[s].unit].bytes);
  }

  // The copy-in engine, from the last use backwards.
  for (std::size_t s = 0; s < swaps.size(); ++s) key[s] = timeline::needed_unrolled(profile, swaps[s]);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key[a] > key[b]; });
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
    const double in_ns = link.fetch_ns(unit.bytes);
    const std::size_t hold = std::clamp<std::size_t>(swap.not_before, first_absent, need - 1);
    const std::size_t k = std::max(hold, timeline::last_starting_by(profile, land_by - in_ns, first_absent, need - 1));
    swap.prefetch_at = static_cast<std::uint32_t>(k % period);
    // Its copy starts once its room is mapped (LinkModel::fetch_driver_ns).
    in_free_by = std::max(timeline::prefetch_start(profile, k) + link.fetch_driver_ns, saved[s]);
  }
}

}  // namespace vgpumem::scheduler
