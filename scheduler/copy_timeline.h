// Positions on the unrolled timeline of a profiled step, shared by the
// planners and the plan simulator: operation x of the unrolled stream is
// operation x mod period of round x / period.
#pragma once

#include <cstddef>
#include <cstdint>

#include "scheduler/iteration_profile.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler::timeline {

inline double start(const IterationProfile& profile, std::size_t x) {
  return profile.start(x % profile.period(), x / profile.period());
}
inline double end(const IterationProfile& profile, std::size_t x) {
  return profile.end(x % profile.period(), x / profile.period());
}

// A swap's gap on the unrolled timeline: its next use lies after its last.
inline std::size_t needed_unrolled(const IterationProfile& profile, const PlannedSwap& swap) {
  return swap.needed_by > swap.offload_after ? swap.needed_by : swap.needed_by + profile.period();
}
inline std::size_t prefetch_unrolled(const IterationProfile& profile, const PlannedSwap& swap) {
  return swap.prefetch_at > swap.offload_after ? swap.prefetch_at : swap.prefetch_at + profile.period();
}

// The offload is issued as the last use is enqueued, or as the operation
// the launch grace keeps the unit through is (IterationProfile::
// offload_delay), or later still where the plan holds it back
// (PlannedSwap::offload_late), and waits for what that stream has enqueued
// by then, that operation included.
inline std::size_t offload_issued_unrolled(const IterationProfile& profile, const PlannedSwap& swap) {
  return std::size_t{swap.offload_after} + profile.offload_delay + swap.offload_late;
}

// A prefetch fired by operation x (once x is issued) starts copying when x
// starts on the device, at the latest: the program's thread issues ahead
// of the device, or the device waits for it anyway.
inline double prefetch_start(const IterationProfile& profile, std::size_t x) { return start(profile, x); }

// The last operation in [lo, hi] that starts by `time`, or lo if none does.
std::size_t last_starting_by(const IterationProfile& profile, double time, std::size_t lo, std::size_t hi);

}  // namespace vgpumem::scheduler::timeline
