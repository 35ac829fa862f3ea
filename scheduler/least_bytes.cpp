// least_bytes_moved(): a lower bound on the bytes any schedule moves each
// way a step (docs/workloads.md, "The floor"), which step_floor turns into
// link time.
//
// At every operation at most `budget` bytes are on the device, so the
// units away there must cover the excess (the step's bytes less the
// budget); a unit away at an operation is away for a stretch of the gap
// between two of its uses, and crosses the link out and back once for it
// (fractions of units allowed, which can only lower the bound; a gap whose
// next use overwrites the unit whole costs nothing, since a schedule that
// knows it may drop the bytes). The least total over a step is a covering
// linear program whose rows (operations) each gap covers consecutively.
//
// With every byte costing the same, a sweep along a line solves it
// exactly: at each operation in turn, cover what is still missing with
// the gaps that reach furthest ahead (an exchange argument: anything a
// solution spends on a gap that ends sooner, spent on one that ends later
// covers as much here and more beyond; everything before is covered
// already). A step wraps, so the sweep runs over `steps` steps unrolled
// into a line, with every copy of each gap that reaches it. A periodic
// schedule repeated over that line uses its gaps of at most steps + 2
// steps, so the line's least over steps + 2 is a lower bound on one
// step's (about steps / (steps + 2) of it: 97 % at 64).
//
// With units kept on the device some operations after each last use (the
// pager's launch grace), the same sweep gives the least any schedule under
// that rule moves: what the grace alone costs, against the floor's.
//
// scripts/least_bytes.py solves the same program with networkx's network
// simplex: the two agree on the recorded steps of docs/workloads.md (609
// and 875 MiB on VGG-16's at half and a third of its peak, 64 steps).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

namespace {

struct Interval {
  std::size_t first = 0, last = 0;  // operations of the line, inclusive
  double bytes = 0;
};

}  // namespace

double least_bytes_moved(const IterationProfile& profile, std::uint64_t budget, std::size_t steps) {
  return least_bytes_keeping(profile, budget, 0, steps).value_or(0.0);
}

std::optional<double> least_bytes_keeping(const IterationProfile& profile, std::uint64_t budget, std::size_t kept,
                                          std::size_t steps) {
  const std::size_t period = profile.period();
  if (period == 0 || profile.total_bytes <= budget || steps == 0) return 0.0;
  const double excess = static_cast<double>(profile.total_bytes - budget);
  const std::size_t length = steps * period;

  // Every copy of every gap on the line; a free gap (overwritten at its
  // end) is taken whole up front, as its coverage costs nothing.
  std::vector<Interval> gaps;
  std::vector<double> change(length + 1, 0.0);  // coverage, as differences along the line
  for (const ProfileUnit& unit : profile.units) {
    if (unit.bytes == 0 || unit.uses.empty()) continue;
    for (std::size_t i = 0; i < unit.uses.size(); ++i) {
      const std::size_t last_use = unit.uses[i];
      const std::size_t next_index = (i + 1) % unit.uses.size();
      const std::size_t next_use = unit.uses[next_index] + (next_index == 0 ? period : 0);
      // Kept through the `kept` operations after the last use, the unit can
      // be away from the one after those to the one before its next use.
      const std::size_t away_from = last_use + 1 + kept;
      if (next_use <= away_from) continue;  // never away between
      const bool free = unit.overwritten_at(next_index);
      // Copies starting one step before the line (a gap wraps into it) to its end.
      for (std::size_t copy = 0; copy <= steps + 1; ++copy) {
        const std::size_t shift = copy * period;  // the line starts `period` into the unrolled steps
        const std::size_t first = away_from + shift, last = next_use - 1 + shift;
        if (last < period || first >= length + period) continue;
        Interval gap{std::max(first, period) - period, std::min(last - period, length - 1),
                     static_cast<double>(unit.bytes)};
        if (free) {
          change[gap.first] += gap.bytes;
          change[gap.last + 1] -= gap.bytes;
        } else {
          gaps.push_back(gap);
        }
      }
    }
  }
  std::sort(gaps.begin(), gaps.end(), [](const Interval& a, const Interval& b) { return a.first < b.first; });

  // The open gaps by how far they reach, furthest first.
  const auto reaches_less = [&gaps](std::size_t a, std::size_t b) { return gaps[a].last < gaps[b].last; };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(reaches_less)> open(reaches_less);
  std::size_t next = 0;
  double covered = 0, spent = 0;
  for (std::size_t op = 0; op < length; ++op) {
    while (next < gaps.size() && gaps[next].first <= op) open.push(next++);
    covered += change[op];
    double missing = excess - covered;
    while (missing > 0 && !open.empty()) {
      Interval& gap = gaps[open.top()];
      if (gap.last < op) {  // ended before here
        open.pop();
        continue;
      }
      const double taken = std::min(missing, gap.bytes);
      gap.bytes -= taken;
      spent += taken;
      covered += taken;
      change[gap.last + 1] -= taken;
      missing -= taken;
      if (gap.bytes <= 0) open.pop();
    }
    // Nothing can be away enough here: no schedule fits the budget (the
    // program gets CUDA's error); no bound from the link.
    if (missing > 0.5) return std::nullopt;
  }
  return spent / static_cast<double>(steps + 2);
}

}  // namespace vgpumem::scheduler
