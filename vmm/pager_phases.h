// Where the pager's host time goes: each part of moving units, timed where
// it runs (the launch path's slow path, the scheduler's moves, the
// reclaimer), summed per part. A real GPU showed the launch thread spending
// ten times the step's compute in the slow path with the link mostly idle;
// these say which part (summary key `paging.host_time_ns`). Parts nest where
// the code does (`evict` holds `pin_host` and `wait_users`); each is a
// monotonic-clock read on entry and exit, off the hot path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/clock.h"

namespace vgpumem::vmm {

enum class PagerPhase : std::size_t {
  lock_wait,     // a slow path waiting for the pager's lock
  reap,          // finding finished saves and unmapping their ranges (launch thread)
  evict,         // offloading a victim to make room: host buffer, ordering, copies issued
  pin_host,      // pinning host memory for an offload on demand (cuMemHostAlloc)
  wait_users,    // ordering a save after the streams that used the unit (events)
  wait_save,     // waiting on the host for a unit's own save before it comes back
  map,           // mapping a unit's chunks and setting access
  copy_in,       // issuing the copies back to the device
  order,         // making the operation's stream wait for what is arriving
  reclaimer_locked,  // the reclaimer holding the lock while it unmaps finished saves
  count
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(PagerPhase::count)> kPagerPhaseNames = {
    "lock_wait", "reap", "evict", "pin_host", "wait_users", "wait_save", "map", "copy_in", "order",
    "reclaimer_locked"};

class PagerPhases {
 public:
  void add(PagerPhase phase, std::uint64_t ns) {
    ns_[static_cast<std::size_t>(phase)].fetch_add(ns, std::memory_order_relaxed);
  }
  std::uint64_t ns(PagerPhase phase) const { return ns_[static_cast<std::size_t>(phase)].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(PagerPhase::count)> ns_ = {};
};

// Adds the time from construction to destruction to one part.
class PhaseTimer {
 public:
  PhaseTimer(PagerPhases& phases, PagerPhase phase) : phases_(phases), phase_(phase), started_(monotonic_ns()) {}
  ~PhaseTimer() { phases_.add(phase_, monotonic_ns() - started_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  PagerPhases& phases_;
  PagerPhase phase_;
  std::uint64_t started_;
};

}  // namespace vgpumem::vmm
