// A plan as the launch path follows it: for each operation of the step, the
// units to send to the host and the units to bring back once that operation
// is issued. Immutable once published; read without a lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/iteration_profile.h"
#include "scheduler/swap_plan.h"

// Note [Executor and trigger table]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Executor (`scheduler/scheduler.{h,cpp}`, `trigger_table.{h,cpp}`): the
// planning thread (polling every 2 ms) plans from each new timed recording
// — auto publishes its greedy plan at once, then plans it again on its own
// timeline and refines it, and publishes the result where that is faster (a plan that comes a step late is a
// step on demand) — and publishes a trigger table — per operation of the step, the units to
// send out and to bring back, with the identity the operation must have,
// in one `TriggerTable::Step` an operation (the launch path reads one
// cache line of the table, and asks for the next operation's) — through an
// atomic pointer (a replaced table is freed a second later). The planner
// plans from the stream that has recorded most. On the launch path the
// feed looks up the operation's stream's position in its step and fires
// that operation's triggers from the thread that issued it, whichever thread
// that is, only if the stream is the one the plan was learned on (the same
// stream's log, the same lock of its detector) and the operation's
// identity is the planned one; the stream's log is given back before the
// moves are handed on. The moves themselves are made by the pager's mover
// thread (Note [The mover], vmm/mover.h): firing is posting them. The trace summary's `schedule` reports the plan and what was
// followed (docs/trace-format.md).

namespace vgpumem::scheduler {

struct TriggerTable {
  // The stream's log it was learned from (StreamPosition::log): it applies
  // on that stream only, whichever thread issues its operations.
  const void* log = nullptr;
  std::uint64_t lock = 0;
  // Per operation of the step, all the launch path reads of the table for
  // it (one cache line, not one in each of three arrays): what the stream
  // must be doing for the plan to hold, and where its triggers lie in
  // `offloads` and `prefetches`.
  struct Step {
    std::uint64_t identity = 0;
    std::uint32_t offloads_from = 0, offloads_to = 0, prefetches_from = 0, prefetches_to = 0;
  };
  std::vector<Step> steps;
  std::vector<vmm::Unit*> offloads, prefetches;
  // The plan was made with the launch grace cut (Plan::offload_delay): its
  // offloads may take units still inside the grace.
  bool inside_grace = false;
  // Each unit's uses in the step, for the victim order (next_use_order.h):
  // the units by address, the operations of units[i] ascending in
  // [use_begin[i], use_begin[i + 1]) of use_ops.
  std::vector<const vmm::Unit*> used_units;
  std::vector<std::uint32_t> use_begin, use_ops;
  // Set when it is published, never 0 then: which table a position the
  // launch path left is on (NextUseOrder).
  std::uint32_t generation = 0;
  Plan plan;  // what it came from, for the summary and the trace

  std::size_t period() const { return steps.size(); }
  // What operation `p` sends out, and what it brings back.
  std::span<vmm::Unit* const> offloads_at(std::size_t p) const {
    return {offloads.data() + steps[p].offloads_from, offloads.data() + steps[p].offloads_to};
  }
  std::span<vmm::Unit* const> prefetches_at(std::size_t p) const {
    return {prefetches.data() + steps[p].prefetches_from, prefetches.data() + steps[p].prefetches_to};
  }
  // The operations of the step that use `unit`, ascending (empty if none).
  std::span<const std::uint32_t> uses_of(const vmm::Unit* unit) const;
};

TriggerTable make_trigger_table(const IterationProfile& profile, Plan plan);

}  // namespace vgpumem::scheduler
