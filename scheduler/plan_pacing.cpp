#include "scheduler/plan_pacing.h"

#include <utility>
#include <vector>

namespace vgpumem::scheduler {

std::shared_ptr<const Pace> pace_of(const IterationProfile& profile, const Plan& plan, const LinkModel& link) {
  PlanTiming timing = simulate(profile, plan, link, /*explain=*/true);
  auto pace = std::make_shared<Pace>();
  pace->start_ns = std::move(timing.op_start_ns);
  pace->step_ns = timing.step_ns;
  return pace;
}

IterationProfile paced(const IterationProfile& profile, const Pace& pace) {
  IterationProfile result = profile;
  if (pace.start_ns.size() != result.ops.size()) return result;
  for (std::size_t op = 0; op < result.ops.size(); ++op) result.ops[op].start_ns = pace.start_ns[op];
  result.step_ns = pace.step_ns;
  return result;
}

void replan_on_own_timeline(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads,
                            Plan* plan, std::size_t rounds) {
  if (!plan->fits || plan->swaps.empty()) return;
  std::shared_ptr<const Pace> pace = pace_of(profile, *plan, link);
  double best_ns = pace->step_ns;  // the plan's simulated step
  for (std::size_t round = 0; round < rounds; ++round) {
    const IterationProfile timeline = paced(profile, *pace);
    const std::vector<PlannedSwap> pool = auto_candidates(timeline, link, leads);
    bool improved = false;
    for (const GapOrder order : {GapOrder::free_time, GapOrder::coverage, GapOrder::coverage_per_move}) {
      if (!gap_order_applies(order, link)) continue;
      Plan trial = plan_auto_greedy(timeline, plan->budget, link, leads, pool, order, plan->target);
      if (!trial.fits) continue;
      defer_saves_behind_program_copies(timeline, link, &trial);
      hoist_prefetches_over_program_copies(timeline, link, &trial);
      const double ns = simulate(profile, trial, link).step_ns;
      if (ns >= best_ns) continue;
      trial.offload_delay = plan->offload_delay;
      trial.pace = pace;
      *plan = std::move(trial);
      best_ns = ns;
      improved = true;
    }
    if (!improved) return;
    pace = pace_of(profile, *plan, link);
  }
}

}  // namespace vgpumem::scheduler
