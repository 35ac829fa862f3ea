// Which resident unit makes room first (docs/architecture.md, "Choosing a
// victim"). Two rules stay the pager's whatever the policy: a unit pinned,
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
