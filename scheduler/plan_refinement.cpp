#include "scheduler/plan_refinement.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "scheduler/plan_placement.h"

namespace vgpumem::scheduler {

namespace {

class Search {
 public:
  Search(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, RefinementLimits limits)
      : profile_(profile), link_(link), leads_(leads), limits_(limits) {}

  bool exhausted() const { return evaluations_ >= limits_.evaluations; }

  // The step `trial` runs in once its copies are placed, or a negative
  // number where it no longer fits.
  double score(Plan* trial) {
    ++evaluations_;
    place_copies(profile_, link_, leads_, trial);
    const std::vector<std::uint64_t> curve = resident_curve(profile_, *trial);
    const std::uint64_t peak = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
    if (peak > trial->target) return -1;
    trial->peak_after = peak;
    return simulate(profile_, *trial, link_).step_ns;
  }

 private:
  const IterationProfile& profile_;
  const LinkModel& link_;
  const PrefetchLeads& leads_;
  const RefinementLimits limits_;
  std::size_t evaluations_ = 0;
};

// Improvements smaller than this are noise in the model, not worth a move.
constexpr double kWorthNs = 1000;

}  // namespace

void refine_plan(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads,
                 const std::vector<PlannedSwap>& candidates, Plan* plan, RefinementLimits limits) {
  Search search(profile, link, leads, limits);
  const Plan given = *plan;
  double best = search.score(plan);
  if (best < 0) {  // does not fit as placed here: nothing to refine
    *plan = given;
    return;
  }

  // Candidates by free time, most first: those hide their copies best.
  std::vector<std::size_t> by_free(candidates.size());
  std::iota(by_free.begin(), by_free.end(), std::size_t{0});
  std::stable_sort(by_free.begin(), by_free.end(),
                   [&](std::size_t a, std::size_t b) { return candidates[a].free_ns > candidates[b].free_ns; });
  const auto key = [](const PlannedSwap& swap) { return std::pair{swap.unit, swap.offload_after}; };

  bool improved = true;
  while (improved && !search.exhausted()) {
    improved = false;
    // Drop: largest units first (they move the most bytes).
    std::vector<std::size_t> order(plan->swaps.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return profile.units[plan->swaps[a].unit].bytes > profile.units[plan->swaps[b].unit].bytes;
    });
    for (const std::size_t s : order) {
      if (search.exhausted()) break;
      Plan trial = *plan;
      trial.swaps.erase(trial.swaps.begin() + static_cast<std::ptrdiff_t>(s));
      const double step = search.score(&trial);
      if (step >= 0 && step < best - kWorthNs) {
        best = step;
        *plan = std::move(trial);
        improved = true;
        break;  // indexes moved: start the round again
      }
    }
    if (improved) continue;
    // Add: the best of the first few gaps not taken.
    std::set<std::pair<std::uint32_t, std::uint32_t>> taken;
    for (const PlannedSwap& swap : plan->swaps) taken.insert(key(swap));
    Plan best_trial;
    double best_step = best - kWorthNs;
    std::size_t tried = 0;
    for (const std::size_t c : by_free) {
      if (tried == limits.additions_tried || search.exhausted()) break;
      if (taken.count(key(candidates[c])) != 0) continue;
      ++tried;
      Plan trial = *plan;
      trial.swaps.push_back(candidates[c]);
      const double step = search.score(&trial);
      if (step >= 0 && step < best_step) {
        best_step = step;
        best_trial = std::move(trial);
      }
    }
    if (!best_trial.swaps.empty()) {
      best = best_step;
      *plan = std::move(best_trial);
      improved = true;
    }
  }
  search.score(plan);  // leave its copies placed as scored
}

}  // namespace vgpumem::scheduler
