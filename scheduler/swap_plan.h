// A swap plan and the planners that make one (Note [Planners],
// below). A plan names, for units of a profiled iteration, the
// operation after which each goes to the host and the one at whose issue it
// starts coming back; the executor (scheduler.h) turns it into triggers.
//
// Positions are operation indexes of the profile; a gap may wrap from late
// in one iteration to early in the next (the optimizer's last touch of a
// weight to the next forward pass), so `needed_by` may be below
// `offload_after` and a trigger's index is taken modulo the period.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "scheduler/iteration_profile.h"

// Note [Planners]
// ~~~~~~~~~~~~~~~
// Planners (`scheduler/swap_plan.h`): `plan_auto` is Capuchin's swap
// selection without recomputation. Every gap between two consecutive uses
// of a unit (the one that wraps into the next step included) is a
// candidate; at the predicted resident peak, the candidate away there with
// the most slack (its free time: the gap less the copy out and the copy
// back, at 55 GB/s each way, less any lateness from being held away over
// the peak) is taken — or, in a second pass, the one that covers the most
// excess over the target across its gap per byte it moves (the fewest
// bytes, what a link-bound step wants; the model keeps the faster of the
// two plans), its copies placed on the two engines' timelines
// (`plan_placement.cpp`: each prefetch as late as lands it in time behind
// the ones after it, never before its save is done), and the peak
// recomputed, until it is under the budget less a margin (3 %, at least
// one chunk, for what the profile does not see; where a plan with a margin
// of one chunk also fits and is predicted faster, the two are measured a
// step each in the lock's trial, `plan_trial.h`, and the faster kept for
// the lock — whether the profile saw everything is measured, not assumed).
// An offload goes as the last use is enqueued (the feed hears
// of an operation once it is enqueued and its holds are dropped, and the
// save's copy waits for it); under `VGPUMEM_GRACE=blanket`, as the operation
// `VGPUMEM_GRACE_LAUNCHES` after it (the grace keeps a unit that long); a
// prefetch with the
// operation whose start leaves it time to land. Where a user still waited,
// its prefetch goes earlier next plan by as long. Where no plan can bring
// the step under the cap, what it leaves pages on demand, and whether a
// partial plan then helps or hurts is measured, not predicted (the model has
// no on-demand paging; measured, it goes both ways: on demand alone was
// 15-30 % faster than auto's partial plan on the demo trainer, vDNN's 3-7 %
// faster than on demand on VGG-16 and ResNet-50). Where it is the launch
// grace that leaves no room (a short step of large units: VGG-16's 107
// operations over 50 MiB maps, with eight operations' units held on the
// device), auto plans again with the grace halved until a plan fits, down
// to none (`plan_auto_cutting_grace`): that plan's offloads are issued
// sooner after each last use and the pager is told they may take units
// still inside the grace (`TriggerTable::inside_grace`,
// `PagerControl::offload_unit`; never under `VGPUMEM_CHECK=torture`;
// counted in the trace's `paging.grace.planned_inside`). It is no bolder
// than on-demand paging at that cap, which then evicts inside the grace
// too. A partial plan is still as whole as it can be: where the greedy
// meets a peak no gap can lower (an operation whose own units, with those
// the grace keeps, exceed the target), it sets that operation aside and
// goes on with the other peaks, so on demand is left only the operations
// no plan could bring under the cap. Where no grace lets a plan fit, the
// partial plan with the grace cut to none and the one with the full grace
// are compared by what each leaves over the target, summed over the
// step's operations (`excess_left`), and the one that leaves less is
// auto's (VGG-16 at a third of its peak: the full grace kept eight
// operations' 50 MiB maps on the device for on demand to make room around
// synchronously; with it cut, auto's partial plan measured 166 ms a step
// against on demand's 206). Either plan — the one with the grace cut, or
// else the partial one — is auto's way in the trial: `plan_trial.{h,cpp}` runs
// it and vDNN's two in turn, times the second whole step
// under each (`AccessLog::request_timing`), compares them with the on-demand
// step the plans were made from, and keeps the fastest for the rest of the
// lock (the trace's `schedule.trial`).
// `plan_vdnn` is vDNN's baselines: each forward layer's input (what its
// head touches and leaves until the backward pass) goes out after its last
// forward use and comes back when the backward layer before its user's
// begins; all layers, or only those led by a kernel named like a
// convolution.

namespace vgpumem::scheduler {

// The host link, per direction (both copy engines run at once).
struct LinkModel {
  double to_host_bytes_per_ns = 55.0;    // 55 GB/s: the H100's pinned rate (docs/gpu-facts.md §8)
  double to_device_bytes_per_ns = 55.0;
  double latency_ns = 2000;              // per copy
  // The driver work a move costs the host around its copies, as measured
  // (vmm::HostPathStats::driver_ns_per_move): before a fetch's copy can
  // start, the unit is mapped and access to it granted; after a save, its
  // range is unmapped. Every such call of every thread waits for the
  // driver's one lock, so this work is serial, a lane of its own beside the
  // two copy engines; on an H200 under training it cost more per 2 MiB unit
  // than the unit's copy (docs/simulated-driver.md, "Host costs"). 0 until
  // the pager has measured it: the plan then sees the link alone.
  double fetch_driver_ns = 0;  // per fetch, before its copy
  double save_driver_ns = 0;   // per save, after it
  double to_host_ns(std::uint64_t bytes) const {
    return latency_ns + static_cast<double>(bytes) / to_host_bytes_per_ns;
  }
  double to_device_ns(std::uint64_t bytes) const {
    return latency_ns + static_cast<double>(bytes) / to_device_bytes_per_ns;
  }
  // From a fetch's trigger to its unit's landing, when nothing waits: the
  // driver work that makes its room, then its copy.
  double fetch_ns(std::uint64_t bytes) const { return fetch_driver_ns + to_device_ns(bytes); }
  // What a move there and back costs besides its bytes, as bytes of link
  // time: what ranks a small unit's move against a large one's (the
  // planner's greedy by coverage, swap_planner.cpp).
  double move_overhead_bytes() const {
    return (fetch_driver_ns + save_driver_ns) * std::min(to_host_bytes_per_ns, to_device_bytes_per_ns);
  }
};

struct PlannedSwap {
  std::uint32_t unit = 0;           // index in IterationProfile::units
  std::uint32_t offload_after = 0;  // its last use before the gap; the offload goes at the next issue
  std::uint32_t prefetch_at = 0;    // the prefetch goes once this operation is issued (mod period)
  std::uint32_t needed_by = 0;      // its next use (mod period)
  // The prefetch goes no earlier than this operation (unrolled from the
  // last use, as prefetch_at is): the unit must stay away at the peak it
  // was chosen to cover, even where the link cannot bring it back in time.
  std::uint32_t not_before = 0;
  double free_ns = 0;               // Capuchin's free time: the gap less both copies
  // Operations the offload is held back past the earliest it could go (the
  // last use, and the offload delay after it): so that its save does not
  // queue ahead of the program's own copy to the host on the copy-out
  // engine (defer_saves_behind_program_copies).
  std::uint32_t offload_late = 0;
  // Its next use overwrites it whole (a library call said so): nothing is
  // copied back, and no prefetch is issued; the use itself brings it back
  // on demand, without a copy (vmm/library_call_scope.h). prefetch_at is
  // then the operation before that use: it is away until then.
  bool no_copy_in = false;
};

// When each operation of a step starts under a plan, its waits included
// (simulate()): the timeline the plan runs on.
struct Pace {
  std::vector<double> start_ns;  // per operation, from the step's start
  double step_ns = 0;
};

struct Plan {
  const char* policy = "";
  std::vector<PlannedSwap> swaps;
  std::uint64_t budget = 0;         // the paging budget it was made for
  std::uint64_t target = 0;         // budget less the margin
  std::uint64_t peak_before = 0;    // predicted resident peak without the plan (the step's bytes)
  std::uint64_t peak_after = 0;     // with it
  bool fits = true;                 // peak_after <= target (else the on-demand path makes up the rest)
  // How many operations after its last use each offload is issued: none
  // means the profile's (IterationProfile::offload_delay, the pager's launch
  // grace kept whole). Fewer: the plan was made with the grace cut
  // (plan_auto_cutting_grace), and its offloads take units still inside it.
  std::optional<std::size_t> offload_delay;
  // The timeline its prefetches were placed on: null for the profile's own
  // (the recorded kernels back to back), else the one a plan runs on
  // (plan_pacing.h); the refinement places its trials on the same.
  std::shared_ptr<const Pace> pace;
};

// How many operations after a last use the plan's offloads are issued
// (before any PlannedSwap::offload_late): its own delay, else the profile's.
inline std::size_t offload_delay_of(const IterationProfile& profile, const Plan& plan) {
  return plan.offload_delay.value_or(profile.offload_delay);
}
// The profile a plan's positions are on: `profile` with the plan's offload
// delay.
IterationProfile profile_for(const IterationProfile& profile, const Plan& plan);

// Extra lead for a prefetch that arrived late: per (unit, needed_by), the
// nanoseconds its trigger moves earlier than the link alone says.
using PrefetchLeads = std::map<std::pair<const vmm::Unit*, std::uint32_t>, double>;

// The room a plan keeps below its budget for what the profile does not see
// (a unit allocated mid-step, rounding). `standard`: 3 % of the budget, at
// least one 2 MiB chunk. `one_chunk`: a chunk alone — for a step the
// profile saw whole, which the scheduler finds out by measuring both
// (scheduler.h, the margin's trial).
enum class PlanMargin { standard, one_chunk };
std::uint64_t plan_margin(std::uint64_t budget, PlanMargin margin);

// Capuchin's swap planner, without recomputation: gaps ranked by free
// time, taken at the predicted peak until it is under `budget` less a
// margin; prefetches placed on the simulated copy-in timeline to land in
// time. Nothing is planned when the step fits.
// `refine`: then improve a plan that fits (refine_auto_plan: planned again
// on the timeline it runs on, then local search).
Plan plan_auto(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
               const PrefetchLeads& leads = {}, bool refine = true, PlanMargin margin = PlanMargin::standard);
// The order plan_auto's greedy takes gaps in at the peak. By free time
// (Capuchin's): the copies hide best, what a step with compute to spare
// wants. By coverage: the excess over the target a gap covers, summed over
// the operations it is away for, per byte it moves: the fewest bytes, what
// a link-bound step wants. plan_auto runs both and the model keeps the one
// that fits, or the faster. Measured on the model: by coverage moves 6 %
// fewer bytes and is 3 % faster on ResNet-50 at half its peak on the H100's
// link; by free time is 1.5 % faster on BERT-large with a link eight times
// faster. By coverage per move: the same per byte moved plus the driver
// work the move costs as bytes of link time (LinkModel::
// move_overhead_bytes): fewer, larger units, what a step bound by the
// driver's lane wants (ResNet-50 full size at half its peak on the
// calibrated simulator: 95.1 → 77.7 ms a step); where the lane is not what
// binds, it moves more bytes than it must, and the model keeps another
// (plan_auto tries it only where a move costs driver work).
enum class GapOrder { free_time, coverage, coverage_per_move };
// Whether the planners try `order` on `link`: coverage per move only where
// a move costs driver work (else it is coverage again).
inline bool gap_order_applies(GapOrder order, const LinkModel& link) {
  return order != GapOrder::coverage_per_move || link.move_overhead_bytes() > 0;
}
// One greedy pass over `pool` (plan_auto's candidate gaps: auto_candidates).
// `target`: what to bring the step under (default: `budget` less the
// standard margin).
Plan plan_auto_greedy(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                      const PrefetchLeads& leads, const std::vector<PlannedSwap>& pool, GapOrder order,
                      std::optional<std::uint64_t> target = std::nullopt);
std::vector<PlannedSwap> auto_candidates(const IterationProfile& profile, const LinkModel& link,
                                         const PrefetchLeads& leads);
// Improves a plan that fits: plan_auto's greedy again on the timeline the
// plan runs on (replan_on_own_timeline, plan_pacing.h), then the local
// search of plan_refinement.h over plan_auto's candidate gaps, on the
// timeline the plan's copies were placed on. `plan` still fits afterwards,
// and simulates no slower.
void refine_auto_plan(const IterationProfile& profile, const LinkModel& link, const PrefetchLeads& leads, Plan* plan);

// Where no plan fits with the profile's launch grace: plan_auto with the
// grace halved until a plan fits, down to none. The first plan that fits,
// refined (refine_auto_plan) and its offload_delay the one it was made
// with; or, if none does, the plan
// with no grace (unfit). Units move inside their grace only this way, where
// the cap leaves no room outside it — as on-demand paging then evicts inside
// it too (vmm/launch_grace.h).
Plan plan_auto_cutting_grace(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                             const PrefetchLeads& leads = {});
// `plan` (auto's, with the profile's grace) where it fits or there is no
// grace to cut; else plan_auto_cutting_grace's plan where that fits; else,
// of the two partial plans, the one that leaves on demand less to do
// (excess_left): on a short step of large units, a unit kept through the
// eight operations after its last use is room on demand must make by
// itself, synchronously, at every peak. What the scheduler and `vgpumem
// simulate` plan.
Plan fit_by_cutting_grace(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                          const PrefetchLeads& leads, Plan plan);
// What `plan` leaves over its target: the resident bytes above it, summed
// over the step's operations (on the plan's own grace, Plan::offload_delay).
// 0 for a plan that fits.
std::uint64_t excess_left(const IterationProfile& profile, const Plan& plan);

// The program's own copies to the host (ProfileOp::to_host: the loss read
// at the end of a step, which the program waits for) run on the copy-out
// engine behind every save issued before them. Saves the plan issues
// shortly before such a copy and that would still be queued there when it
// comes are held back until just after it, where the plan still fits
// that way and the step is then faster (by simulate()); the closest to the
// copy first.
void defer_saves_behind_program_copies(const IterationProfile& profile, const LinkModel& link, Plan* plan);
// The same copies make the program wait until they land, and nothing after
// them is issued meanwhile: a prefetch triggered after one starts only
// then, though the copy-in engine may be idle. Each such prefetch is
// triggered by the operation before the copy instead, where the plan still
// fits that way and the step is then faster (by simulate()); the earliest
// needed first (prefetch_hoisting.cpp).
void hoist_prefetches_over_program_copies(const IterationProfile& profile, const LinkModel& link, Plan* plan);

// vDNN: each forward layer's input (the units its leading kernel touches
// that wait for the backward pass) goes out after its forward use and comes
// back one layer ahead in the backward pass; every layer, or only those led
// by a convolution. Whatever the cap.
Plan plan_vdnn(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link, bool convolutions_only);

// The predicted resident bytes when each operation is issued, under `plan`.
std::vector<std::uint64_t> resident_curve(const IterationProfile& profile, const Plan& plan);
// Whether that curve stays under the plan's target throughout.
bool plan_fits(const IterationProfile& profile, const Plan& plan);

// What a plan costs on the two-engine copy timeline, in the steady state
// (the second of two iterations run back to back).
struct PlanTiming {
  double step_ns = 0;
  double stall_ns = 0;  // compute waiting for a prefetch
  std::uint64_t bytes_to_host = 0, bytes_to_device = 0;

  // A prefetch that landed after its user was ready to run, in the measured
  // step, and what held its copy back last: the copy-in engine busy with
  // those before it, the operation that fires it issued too late for the
  // copy's own time, its own save not done, the save that empties the
  // room it takes not done, or the driver work before its copy (its own
  // and the moves' queued ahead of it: LinkModel::fetch_driver_ns).
  enum class Cause : std::uint8_t { link, trigger, own_save, room, driver };
  struct Late {
    std::uint32_t swap = 0;  // index in Plan::swaps
    double waited_ns = 0;    // from when its user could have started
    Cause cause = Cause::link;
  };
  std::vector<Late> late;  // filled when simulate() is asked (`explain`)
  // When each operation of the measured step starts, from the step's start
  // (filled with `late`).
  std::vector<double> op_start_ns;
};
PlanTiming simulate(const IterationProfile& profile, const Plan& plan, const LinkModel& link, bool explain = false);

// A lower bound no schedule can beat, computed without any planner
// (step_floor.cpp; docs/workloads.md, "The floor"): at least the
// stall-free compute, and at least the link time of what must be away at
// the busiest moment, counted in the stretches where it must cross.
// `max_cuts` (0: every operation) bounds the cut positions tried each way,
// for speed on long steps: the bound stays valid, a little lower.
// `search`: whether a pair of cuts that cannot raise the bound found so
// far is skipped (the same bound, much sooner) or searched anyway (for the
// test that says it is the same).
enum class FloorSearch { skip_what_cannot_raise, every_pair };
double step_floor(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link,
                  std::size_t max_cuts = 0, FloorSearch search = FloorSearch::skip_what_cannot_raise);

// A lower bound on the bytes any schedule moves each way a step so that at
// most `budget` is on the device at every operation (least_bytes.cpp):
// the least cover of the excess by gaps between uses, over `steps` steps
// unrolled, about steps / (steps + 2) of the exact least. 0 where nothing
// need move, or no schedule fits.
double least_bytes_moved(const IterationProfile& profile, std::uint64_t budget, std::size_t steps = 64);
// The same for schedules that keep each unit on the device through the
// `kept` operations after each of its last uses (a plan's offload_delay:
// the launch grace it keeps); least_bytes_moved is kept = 0, as a plan that
// keeps no grace is. std::nullopt where no such schedule fits the budget.
std::optional<double> least_bytes_keeping(const IterationProfile& profile, std::uint64_t budget, std::size_t kept,
                                          std::size_t steps = 64);

}  // namespace vgpumem::scheduler
