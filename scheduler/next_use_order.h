// The victim order of a learned step (vmm/victim_policy.h): the unit whose
// next use in the step is furthest ahead goes first. On a repeating step
// that is Belady's order: the fewest fetches an on-demand pager can make
// where units are of one size, and a good order where they are not; least
// recently used comes close in the forward pass, where the oldest maps are
// also needed last, but late in the backward pass it sends away the weights
// the next forward pass needs first, and in a decoder's layers the units
// every layer touches.
//
// Where the step stands is the launch path's to say: the scheduler tells it
// the operation of the plan's stream just issued (at()), or that the stream
// left the step (lost()); one relaxed store an operation. Without a
// position on the table in force it ranks least recently used, as the pager
// would.
//
// Units the table does not know (not touched in the recorded step: another
// thread's, or allocated since) are ranked by their last use: one idle
// since before the last step began goes before any the step needs, since
// nothing in the step wants it; one used since (a new buffer, or a thread
// the plan does not follow) after every unit the step needs, since nothing
// says it is not needed next.
#pragma once

#include <atomic>
#include <cstdint>

#include "scheduler/trigger_table.h"
#include "vmm/victim_policy.h"

namespace vgpumem::scheduler {

class NextUseOrder final : public vmm::VictimPolicy {
 public:
  // `table`: the scheduler's published table, read at each ranking.
  explicit NextUseOrder(const std::atomic<const TriggerTable*>& table) : table_(table) {}

  // The launch path: the plan's stream issued `phase` of `table`, whose
  // units carry launch tick `tick`.
  void at(const TriggerTable& table, std::size_t phase, std::uint64_t tick) noexcept {
    if (phase == 0) {
      idle_before_.store(step_began_.load(std::memory_order_relaxed), std::memory_order_relaxed);
      step_began_.store(tick, std::memory_order_relaxed);
    }
    const std::uint64_t position = pack(table.generation, phase);
    if (position_.load(std::memory_order_relaxed) != position) position_.store(position, std::memory_order_release);
  }
  // The plan's stream is not where the table thinks (or not locked).
  void lost() noexcept {
    if (position_.load(std::memory_order_relaxed) != kNowhere) position_.store(kNowhere, std::memory_order_release);
  }

  std::uint64_t rank(const vmm::Unit& unit, std::uint64_t last_use) const noexcept override;
  // Whether the plan's stream is on the table in force.
  bool informed() const noexcept override { return placed(table_.load(std::memory_order_acquire)) != kNowhere; }
  const char* name() const noexcept override { return "furthest next use"; }

 private:
  static constexpr std::uint64_t kNowhere = 0;  // generation 0 is never published
  static std::uint64_t pack(std::uint32_t generation, std::size_t phase) {
    return (std::uint64_t{generation} << 32) | (phase & 0xffffffffu);
  }

  // The position if it is on `table`, else kNowhere.
  std::uint64_t placed(const TriggerTable* table) const noexcept {
    const std::uint64_t position = position_.load(std::memory_order_acquire);
    const bool on = table != nullptr && table->period() != 0 && (position >> 32) == table->generation;
    return on ? position : kNowhere;
  }

  const std::atomic<const TriggerTable*>& table_;
  std::atomic<std::uint64_t> position_{kNowhere};  // (the table's generation, the phase issued last)
  // The ticks of the last two first operations of the step: a unit last
  // used before the earlier has been idle a whole step at least.
  std::atomic<std::uint64_t> step_began_{0}, idle_before_{0};
};

}  // namespace vgpumem::scheduler
