// A trial of the ways to run a step no plan fits (or, where auto's fits,
// of its margin: TrialWay::automatic_one_chunk).
//
// When auto's plan cannot bring the step under the cap, what is left runs
// on demand, and whether a partial plan helps or hurts is not something the
// planner's model can say: it does not model on-demand paging. Measured
// on the simulated workloads, it goes both ways — on demand alone was
// 15-30 % faster than auto's partial plan on the demo trainer, and vDNN's
// partial plan 3-7 % faster than on demand on VGG-16 and ResNet-50 at the
// caps no plan fits. So the scheduler measures instead: each candidate runs
// for a few steps, the step after its first whole one is timed (device time
// and the waits before each operation: what the step cost), and the fastest
// stays in force for the rest of that lock. On demand may be measured
// already: the step the candidates were planned from ran on demand, before
// any plan — the same thing, unless the victims on demand takes are chosen
// by the plan in force (next_use_order.h), when it is run in turn too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

// The ways tried: what no plan covers pages on demand in each.
// `automatic_one_chunk`: auto's plan with a margin of one chunk instead of
// the standard one (PlanMargin), tried against auto's where both fit and
// the tighter is predicted faster: whether the profile saw everything the
// step needs room for is measured, not assumed. `automatic_link_alone`:
// auto's plan made on the link alone, as if moves cost the driver nothing
// (LinkModel::fetch_driver_ns), tried against auto's where the pager has
// measured what they cost: whether the driver's lane binds the step is
// measured too (on the calibrated simulator, planning with it took a
// full-size ResNet-50 step at half its peak from 1.32 to 1.08-1.13x its
// floor, and the same model at --scale 8, where the link binds, from 1.05
// to 1.12).
enum class TrialWay : std::uint8_t {
  on_demand,
  automatic,
  vdnn_all,
  vdnn_conv,
  automatic_one_chunk,
  automatic_link_alone
};
// "on demand", "auto", "vdnn-all", "vdnn-conv", "auto, one-chunk margin",
// "auto, on the link alone"
const char* trial_way_name(TrialWay way);

struct TrialCandidate {
  TrialWay way = TrialWay::on_demand;
  Plan plan;            // no swaps: on demand
  double step_ns = -1;  // measured: a whole step under it, waits included (-1: not yet)
};

class PlanTrial {
 public:
  // `candidates[0]` is the way in force when the trial begins (on demand,
  // or auto's plan that fits). Those measured already (step_ns >= 0) are
  // not run again; the rest are run in turn. Candidates whose moves equal
  // an earlier one's are dropped.
  // `log` and `lock`: the stream's log and the lock of its detector the
  // trial is of (RecordedIteration::log, lock).
  PlanTrial(const void* log, std::uint64_t lock, std::vector<TrialCandidate> candidates);

  bool covers(const void* log, std::uint64_t lock) const { return log == log_ && lock == lock_; }
  bool done() const { return next_ >= candidates_.size(); }
  std::size_t size() const { return candidates_.size(); }
  // The candidate to run: the one under trial, or once done the fastest.
  const TrialCandidate& current() const { return done() ? best() : candidates_[next_]; }
  const TrialCandidate& best() const;
  // The step measured under current(); the trial goes on to the next.
  void record(double step_ns);

  // The iteration serial from which a step under current() is measured.
  std::uint64_t measure_from = 0;

  // {"candidates": [{"policy", "step_ns"}, ...], "chosen", "done"}
  nlohmann::json summary() const;

 private:
  void skip_measured();

  const void* log_;
  std::uint64_t lock_;
  std::vector<TrialCandidate> candidates_;
  std::size_t next_ = 0;  // the first candidate not measured yet
};

}  // namespace vgpumem::scheduler
