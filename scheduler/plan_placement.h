// Where a plan's prefetches go once its copies queue on the engines: each
// offload waits for the one before it on the copy-out engine, and each
// prefetch must land before its use and before the next prefetch that the
// copy-in engine has to start. Used by every planner.
#pragma once

#include "scheduler/iteration_profile.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

// Sets every swap's prefetch_at: as late as lets it land in time behind the
// prefetches after it, never before its offload is done, never earlier than
// the second operation after its offload is issued.
void place_copies(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, Plan* plan);

}  // namespace vgpumem::scheduler
