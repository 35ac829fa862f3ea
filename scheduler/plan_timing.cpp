// simulate(): what a plan costs on the two-engine timeline.
#include <algorithm>
#include <limits>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/freed_bytes.h"
#include "scheduler/swap_plan.h"
#include "vmm/move_pieces.h"

// Note [Pricing a plan]
// ~~~~~~~~~~~~~~~~~~~~~
// Pricing a plan (`plan_timing.cpp`): `simulate()` runs a plan on the
// two-engine timeline for three steps back to back and measures the last:
// compute in issue order, each operation starting once its units have
// landed; the program's copies to the host on the copy-out engine too,
// behind the saves issued before them; offloads on the copy-out engine after the operation that fires
// them; prefetches on the copy-in engine from the start of the operation
// that fires them, after their own save and after the save of the chunks
// they take (the pool hands out the earliest freed first, as the pager's
// does: a plan can fit in issue order yet make prefetches wait for the
// saves that empty their chunks when memory is tight; `freed_bytes.h`,
// where bytes taken while more is owed than is free are owed too — until
// 2026-11-25 the first step's takes were free, and every later step found
// that much room the pager never has: VGG-16 at half its peak was predicted
// 139 ms and ran 176; now 179). Saves and prefetches move in the pager's
// pieces (`vmm/move_pieces.h`): each piece of a save frees its room when
// it ends, and each piece of a prefetch waits for the room it writes, so a
// prefetch into the room of a large save follows it a piece behind (since
// 2026-11-26; before, the model moved units whole and placed prefetches for
// engines the pager no longer has: GPT-2-medium at half its peak 270.1 →
// 264.6 ms, ResNet-50 183.4 → 181.0). Beside the engines, the driver's
// lane (`LinkModel::fetch_driver_ns`): each fetch's mapping before its copy
// and each save's unmapping, as the pager measured them, one at a time as
// the driver's lock takes them (since 2026-11-29: on the calibrated
// simulator a ResNet-50 step at half its peak was mover-bound, its driver
// work 146 ms of each 190 ms iteration; planned with the lane and with moves
// ranked by bytes and driver work, 95.1 → 77.7 ms a step).

namespace vgpumem::scheduler {

PlanTiming simulate(const IterationProfile& profile, const Plan& plan, const LinkModel& link, bool explain) {
  PlanTiming timing;
  const std::size_t period = profile.period();
  if (period == 0) return timing;
  constexpr std::size_t kRounds = 3;  // the last is measured: the wrapping gaps are in flight by then
  const std::size_t horizon = kRounds * period;
  const std::size_t swaps = plan.swaps.size();
  // Per swap and round: when its offload is saved and when it lands.
  std::vector<double> saved(swaps * (kRounds + 1), -std::numeric_limits<double>::infinity());
  std::vector<double> landed(swaps * (kRounds + 1), -std::numeric_limits<double>::infinity());
  std::vector<PlanTiming::Cause> held_by(explain ? swaps * (kRounds + 1) : 0, PlanTiming::Cause::link);
  std::vector<std::vector<std::size_t>> offload_at(period), prefetch_at(period), needed_at(period);
  for (std::size_t s = 0; s < swaps; ++s) {
    const PlannedSwap& swap = plan.swaps[s];
    offload_at[timeline::offload_issued_unrolled(profile, swap) % period].push_back(s);
    if (!swap.no_copy_in) prefetch_at[swap.prefetch_at].push_back(s);
    needed_at[swap.needed_by].push_back(s);
  }
  // The round of a swap instance whose event falls at unrolled x.
  const auto round_of = [&](std::size_t x, std::size_t offset) { return x >= offset ? (x - offset) / period : kRounds; };

  FreedBytes pool(plan.budget == 0 ? std::numeric_limits<std::uint64_t>::max() : plan.budget, profile.total_bytes);
  double compute_free = 0, out_free = 0, in_free = 0, measured_from = 0;
  // The driver's lane (LinkModel::fetch_driver_ns): one lock for every
  // thread's VMM calls, so each fetch's mapping and each save's unmapping
  // take it in turn. A save's unmapping is charged as the save is issued,
  // not as it ends: the lane's work per step is what matters, and a save
  // queued behind others would otherwise hold up mappings issued before it
  // ends.
  double driver_free = 0;
  for (std::size_t x = 0; x < horizon; ++x) {
    const std::size_t op = x % period;
    const bool measured = x >= (kRounds - 1) * period;
    if (x == (kRounds - 1) * period) measured_from = compute_free;
    double start = compute_free;
    for (const std::size_t s : needed_at[op]) {
      const std::size_t r = round_of(x, timeline::needed_unrolled(profile, plan.swaps[s]));
      if (r >= kRounds) continue;
      if (plan.swaps[s].no_copy_in) {
        // Back at its use with no copy: once its own save is done (the pager
        // unmaps its range first) and the room it takes is free.
        const double room = pool.take(static_cast<double>(profile.units[plan.swaps[s].unit].bytes));
        landed[s * (kRounds + 1) + r] = std::max(saved[s * (kRounds + 1) + r], room);
        if (explain) {
          held_by[s * (kRounds + 1) + r] =
              saved[s * (kRounds + 1) + r] >= room ? PlanTiming::Cause::own_save : PlanTiming::Cause::room;
        }
      }
      const double arrived = landed[s * (kRounds + 1) + r];
      if (explain && measured && arrived > compute_free) {
        timing.late.push_back({static_cast<std::uint32_t>(s), arrived - compute_free, held_by[s * (kRounds + 1) + r]});
      }
      start = std::max(start, arrived);
    }
    // Its offloads (room first, as the executor does) wait for what its
    // stream holds, itself included: their saves queue on the copy-out
    // engine.
    const auto issue_offloads = [&](double after) {
      for (const std::size_t s : offload_at[op]) {
        const std::size_t r = round_of(x, timeline::offload_issued_unrolled(profile, plan.swaps[s]));
        if (r >= kRounds) continue;
        const std::uint64_t bytes = profile.units[plan.swaps[s].unit].bytes;
        // In pieces, as the pager saves (vmm/move_pieces.h): each piece's
        // room is free once that piece is saved.
        out_free = std::max(out_free, after);
        for (std::uint64_t done = 0; done < bytes; done += vmm::kMovePieceBytes) {
          const std::uint64_t piece = std::min(vmm::kMovePieceBytes, bytes - done);
          out_free += link.to_host_ns(piece);
          pool.give_back(static_cast<double>(piece), out_free);
        }
        saved[s * (kRounds + 1) + r] = out_free;
        if (link.save_driver_ns > 0) driver_free = std::max(driver_free, after) + link.save_driver_ns;
        if (measured) timing.bytes_to_host += bytes;
      }
    };
    if (profile.ops[op].to_host) {
      // The program's copy to the host: on the copy-out engine, behind every
      // save issued before it — those its own triggers issue included (the
      // executor fires them before the copy is enqueued), which wait for the
      // work before it.
      issue_offloads(compute_free);
      start = std::max(start, out_free);
      if (measured) timing.stall_ns += start - compute_free;
      compute_free = start + profile.ops[op].duration_ns;
      out_free = compute_free;
    } else {
      if (measured) timing.stall_ns += start - compute_free;
      compute_free = start + profile.ops[op].duration_ns;
      issue_offloads(compute_free);
    }
    if (explain && measured) timing.op_start_ns.push_back(start - measured_from);
    // Its prefetches start with it (copy_timeline.h).
    for (const std::size_t s : prefetch_at[op]) {
      const std::size_t r = round_of(x, timeline::prefetch_unrolled(profile, plan.swaps[s]));
      if (r >= kRounds) continue;
      const std::uint64_t bytes = profile.units[plan.swaps[s].unit].bytes;
      const double own_save = saved[s * (kRounds + 1) + r];
      // Its room made and mapped first, on the driver's lane.
      const double mapped = link.fetch_driver_ns > 0 ? std::max(driver_free, start) + link.fetch_driver_ns : start;
      driver_free = std::max(driver_free, mapped);
      // In pieces, as the pager fetches: each after the room it writes is
      // saved; the first also after the unit's own save (its host copy).
      for (std::uint64_t done = 0; done < bytes; done += vmm::kMovePieceBytes) {
        const std::uint64_t piece = std::min(vmm::kMovePieceBytes, bytes - done);
        const double room = pool.take(static_cast<double>(piece));
        const double begins = std::max({in_free, mapped, own_save, room});
        if (explain && done == 0) {
          held_by[s * (kRounds + 1) + r] = begins == start       ? PlanTiming::Cause::trigger
                                           : begins == own_save  ? PlanTiming::Cause::own_save
                                           : begins == room      ? PlanTiming::Cause::room
                                           : begins == mapped    ? PlanTiming::Cause::driver
                                                                 : PlanTiming::Cause::link;
        }
        in_free = begins + link.to_device_ns(piece);
      }
      landed[s * (kRounds + 1) + r] = in_free;
      if (measured) timing.bytes_to_device += bytes;
    }
  }
  timing.step_ns = compute_free - measured_from;
  return timing;
}

}  // namespace vgpumem::scheduler
