// The timeline a plan runs on, and auto's plan placed on it.
//
// The planners place each prefetch by when operations start. On the
// profile's own timeline, the recorded kernels back to back, a link-bound
// step is all compute: ResNet-50 at a third of its peak in the bench is
// 23 ms of kernels under a plan that moves 230 ms of link each way. There
// the prefetches, chained back from their uses on the copy-in engine, go
// tens of operations ahead of their users, each unit is back long before it
// is needed, and the plan must send more away to fit. Under the plan the
// operations wait for the link, so a prefetch fired a few operations ahead
// lands in time: placed on that timeline, units stay away over more
// operations and a plan that fits moves fewer bytes.
#pragma once

#include <cstddef>
#include <memory>

#include "scheduler/iteration_profile.h"
#include "scheduler/swap_plan.h"

// Note [The plan's own timeline]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The plan's own timeline (`plan_pacing.{h,cpp}`, since 2026-11-26):
// the greedy places prefetches by when operations start, and the profile's
// timeline is the recorded kernels back to back. Where the link sets the
// pace that timeline is far too short (ResNet-50 at a third of its peak in
// the bench: 23 ms of kernels under a plan that moves 230 ms of link each
// way), so prefetches chained back from their uses on the copy-in engine go
// tens of operations ahead of them, each unit is back long before it is
// needed, and the plan must send more away to fit. A plan that fits is
// therefore planned again, both greedy orders, on the timeline it runs on
// (`pace_of`: when `simulate()` has each operation start under it, its waits
// included), and again on the new plan's, up to four rounds; a plan that
// fits and simulates faster replaces it, carrying that timeline
// (`Plan::pace`), on which the refinement then places its trials.
// `simulate()` reads durations only, so a plan costs the same on either
// timeline; only where its prefetches go changes.

namespace vgpumem::scheduler {

// When each operation starts under `plan` (simulate()'s measured step).
std::shared_ptr<const Pace> pace_of(const IterationProfile& profile, const Plan& plan, const LinkModel& link);

// `profile` with its operations starting as `pace` has them; durations
// and everything else kept. simulate() reads durations alone, so a plan
// costs the same on either: only where copies are placed changes.
IterationProfile paced(const IterationProfile& profile, const Pace& pace);

// plan_auto's greedy, both orders, again on the timeline `plan` runs on;
// then on the timeline of the best plan so far, up to `rounds` times or
// until a round finds none faster. A plan that fits and simulates faster
// than `plan` (its saves deferred as plan_auto's are:
// defer_saves_behind_program_copies) replaces it, with the pace it was
// placed on. `plan` must fit; `profile` must carry its offload delay
// (profile_for).
void replan_on_own_timeline(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads,
                            Plan* plan, std::size_t rounds = 4);

}  // namespace vgpumem::scheduler
