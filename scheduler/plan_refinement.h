// Local search over a plan that fits. The greedy choice of plan_auto takes
// gaps one peak at a time and never looks back: a gap taken for an early
// peak may be more than later choices left necessary, and a plan can fit in
// issue order yet make prefetches wait for the saves that free their chunks
// (memory is tight) or queue behind one another (the link is). This pass
// scores plans on the two-engine timeline (simulate, which models both) and
// keeps a change that still fits under the target and runs faster: taking
// one more gap (freeing chunks early), or dropping one (moving less).
#pragma once

#include <cstddef>
#include <vector>

#include "scheduler/iteration_profile.h"
#include "scheduler/swap_plan.h"

// Note [Refinement]
// ~~~~~~~~~~~~~~~~~
// Refinement (`plan_refinement.cpp`): the greedy never looks back, so a
// plan that fits is then improved by local search scored with `simulate()`:
// drop a move (largest first) or take one more gap (among the 48 with the
// most free time), keeping any change that still fits and runs faster, up to
// 800 plans scored (a count, not a clock: the same step always gets the
// same plan).

namespace vgpumem::scheduler {

struct RefinementLimits {
  std::size_t evaluations = 800;  // plans scored, at most (deterministic: no clock)
  std::size_t additions_tried = 48;  // per round, the candidates with the most free time
};

// `candidates`: every gap the plan could take (plan_auto's pool). `plan`
// must fit; it still fits afterwards, and simulates no slower.
void refine_plan(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads,
                 const std::vector<PlannedSwap>& candidates, Plan* plan, RefinementLimits limits = {});

}  // namespace vgpumem::scheduler
