// step_floor(): a lower bound on the steady-state step that no schedule can
// beat, from the profiled step alone (no planner in it).
//
// The argument (docs/benchmarks.md, "The floor"). Take any periodic
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
// V bytes each way over the link, whichever is longer.
//
// A second bound counts bytes rather than time. At the start of every
// operation at least V bytes are away, and a unit away there is in one of
// its gaps: it left after the end of its last use (so it can be wholly
// away two operations later at the earliest) and is back before its next
// use. Each stretch away costs its bytes once each way. The least bytes a
// period can move is then at least the optimum of a covering program over
// the gaps (every operation covered V times over, by bytes of gaps that
// contain it), and by weak duality at least the value of any feasible dual
// solution: for a set K of operations, V |K| less, for each gap, its bytes
// times one less than the number of K's operations it contains (where
// positive). K is grown greedily from nothing while that value rises. The
// link carries that many bytes each way per step.
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

// The least over how many bytes of "both" units are taken: the cost is the
// optimum of a linear program in which that amount is a parameter, and so
// convex in it; a golden-section search finds its minimum.
double least_cost(const Stretches& s, double away) {
  double lo = std::max(0.0, away - s.in_only - s.out_only), hi = std::min(s.both, away);
  if (hi < lo) return std::numeric_limits<double>::infinity();  // not enough can be away at this cut
  constexpr double kGolden = 0.6180339887498949;
  for (int i = 0; i < 80 && hi - lo > 1.0; ++i) {
    const double m1 = hi - kGolden * (hi - lo), m2 = lo + kGolden * (hi - lo);
    if (cost_with(s, away, m1) <= cost_with(s, away, m2)) hi = m2;
    else lo = m1;
  }
  // A byte's worth of search tolerance, taken off so the bound stays below.
  const double slack = 1.0 / std::min(s.in_rate, s.out_rate);
  return std::min(cost_with(s, away, lo), cost_with(s, away, hi)) - slack;
}

// The dual bound on the bytes one period must move each way (above).
double least_bytes_moved(const IterationProfile& profile, double away) {
  const std::size_t period = profile.period();
  struct Gap {
    std::size_t first, last;  // operations it can be wholly away at, unrolled: first < period
    double bytes;
  };
  std::vector<Gap> gaps;
  for (const ProfileUnit& unit : profile.units) {
    if (unit.bytes == 0) continue;
    for (std::size_t k = 0; k < unit.uses.size(); ++k) {
      const std::size_t last_use = unit.uses[k];
      std::size_t next_use = unit.uses[(k + 1) % unit.uses.size()];
      if (next_use <= last_use) next_use += period;
      if (last_use + 2 > next_use - 1) continue;  // never wholly away in it
      gaps.push_back({last_use + 2, next_use - 1, static_cast<double>(unit.bytes)});
    }
  }
  // Normalise: a gap starting in the next period is the same gap shifted back.
  for (Gap& gap : gaps) {
    if (gap.first >= period) {
      gap.first -= period;
      gap.last -= period;
    }
  }
  std::vector<char> chosen(period, 0);
  std::vector<std::uint32_t> prefix(2 * period + 1, 0);  // K's operations over two periods
  std::vector<double> lost(period + 1, 0.0);  // per operation: bytes of gaps through it already holding a K point
  double bound = 0;
  for (;;) {
    for (std::size_t i = 0; i < 2 * period; ++i) prefix[i + 1] = prefix[i] + (chosen[i % period] != 0 ? 1 : 0);
    std::fill(lost.begin(), lost.end(), 0.0);
    const auto add = [&](std::size_t from, std::size_t to, double bytes) {  // [from, to] within a period
      lost[from] += bytes;
      lost[to + 1] -= bytes;
    };
    for (const Gap& gap : gaps) {
      if (prefix[gap.last + 1] - prefix[gap.first] == 0) continue;
      const std::size_t length = gap.last - gap.first + 1;
      if (length >= period) {
        add(0, period - 1, gap.bytes);
      } else if (gap.last < period) {
        add(gap.first, gap.last, gap.bytes);
      } else {
        add(gap.first, period - 1, gap.bytes);
        add(0, gap.last - period, gap.bytes);
      }
    }
    double running = 0, best_gain = 0;
    std::size_t best = period;
    for (std::size_t i = 0; i < period; ++i) {
      running += lost[i];
      const double gain = away - running;
      if (chosen[i] == 0 && gain > best_gain) {
        best_gain = gain;
        best = i;
      }
    }
    if (best == period) return bound;
    chosen[best] = 1;
    bound += best_gain;
  }
}

}  // namespace

double step_floor(const IterationProfile& profile, std::uint64_t budget, const LinkModel& link) {
  const std::size_t period = profile.period();
  const double plain_away =
      profile.total_bytes > budget ? static_cast<double>(profile.total_bytes - budget) : 0.0;
  double floor = std::max({profile.step_ns, plain_away / link.to_host_bytes_per_ns,
                           plain_away / link.to_device_bytes_per_ns});
  if (period == 0 || plain_away <= 0) return floor;
  const double moved = least_bytes_moved(profile, plain_away);
  floor = std::max({floor, moved / link.to_host_bytes_per_ns, moved / link.to_device_bytes_per_ns});

  struct Away {
    double bytes;
    std::size_t back;  // b_u, unrolled from p: in (p, p + period]
    std::size_t out;   // a_u + period, unrolled from p: in [p, p + period)
  };
  std::vector<Away> away;
  std::vector<std::size_t> by_back, by_out;
  for (std::size_t p = 0; p < period; ++p) {
    away.clear();
    for (const ProfileUnit& unit : profile.units) {
      if (unit.bytes == 0 || unit.uses.empty()) continue;
      // The first use at or after p, and the last before it.
      const auto next = std::lower_bound(unit.uses.begin(), unit.uses.end(), static_cast<std::uint32_t>(p));
      if (next != unit.uses.end() && *next == p) continue;  // p uses it: resident at the cut
      const std::size_t back = next != unit.uses.end() ? *next : unit.uses.front() + period;
      const std::size_t last = next != unit.uses.begin() ? *(next - 1) + period : unit.uses.back();
      away.push_back({static_cast<double>(unit.bytes), back, last});
    }
    // Sweep q from p to p + period: units with back <= q can come back
    // between the cuts, those with out >= q go out after the second cut.
    std::vector<double> back_bytes(period + 2, 0.0), out_bytes(period + 2, 0.0);  // by q - p
    double total = 0;
    for (const Away& a : away) {
      back_bytes[a.back - p] += a.bytes;
      out_bytes[a.out - p] += a.bytes;
      total += a.bytes;
    }
    if (total < plain_away) continue;  // nothing fits at this cut: the program gets CUDA's error
    double came_back = 0;  // units with back <= q
    double left_out = 0;   // units with out < q: in only
    for (std::size_t q = p; q <= p + period; ++q) {
      came_back += back_bytes[q - p];
      Stretches s;
      s.compute_in = timeline::start(profile, q) - timeline::start(profile, p);
      s.compute_out = profile.step_ns - s.compute_in;
      s.in_rate = link.to_device_bytes_per_ns;
      s.out_rate = link.to_host_bytes_per_ns;
      s.in_only = left_out;
      s.both = came_back - left_out;
      s.out_only = total - came_back;
      floor = std::max(floor, least_cost(s, plain_away));
      if (q < p + period) left_out += out_bytes[q - p];
    }
  }
  return floor;
}

}  // namespace vgpumem::scheduler
