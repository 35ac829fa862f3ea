#include "scheduler/plan_trial.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace vgpumem::scheduler {

namespace {

bool same_moves(const Plan& a, const Plan& b) {
  if (a.swaps.size() != b.swaps.size()) return false;
  for (std::size_t i = 0; i < a.swaps.size(); ++i) {
    const PlannedSwap &x = a.swaps[i], &y = b.swaps[i];
    if (x.unit != y.unit || x.offload_after != y.offload_after || x.prefetch_at != y.prefetch_at ||
        x.needed_by != y.needed_by) {
      return false;
    }
  }
  return true;
}

}  // namespace

const char* trial_way_name(TrialWay way) {
  switch (way) {
    case TrialWay::on_demand: return "on demand";
    case TrialWay::automatic: return "auto";
    case TrialWay::vdnn_all: return "vdnn-all";
    case TrialWay::vdnn_conv: return "vdnn-conv";
    case TrialWay::automatic_one_chunk: return "auto, one-chunk margin";
    case TrialWay::automatic_link_alone: return "auto, on the link alone";
  }
  return "?";
}

PlanTrial::PlanTrial(const void* log, std::uint64_t lock, std::vector<TrialCandidate> candidates)
    : log_(log), lock_(lock) {
  for (TrialCandidate& candidate : candidates) {
    const bool repeated = std::any_of(candidates_.begin(), candidates_.end(), [&](const TrialCandidate& kept) {
      return same_moves(kept.plan, candidate.plan);
    });
    if (!repeated) candidates_.push_back(std::move(candidate));
  }
  skip_measured();
}

void PlanTrial::skip_measured() {
  while (next_ < candidates_.size() && candidates_[next_].step_ns >= 0) ++next_;
}

// The fastest measured (the first candidate while none is).
const TrialCandidate& PlanTrial::best() const {
  const TrialCandidate* best = nullptr;
  for (const TrialCandidate& candidate : candidates_) {
    if (candidate.step_ns >= 0 && (best == nullptr || candidate.step_ns < best->step_ns)) best = &candidate;
  }
  return best != nullptr ? *best : candidates_.front();
}

void PlanTrial::record(double step_ns) {
  if (done()) return;
  candidates_[next_].step_ns = step_ns;
  ++next_;
  skip_measured();
}

nlohmann::json PlanTrial::summary() const {
  nlohmann::json candidates = nlohmann::json::array();
  for (const TrialCandidate& candidate : candidates_) {
    candidates.push_back({{"policy", trial_way_name(candidate.way)},
                          {"swaps", candidate.plan.swaps.size()},
                          {"step_ns", candidate.step_ns < 0 ? nlohmann::json(nullptr) : nlohmann::json(candidate.step_ns)}});
  }
  return {{"candidates", std::move(candidates)}, {"chosen", trial_way_name(best().way)}, {"done", done()}};
}

}  // namespace vgpumem::scheduler
