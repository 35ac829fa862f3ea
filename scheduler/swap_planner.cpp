// plan_auto: Capuchin's swap selection without recomputation (Peng et al.
// 2020, §4.3), on the profiled step.
#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/plan_pacing.h"
#include "scheduler/plan_placement.h"
#include "scheduler/plan_refinement.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

namespace {

// Every gap between two consecutive uses of a unit, the wrapping one
// included, with the prefetch as late as the link alone allows.
std::vector<PlannedSwap> candidates(const IterationProfile& profile, const LinkModel& link,
                                    const PrefetchLeads& leads) {
  std::vector<PlannedSwap> out;
  const std::size_t period = profile.period();
  for (std::uint32_t u = 0; u < profile.units.size(); ++u) {
    const ProfileUnit& unit = profile.units[u];
    if (unit.bytes == 0) continue;
    for (std::size_t i = 0; i < unit.uses.size(); ++i) {
      PlannedSwap swap;
      swap.unit = u;
      swap.offload_after = unit.uses[i];
      swap.needed_by = unit.uses[(i + 1) % unit.uses.size()];
      const std::size_t need = timeline::needed_unrolled(profile, swap);
      const std::size_t first_absent = timeline::offload_issued_unrolled(profile, swap) + 1;
      if (need <= first_absent) continue;  // too short to be away for even one operation
      const double out_done = timeline::end(profile, timeline::offload_issued_unrolled(profile, swap)) + link.to_host_ns(unit.bytes);
      if (unit.overwritten_at((i + 1) % unit.uses.size())) {
        swap.no_copy_in = true;
        swap.prefetch_at = static_cast<std::uint32_t>((need - 1) % period);
        swap.free_ns = timeline::start(profile, need) - out_done;
        out.push_back(swap);
        continue;
      }
      const double in_ns = link.fetch_ns(unit.bytes);
      const auto lead = leads.find({unit.unit, swap.needed_by});
      const double latest_start =
          timeline::start(profile, need) - in_ns - (lead == leads.end() ? 0.0 : lead->second);
      std::size_t k = timeline::last_starting_by(profile, latest_start, first_absent, need - 1);
      swap.prefetch_at = static_cast<std::uint32_t>(k % period);
      swap.free_ns = latest_start - out_done;
      out.push_back(swap);
    }
  }
  return out;
}

// Where a candidate's unit can be away, unrolled as the swap's own
// positions are: from `first` up to, not including, `need`.
struct GapSpan {
  std::size_t first = 0, need = 0;
  std::size_t first_in_step = 0;  // first mod the period

  GapSpan(const IterationProfile& profile, const PlannedSwap& swap)
      : first(timeline::offload_issued_unrolled(profile, swap) + 1),
        need(timeline::needed_unrolled(profile, swap)),
        first_in_step(first % profile.period()) {}

  // Where operation `op` of the step falls in the span, unrolled; 0 if
  // outside it. (The greedy asks this of every candidate at every peak: no
  // division.)
  std::size_t position(std::size_t op, std::size_t period) const {
    const std::size_t distance = op >= first_in_step ? op - first_in_step : op + period - first_in_step;
    return first + distance < need ? first + distance : 0;
  }
};

// What gaps cover of the excess over the target: at each operation a gap
// is away for, the resident bytes over the target, at most its unit's.
// The greedy by coverage asks this of every gap around every peak, many of
// them spanning most of the step (weights): a sum over the curve per unit
// size, made once per size per peak, answers each in constant time.
class CoverageSums {
 public:
  CoverageSums(const std::vector<std::uint64_t>& curve, std::uint64_t target) : curve_(curve), target_(target) {}

  // The excess covered by a unit of `bytes` away over the unrolled
  // operations [first, last], which span less than a period.
  std::uint64_t covered(std::size_t first, std::size_t last, std::uint64_t bytes) {
    const std::vector<std::uint64_t>& sums = sums_for(bytes);
    const std::size_t from = first % curve_.size();
    return sums[from + (last - first) + 1] - sums[from];
  }

 private:
  // sums[i]: the covered excess over the first i operations of two periods.
  const std::vector<std::uint64_t>& sums_for(std::uint64_t bytes) {
    for (const auto& [size, sums] : by_size_) {
      if (size == bytes) return sums;
    }
    const std::size_t period = curve_.size();
    std::vector<std::uint64_t> sums(2 * period + 1, 0);
    for (std::size_t i = 0; i < 2 * period; ++i) {
      const std::uint64_t resident = curve_[i % period];
      sums[i + 1] = sums[i] + (resident > target_ ? std::min(bytes, resident - target_) : 0);
    }
    by_size_.emplace_back(bytes, std::move(sums));
    return by_size_.back().second;
  }

  const std::vector<std::uint64_t>& curve_;
  const std::uint64_t target_;
  std::vector<std::pair<std::uint64_t, std::vector<std::uint64_t>>> by_size_;
};

}  // namespace

std::vector<std::uint64_t> resident_curve(const IterationProfile& profile, const Plan& plan) {
  const std::size_t period = profile.period();
  std::vector<std::int64_t> change(period + 1, 0);
  const auto subtract = [&](std::size_t from, std::size_t to, std::uint64_t bytes) {  // [from, to], mod period
    change[from] -= static_cast<std::int64_t>(bytes);
    change[to + 1] += static_cast<std::int64_t>(bytes);
  };
  for (const PlannedSwap& swap : plan.swaps) {
    const std::size_t first = timeline::offload_issued_unrolled(profile, swap) + 1;
    const std::size_t last = timeline::prefetch_unrolled(profile, swap);
    if (last < first) continue;
    const std::uint64_t bytes = profile.units[swap.unit].bytes;
    const std::size_t from = first % period, to = from + (last - first);
    if (to < period) {
      subtract(from, to, bytes);
    } else {
      subtract(from, period - 1, bytes);
      subtract(0, to - period, bytes);
    }
  }
  std::vector<std::uint64_t> curve(period);
  std::int64_t resident = static_cast<std::int64_t>(profile.total_bytes);
  for (std::size_t op = 0; op < period; ++op) {
    resident += change[op];
    curve[op] = static_cast<std::uint64_t>(std::max<std::int64_t>(resident, 0));
  }
  return curve;
}

bool plan_fits(const IterationProfile& profile, const Plan& plan) {
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  return curve.empty() || *std::max_element(curve.begin(), curve.end()) <= plan.target;
}

std::uint64_t plan_margin(std::uint64_t budget, PlanMargin margin) {
  constexpr std::uint64_t kChunk = std::uint64_t{2} << 20;
  return margin == PlanMargin::one_chunk ? kChunk : std::max<std::uint64_t>(budget / 33, kChunk);
}

std::vector<PlannedSwap> auto_candidates(const IterationProfile& profile, const LinkModel& link,
                                         const PrefetchLeads& leads) {
  return candidates(profile, link, leads);
}

namespace {

// refine_auto_plan, with the candidate gaps on `profile`'s own timeline
// where the caller has them (plan_auto): the refinement takes them where
// the plan keeps that timeline, instead of building them again.
// The local search may move triggers back after the program's copies:
// the prefetches there are hoisted once more at the end.
void refine_with_pool(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads,
                      const std::vector<PlannedSwap>* pool, Plan* plan) {
  replan_on_own_timeline(profile, link, leads, plan);
  if (!plan->pace) {
    if (pool != nullptr) {
      refine_plan(profile, link, leads, *pool, plan);
    } else {
      refine_plan(profile, link, leads, candidates(profile, link, leads), plan);
    }
  } else {
    const IterationProfile timeline = paced(profile, *plan->pace);
    refine_plan(timeline, link, leads, candidates(timeline, link, leads), plan);
  }
  hoist_prefetches_over_program_copies(profile, link, plan);
}

}  // namespace

void refine_auto_plan(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, Plan* plan) {
  refine_with_pool(profile, link, leads, nullptr, plan);
}

Plan plan_auto_greedy(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                      const PrefetchLeads& leads, const std::vector<PlannedSwap>& pool, GapOrder order,
                      std::optional<std::uint64_t> target) {
  Plan plan;
  plan.policy = "auto";
  plan.budget = budget;
  plan.target = target.value_or(budget - std::min(budget, plan_margin(budget, PlanMargin::standard)));
  plan.peak_before = plan.peak_after = profile.total_bytes;
  if (profile.period() == 0 || profile.total_bytes <= plan.target) return plan;

  std::vector<std::size_t> taken(pool.size(), SIZE_MAX);  // where in plan.swaps, if taken
  std::vector<GapSpan> spans;
  spans.reserve(pool.size());
  for (const PlannedSwap& candidate : pool) spans.emplace_back(profile, candidate);
  std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  // Operations where nothing more can be away: on demand makes up the rest
  // there at run time, and the plan goes on with the other peaks, so that
  // on demand is left the fewest operations (a partial plan, plan_trial.h).
  std::vector<bool> given_up(curve.size(), false);
  for (;;) {
    std::size_t op = curve.size();
    for (std::size_t x = 0; x < curve.size(); ++x) {
      if (!given_up[x] && (op == curve.size() || curve[x] > curve[op])) op = x;
    }
    if (op == curve.size() || curve[op] <= plan.target) break;
    // Among the gaps around the peak, the best by `order`; among equals,
    // the larger unit frees more at once. A gap taken already counts if its
    // prefetch goes before the peak (it is then held back to it: later than
    // the link wants, but the unit is away there).
    std::size_t best = pool.size(), best_at = 0;
    double best_score = 0;
    CoverageSums coverage(curve, plan.target);
    const double overhead_bytes = order == GapOrder::coverage_per_move ? link.move_overhead_bytes() : 0.0;
    for (std::size_t c = 0; c < pool.size(); ++c) {
      const std::size_t at = spans[c].position(op, curve.size());
      if (at == 0) continue;
      if (taken[c] != SIZE_MAX && timeline::prefetch_unrolled(profile, plan.swaps[taken[c]]) >= at) continue;
      const std::uint64_t bytes = profile.units[pool[c].unit].bytes;
      double score = 0;
      if (order == GapOrder::free_time) {
        // Held away until the peak, its prefetch may have to go later than
        // the link wants: the slack is what is left of its free time then.
        const double held_start = timeline::prefetch_start(profile, at) + link.fetch_ns(bytes);
        score = std::min(pool[c].free_ns, timeline::start(profile, spans[c].need) - held_start);
      } else {
        // Per byte the move costs: its own, and by coverage per move the
        // driver work around it as bytes of link time, so that where the
        // driver's work per move is dear a small unit's move ranks below a
        // large one's that covers as much.
        const std::size_t last = std::max(timeline::prefetch_unrolled(profile, pool[c]), at);
        score = static_cast<double>(coverage.covered(spans[c].first, last, bytes)) /
                (static_cast<double>(bytes) + overhead_bytes);
      }
      if (best == pool.size() || score > best_score ||
          (score == best_score && bytes > profile.units[pool[best].unit].bytes)) {
        best = c;
        best_at = at;
        best_score = score;
      }
    }
    if (best == pool.size()) {  // nothing more can be away there
      given_up[op] = true;
      continue;
    }
    if (taken[best] == SIZE_MAX) {
      taken[best] = plan.swaps.size();
      plan.swaps.push_back(pool[best]);
    }
    PlannedSwap& swap = plan.swaps[taken[best]];
    swap.not_before = std::max<std::uint32_t>(swap.not_before, static_cast<std::uint32_t>(best_at));
    // Copies queue on each engine: earlier prefetches where later ones
    // would land too late, and the peak may move.
    place_copies(profile, link, leads, &plan);
    curve = resident_curve(profile, plan);
  }
  plan.peak_after = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
  plan.fits = plan.peak_after <= plan.target;
  return plan;
}

// Both greedy orders; the model keeps the one that fits, or the faster.
Plan plan_auto(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
               const PrefetchLeads& leads, bool refine, PlanMargin margin) {
  const std::vector<PlannedSwap> pool = candidates(profile, link, leads);
  const std::uint64_t target = budget - std::min(budget, plan_margin(budget, margin));
  Plan plan = plan_auto_greedy(profile, budget, link, leads, pool, GapOrder::free_time, target);
  if (!plan.swaps.empty()) {
    double plan_ns = simulate(profile, plan, link).step_ns;
    for (const GapOrder order : {GapOrder::coverage, GapOrder::coverage_per_move}) {
      if (!gap_order_applies(order, link)) continue;
      Plan covering = plan_auto_greedy(profile, budget, link, leads, pool, order, target);
      const double covering_ns = simulate(profile, covering, link).step_ns;
      if (covering.fits != plan.fits ? covering.fits : covering_ns < plan_ns) {
        plan = std::move(covering);
        plan_ns = covering_ns;
      }
    }
  }
  if (plan.fits) {
    defer_saves_behind_program_copies(profile, link, &plan);
    hoist_prefetches_over_program_copies(profile, link, &plan);
  }
  if (plan.fits && refine) refine_with_pool(profile, link, leads, &pool, &plan);
  return plan;
}

IterationProfile profile_for(const IterationProfile& profile, const Plan& plan) {
  IterationProfile planned = profile;
  planned.offload_delay = offload_delay_of(profile, plan);
  return planned;
}

Plan plan_auto_cutting_grace(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                             const PrefetchLeads& leads) {
  // The delay is the grace: an offload goes as the operation K after the
  // last use is enqueued (IterationProfile::offload_delay).
  Plan plan;
  IterationProfile cut = profile;
  for (std::size_t grace = profile.offload_delay / 2;; grace /= 2) {
    cut.offload_delay = grace;
    plan = plan_auto(cut, budget, link, leads);  // refined where it fits
    plan.offload_delay = cut.offload_delay;
    if (plan.fits || grace == 0) return plan;
  }
}

std::uint64_t excess_left(const IterationProfile& profile, const Plan& plan) {
  const IterationProfile planned = profile_for(profile, plan);
  std::uint64_t excess = 0;
  for (const std::uint64_t resident : resident_curve(planned, plan)) {
    if (resident > plan.target) excess += resident - plan.target;
  }
  return excess;
}

Plan fit_by_cutting_grace(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                          const PrefetchLeads& leads, Plan plan) {
  if (plan.fits || profile.offload_delay == 0) return plan;
  Plan cut = plan_auto_cutting_grace(profile, budget, link, leads);
  return cut.fits || excess_left(profile, cut) < excess_left(profile, plan) ? cut : plan;
}

}  // namespace vgpumem::scheduler
