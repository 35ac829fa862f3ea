// plan_vdnn: the baselines of vDNN (Rhu et al. 2016, §III-B): vDNN_all and
// vDNN_conv, on the profiled step. A layer is the run of operations a heavy
// kernel leads (iteration_profile.cpp); its input is what that kernel
// touches and then leaves until the backward pass. Unlike the paper's
// runtime, the offload does not hold the layer up: it runs on the copy
// stream and the next layer goes on (the on-demand path still waits for it
// should its chunks be wanted).
#include <algorithm>
#include <set>
#include <utility>

#include "scheduler/copy_timeline.h"
#include "scheduler/plan_placement.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

Plan plan_vdnn(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link, bool convolutions_only) {
  Plan plan;
  plan.policy = convolutions_only ? "vdnn-conv" : "vdnn-all";
  plan.budget = budget;
  plan.target = budget;
  plan.peak_before = profile.total_bytes;
  const std::size_t period = profile.period();
  const std::size_t turn = profile.backward_begins;
  std::vector<std::size_t> backward_heads;  // operations leading a layer of the backward pass
  for (std::size_t op = turn; op < period; ++op) {
    if (profile.ops[op].heavy) backward_heads.push_back(op);
  }
  std::set<std::pair<std::uint32_t, std::uint32_t>> chosen;  // (unit, last use): each gap once
  for (std::size_t op = 0; op < turn; ++op) {
    const ProfileOp& head = profile.ops[op];
    if (!head.heavy || (convolutions_only && !head.convolution)) continue;
    for (std::uint32_t k = 0; k < head.use_count; ++k) {
      const std::uint32_t u = profile.uses[head.first_use + k];
      const std::vector<std::uint32_t>& uses = profile.units[u].uses;
      const auto at = std::lower_bound(uses.begin(), uses.end(), static_cast<std::uint32_t>(op));
      // Its last use of the forward pass, the next one in the backward pass.
      auto next = std::upper_bound(uses.begin(), uses.end(), static_cast<std::uint32_t>(turn - 1));
      if (next == uses.end() || next == uses.begin()) continue;
      const std::uint32_t last_forward = *(next - 1);
      if (last_forward < *at) continue;
      PlannedSwap swap;
      swap.unit = u;
      swap.offload_after = last_forward;
      swap.needed_by = *next;
      const std::size_t first_absent = timeline::offload_issued_unrolled(profile, swap) + 1;
      if (swap.needed_by <= first_absent || !chosen.emplace(u, last_forward).second) continue;
      // One layer ahead: when the backward layer before the one that
      // needs it begins.
      const auto layer = std::upper_bound(backward_heads.begin(), backward_heads.end(), swap.needed_by);
      std::size_t trigger = first_absent;
      if (layer != backward_heads.begin()) {
        const auto own = layer - 1;  // the head of the layer that uses it
        trigger = own != backward_heads.begin() ? *(own - 1) : *own;
      }
      trigger = std::clamp<std::size_t>(trigger, first_absent, swap.needed_by - 1);
      swap.prefetch_at = static_cast<std::uint32_t>(trigger);
      plan.swaps.push_back(swap);
    }
  }
  const std::vector<std::uint64_t> curve = resident_curve(profile, plan);
  plan.peak_after = curve.empty() ? 0 : *std::max_element(curve.begin(), curve.end());
  plan.fits = plan.peak_after <= budget;
  static_cast<void>(link);  // vDNN places its prefetches by layer, not by the link
  return plan;
}

}  // namespace vgpumem::scheduler
