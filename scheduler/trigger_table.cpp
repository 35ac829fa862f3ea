#include "scheduler/trigger_table.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

#include "scheduler/copy_timeline.h"

namespace vgpumem::scheduler {

namespace {

// TriggerTable::used_units and their uses, from the profile's units: each
// unit once there, its uses ascending.
void index_uses(const IterationProfile& profile, TriggerTable& table) {
  std::vector<std::size_t> order(profile.units.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::less<>()(profile.units[a].unit, profile.units[b].unit);
  });
  for (const std::size_t u : order) {
    const ProfileUnit& unit = profile.units[u];
    table.used_units.push_back(unit.unit);
    table.use_begin.push_back(static_cast<std::uint32_t>(table.use_ops.size()));
    table.use_ops.insert(table.use_ops.end(), unit.uses.begin(), unit.uses.end());
  }
  table.use_begin.push_back(static_cast<std::uint32_t>(table.use_ops.size()));
}

}  // namespace

TriggerTable make_trigger_table(const IterationProfile& profile, Plan plan) {
  TriggerTable table;
  table.log = profile.log;
  table.lock = profile.lock;
  const std::size_t period = profile.period();
  // Where each swap's offload is issued: after its last use, by the plan's
  // own delay where it was made with the grace cut.
  const std::size_t delay = offload_delay_of(profile, plan);
  table.inside_grace = delay < profile.offload_delay;
  const auto offload_at = [&](const PlannedSwap& swap) {
    return (std::size_t{swap.offload_after} + delay + swap.offload_late) % period;
  };

  // Within an operation, the prefetch needed first goes first.
  std::stable_sort(plan.swaps.begin(), plan.swaps.end(), [&](const PlannedSwap& a, const PlannedSwap& b) {
    return timeline::needed_unrolled(profile, a) < timeline::needed_unrolled(profile, b);
  });
  // Counting sort of the triggers by the operation that fires them.
  std::vector<std::uint32_t> offload_count(period + 1, 0), prefetch_count(period + 1, 0);
  // A swap whose next use overwrites its unit has no prefetch: that use
  // brings it back, without a copy.
  for (const PlannedSwap& swap : plan.swaps) {
    ++offload_count[offload_at(swap) + 1];
    if (!swap.no_copy_in) ++prefetch_count[swap.prefetch_at + 1];
  }
  for (std::size_t p = 0; p < period; ++p) {
    offload_count[p + 1] += offload_count[p];
    prefetch_count[p + 1] += prefetch_count[p];
  }
  table.steps.resize(period);
  for (std::size_t p = 0; p < period; ++p) {
    table.steps[p] = {profile.ops[p].identity, offload_count[p], offload_count[p + 1], prefetch_count[p],
                      prefetch_count[p + 1]};
  }
  table.offloads.resize(plan.swaps.size());
  table.prefetches.resize(prefetch_count[period]);
  for (const PlannedSwap& swap : plan.swaps) {
    vmm::Unit* unit = profile.units[swap.unit].unit;
    table.offloads[offload_count[offload_at(swap)]++] = unit;
    if (!swap.no_copy_in) table.prefetches[prefetch_count[swap.prefetch_at]++] = unit;
  }
  index_uses(profile, table);
  table.plan = std::move(plan);
  return table;
}

std::span<const std::uint32_t> TriggerTable::uses_of(const vmm::Unit* unit) const {
  const auto at = std::lower_bound(used_units.begin(), used_units.end(), unit, std::less<>());
  if (at == used_units.end() || *at != unit) return {};
  const auto i = static_cast<std::size_t>(at - used_units.begin());
  return std::span<const std::uint32_t>(use_ops).subspan(use_begin[i], use_begin[i + 1] - use_begin[i]);
}

}  // namespace vgpumem::scheduler
