// step_floor(): a lower bound on the steady-state step that no schedule can
// beat, from the profiled step alone (no planner in it).
//
// The argument (docs/workloads.md, "The floor"). Take any periodic
// schedule of period S and any operation p, and cut the timeline where p
// starts. At the cut at most `budget` bytes are on the device (resident or
// arriving or leaving), so a set A of at least V = total - budget bytes of
// units that p does not use is wholly elsewhere. Each unit u of A was last
// used at a_u before p and is next used at b_u after it. Take any second
// cut, where operation q starts (p <= q <= p + period). The copy that
// brings u back starts after the first cut and ends before b_u starts: if
// b_u <= q, it lies between the cuts. The copy that took u away (the one
// of the next period, which the same set A repeats) starts after a_u ends,
// one period later: if a_u + period >= q, it lies between the second cut
// and the first cut of the next period. So the stretch between the cuts
// lasts at least its compute and at least the bytes coming back in it over
// the link, and the stretch after the second cut likewise with the bytes
// going out; S is the sum of the two. A unit is then one of: in only
// (b_u <= q, a_u + period < q), out only (b_u > q), or both, and A is
// whatever set costs least. Minimising over fractions of units (which can
// only lower the bound) for each q, and taking the largest over p and q,
// gives the floor. With q = p it is the plain bound: the step's compute, or
// V bytes each way over the link, whichever is longer. Any set of cuts
// gives a bound: with `max_cuts`, a long step is cut at every stride-th
// operation only (a little lower, much quicker: the planning thread's).
//
// And whatever the cuts, each engine carries at least the least bytes any
// schedule moves a step (least_bytes.cpp): a unit away in both of its gaps
// (VGG-16's maps at a third of its peak) crosses twice a step.
//
// A unit whose next use overwrites it whole (a library call said so) needs
// no copy back: it costs nothing between the cuts, only its copy out after
// the second; and where that copy out lies before the second cut, it is
// away for free at this pair of cuts.

#include <algorithm>
#include <limits>
#include <vector>

#include "scheduler/copy_timeline.h"
#include "scheduler/swap_plan.h"

namespace vgpumem::scheduler {

namespace {

struct Stretches {
  double compute_in = 0, compute_out = 0;  // compute between the cuts, and after the second
  double in_rate = 1, out_rate = 1;        // link bytes per ns, to the device and to the host
  double in_only = 0, out_only = 0, both = 0;  // bytes of each kind among the units away at p
};

// The least the two stretches can last with `both_taken` bytes of units
// that must cross the link in both stretches among the V away: units of one
// direction fill what the link can carry under each stretch's compute, and
// the rest go where a byte costs least.
double cost_with(const Stretches& s, double away, double both_taken) {
  double rest = away - both_taken;
  const double room_in = std::max(0.0, s.compute_in * s.in_rate - both_taken);
  const double room_out = std::max(0.0, s.compute_out * s.out_rate - both_taken);
  double in = both_taken, out = both_taken;
  double in_left = s.in_only, out_left = s.out_only;
  const auto place = [&rest](double* bytes, double* left, double limit) {
    const double moved = std::min({*left, limit, std::max(rest, 0.0)});
    *bytes += moved;
    *left -= moved;
    rest -= moved;
  };
  place(&in, &in_left, room_in);
  place(&out, &out_left, room_out);
  // Beyond the rooms: the faster direction first.
  if (s.in_rate >= s.out_rate) {
    place(&in, &in_left, std::numeric_limits<double>::infinity());
    place(&out, &out_left, std::numeric_limits<double>::infinity());
  } else {
    place(&out, &out_left, std::numeric_limits<double>::infinity());
    place(&in, &in_left, std::numeric_limits<double>::infinity());
  }
  return std::max(s.compute_in, in / s.in_rate) + std::max(s.compute_out, out / s.out_rate);
}

// The least over how many bytes of "both" units are taken, where it is
// more than `floor`; `floor` where it is not. The cost is the optimum of a
// linear program in which that amount is a parameter, and so convex in it:
// a golden-section search finds its minimum. The search's ends are costs
// the least is at most, so where neither is above `floor` this pair of
// cuts cannot raise it and the search is skipped (most pairs, on long
// steps: the sweep over every pair was most of `vgpumem simulate`'s time).
double raised_floor(const Stretches& s, double away, double floor, FloorSearch search) {
  const double lo0 = std::max(0.0, away - s.in_only - s.out_only), hi0 = std::min(s.both, away);
  if (hi0 < lo0) return std::numeric_limits<double>::infinity();  // not enough can be away at this cut
  // A byte's worth of search tolerance, taken off so the bound stays below.
  const double slack = 1.0 / std::min(s.in_rate, s.out_rate);
  const double at_ends = std::min(cost_with(s, away, lo0), cost_with(s, away, hi0)) - slack;
  if (at_ends <= floor && search == FloorSearch::skip_what_cannot_raise) return floor;
  constexpr double kGolden = 0.6180339887498949;
  double lo = lo0, hi = hi0;
  for (int i = 0; i < 80 && hi - lo > 1.0; ++i) {
    const double m1 = hi - kGolden * (hi - lo), m2 = lo + kGolden * (hi - lo);
    if (cost_with(s, away, m1) <= cost_with(s, away, m2)) hi = m2;
    else lo = m1;
  }
  return std::max(floor, std::min(at_ends, std::min(cost_with(s, away, lo), cost_with(s, away, hi)) - slack));
}

}  // namespace

double step_floor(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link, std::size_t max_cuts,
                  FloorSearch search) {
  const std::size_t period = profile.period();
  const double plain_away =
      profile.total_bytes > budget ? static_cast<double>(profile.total_bytes - budget) : 0.0;
  double floor = std::max({profile.step_ns, plain_away / link.to_host_bytes_per_ns,
                           plain_away / link.to_device_bytes_per_ns});
  if (period == 0 || plain_away <= 0) return floor;
  // Each engine carries at least the least bytes any schedule moves: more
  // than the two cuts count where units must leave more than once a step.
  const double least = least_bytes_moved(profile, budget);
  floor = std::max({floor, least / link.to_host_bytes_per_ns, least / link.to_device_bytes_per_ns});

  struct Away {
    double bytes;
    std::size_t back;  // b_u, unrolled from p: in (p, p + period]
    std::size_t out;   // a_u + period, unrolled from p: in [p, p + period)
    bool overwritten;  // b_u overwrites it whole: nothing comes back
  };
  std::vector<Away> away;
  std::vector<double> back_bytes, out_bytes, written_out_bytes;  // per cut p, by q - p
  const std::size_t stride = max_cuts == 0 || period <= max_cuts ? 1 : (period + max_cuts - 1) / max_cuts;
  for (std::size_t p = 0; p < period; p += stride) {
    away.clear();
    for (const ProfileUnit& unit : profile.units) {
      if (unit.bytes == 0 || unit.uses.empty()) continue;
      // The first use at or after p, and the last before it.
      const auto next = std::lower_bound(unit.uses.begin(), unit.uses.end(), static_cast<std::uint32_t>(p));
      if (next != unit.uses.end() && *next == p) continue;  // p uses it: resident at the cut
      const std::size_t back = next != unit.uses.end() ? *next : unit.uses.front() + period;
      const std::size_t last = next != unit.uses.begin() ? *(next - 1) + period : unit.uses.back();
      const auto back_use = next != unit.uses.end() ? static_cast<std::size_t>(next - unit.uses.begin()) : 0;
      away.push_back({static_cast<double>(unit.bytes), back, last, unit.overwritten_at(back_use)});
    }
    // Sweep q from p to p + period: units with back <= q can come back
    // between the cuts, those with out >= q go out after the second cut.
    back_bytes.assign(period + 2, 0.0);
    out_bytes.assign(period + 2, 0.0);
    written_out_bytes.assign(period + 2, 0.0);
    double total = 0, written = 0;  // all away, and those of them whose next use overwrites them
    for (const Away& a : away) {
      total += a.bytes;
      if (a.overwritten) {
        written_out_bytes[a.out - p] += a.bytes;
        written += a.bytes;
        continue;
      }
      back_bytes[a.back - p] += a.bytes;
      out_bytes[a.out - p] += a.bytes;
    }
    if (total < plain_away) continue;  // nothing fits at this cut: the program gets CUDA's error
    double came_back = 0;     // units with back <= q
    double left_out = 0;      // units with out < q: in only
    double written_free = 0;  // overwritten units with out < q: no copy between or after the cuts
    for (std::size_t q = p; q <= p + period; ++q) {
      came_back += back_bytes[q - p];
      if ((q - p) % stride == 0 || q == p + period) {
        Stretches s;
        s.compute_in = timeline::start(profile, q) - timeline::start(profile, p);
        s.compute_out = profile.step_ns - s.compute_in;
        s.in_rate = link.to_device_bytes_per_ns;
        s.out_rate = link.to_host_bytes_per_ns;
        s.in_only = left_out;
        s.both = came_back - left_out;
        s.out_only = (total - written - came_back) + (written - written_free);
        if (plain_away > written_free) floor = raised_floor(s, plain_away - written_free, floor, search);
      }
      if (q < p + period) {
        left_out += out_bytes[q - p];
        written_free += written_out_bytes[q - p];
      }
    }
  }
  return floor;
}

}  // namespace vgpumem::scheduler
