// Which resident unit makes room first (Note [Choosing
// a victim], below). Two rules stay the pager's whatever the policy: a unit pinned,
// or held by a launch between its check and its enqueue, is no candidate;
// and one inside its launch grace (launch_grace.h) goes only after every
// other. Among the rest, the policy ranks.
//
// Without a plan the pager ranks least recently used first. A scheduler that
// knows the step ranks by when each unit is next needed
// (scheduler/next_use_order.h): the unit needed furthest ahead goes first
// (Belady's order, the fewest fetches on demand can make with units of one
// size), where least recently used sends away, late in the backward pass,
// the weights the next forward pass needs first.
#pragma once

#include <cstdint>

// Note [Choosing a victim]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Choosing a victim (`vmm/victim_policy.h`, `scheduler/next_use_order.{h,cpp}`):
// whenever room must be made on demand — a fetch, an allocation, a
// prefetch, or the reclaimer's spare chunks — the pager builds a heap of
// the units that may go (not pinned, not held by a launch) and pops the
// lowest: its own tier for units inside their launch grace above
// everything, and, under it, the rank a `VictimPolicy` gives. Without a
// plan that is least recently used (`LeastRecentlyUsed`). The scheduler's
// `NextUseOrder` ranks by the learned step: the trigger table also carries
// each unit's uses in the step (units sorted by address, a binary search
// per candidate), and the launch path leaves the position of the plan's
// stream — the table's generation and the phase just issued, one relaxed
// store — or clears it when the stream strays. The unit needed furthest
// ahead goes first (a next use in the next step counts round the step);
// units the step does not know go first if idle since before the last step
// began (ticks the access feed now carries) and last if used since; no
// position on the table in force means least recently used. On a repeating
// step furthest-next-use is Belady's order, the fewest fetches on demand
// can make (with units of one size); least recently used is close to it in a forward pass and far from
// it at the turn of a step, where it sends away the weights the next
// forward pass needs first. `VGPUMEM_VICTIMS` chooses
// (docs/configuration.md#vgpumem_victims); measured side by
// side in docs/journal/2026-11-26-benchmarks.md.

namespace vgpumem::vmm {

struct Unit;

class VictimPolicy {
 public:
  // Ranks run from 0 to this (the pager counts a higher one as this) and
  // the pager puts its grace tier above them.
  static constexpr std::uint64_t kMaxRank = (std::uint64_t{1} << 62) - 1;

  virtual ~VictimPolicy() = default;

  // Lower goes first. `last_use` is the unit's launch tick (later is larger),
  // what least recently used ranks by. Called under the pager's lock, once
  // for each candidate whenever room must be made: it takes no lock, does not
  // allocate and does not call into vmm/.
  virtual std::uint64_t rank(const Unit& unit, std::uint64_t last_use) const noexcept = 0;
  // Whether the order is its own now (not a fallback to least recently
  // used for want of what it ranks by): the trace counts the victims taken
  // so. Asked once per victim, under the pager's lock.
  virtual bool informed() const noexcept { return true; }
  // For the trace's summary (paging.victims.order).
  virtual const char* name() const noexcept = 0;
};

// The pager's order without a plan.
class LeastRecentlyUsed final : public VictimPolicy {
 public:
  std::uint64_t rank(const Unit&, std::uint64_t last_use) const noexcept override { return last_use; }
  const char* name() const noexcept override { return "least recently used"; }
};

}  // namespace vgpumem::vmm
