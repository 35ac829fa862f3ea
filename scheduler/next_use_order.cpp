#include "scheduler/next_use_order.h"

#include <algorithm>

namespace vgpumem::scheduler {

namespace {

// Three tiers, lowest first; within each, the order of the tier.
constexpr std::uint64_t kIdle = 0;                         // unknown to the step, idle a step: least recently used
constexpr std::uint64_t kNeeded = std::uint64_t{1} << 60;  // the step's: furthest next use
constexpr std::uint64_t kRecent = std::uint64_t{2} << 60;  // unknown to the step, used lately: least recently used
constexpr std::uint64_t kInTier = kNeeded - 1;
constexpr std::uint64_t kFurthest = std::uint64_t{1} << 33;  // beyond any distance (a period is under 2^32)

}  // namespace

std::uint64_t NextUseOrder::rank(const vmm::Unit& unit, std::uint64_t last_use) const noexcept {
  const TriggerTable* table = table_.load(std::memory_order_acquire);
  const std::uint64_t position = placed(table);
  if (position == kNowhere) return last_use;  // least recently used
  const std::span<const std::uint32_t> uses = table->uses_of(&unit);
  if (uses.empty()) {
    const bool idle = last_use < idle_before_.load(std::memory_order_relaxed);
    return (idle ? kIdle : kRecent) | std::min(last_use, kInTier);
  }
  // Operations from the one issued last to the unit's next use, round the
  // step if it comes only in the next one.
  const std::uint64_t phase = position & 0xffffffffu;
  const auto next = std::upper_bound(uses.begin(), uses.end(), phase);
  const std::uint64_t distance = next != uses.end() ? *next - phase : uses.front() + table->period() - phase;
  return kNeeded | (kFurthest - std::min(distance, kFurthest));
}

}  // namespace vgpumem::scheduler
