#include "scheduler/iteration_profile.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace vgpumem::scheduler {

namespace {

// The value a `fraction` of `values` lie below.
double quantile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(static_cast<double>(values.size() - 1) * fraction);
  std::nth_element(values.begin(), at, values.end());
  return *at;
}
double median(std::vector<double> values) { return quantile(std::move(values), 0.5); }

// The backward pass's first operation as the library calls say, or
// `period` when none is backward.
std::size_t first_backward_call(const IterationProfile& profile) {
  const std::size_t period = profile.period();
  std::size_t best = period, longest = 0, previous = period;
  for (std::size_t pass = 0; pass < 2; ++pass) {  // the second pass closes the cycle
    for (std::size_t op = 0; op < period; ++op) {
      if (!profile.ops[op].call_start || !is_backward(profile.ops[op].library)) continue;
      if (previous != period) {
        const std::size_t gap = (op + period - previous) % period;
        if (pass == 1 && gap > longest) {
          longest = gap;
          best = op;
        }
      }
      previous = op;
    }
  }
  if (best == period && previous != period) best = previous;  // one backward call only
  return best;
}

// A call that does a layer's main work: a convolution pass over its input
// or weights, or a matrix multiply (a bias gradient is a reduction beside
// the weights' pass, not a layer of its own).
bool computes(LibraryOp op) {
  return op == LibraryOp::matmul || op == LibraryOp::conv_forward || op == LibraryOp::conv_backward_data ||
         op == LibraryOp::conv_backward_filter;
}

}  // namespace

// When library calls compute in the step, they say where layers start:
// each such call's first operation leads one, and nothing else does (an
// activation or an attention kernel belongs to the layer of the call
// before it). Otherwise a kernel leads a layer when it runs more than twice
// as long as the lower quartile of kernels (a convolution or a GEMM next to
// the normalisations, activations and element-wise updates around it:
// those are the many short ones, and the backward pass doubles the layers'
// own); in a step of kernels alike, each one does.
void mark_heavy(IterationProfile& profile) {
  bool any = false;
  for (ProfileOp& op : profile.ops) {
    op.heavy = op.call_start && computes(op.library);
    any = any || op.heavy;
  }
  if (any) return;
  std::vector<double> kernel_durations;
  for (const ProfileOp& op : profile.ops) {
    if (op.kernel) kernel_durations.push_back(op.duration_ns);
  }
  const double typical = quantile(kernel_durations, 0.25);
  for (ProfileOp& op : profile.ops) {
    op.heavy = op.kernel && op.duration_ns > 2 * typical;
    any = any || op.heavy;
  }
  if (any) return;
  for (ProfileOp& op : profile.ops) op.heavy = op.kernel;
}

std::size_t find_backward_begins(const IterationProfile& profile) {
  if (const std::size_t called = first_backward_call(profile); called < profile.period()) return called;
  // Idle bytes at each operation: those of units between two uses. The
  // activations a forward pass keeps for the backward pass are all idle at
  // the turn, and the weights it will use again with them: the curve peaks
  // there. (Gradients idle between the backward pass and the optimizer
  // count too, but fewer at once.)
  const std::size_t period = profile.period();
  if (period == 0) return 0;
  std::vector<std::int64_t> change(period + 1, 0);
  for (const ProfileUnit& unit : profile.units) {
    for (std::size_t i = 1; i < unit.uses.size(); ++i) {
      const std::size_t from = unit.uses[i - 1] + 1, to = unit.uses[i];  // idle in [from, to)
      if (from >= to) continue;
      change[from] += static_cast<std::int64_t>(unit.bytes);
      change[to] -= static_cast<std::int64_t>(unit.bytes);
    }
  }
  std::int64_t idle = 0, most = -1;
  std::size_t peak = 0;
  for (std::size_t op = 0; op < period; ++op) {
    idle += change[op];
    if (idle > most) {
      most = idle;
      peak = op;
    }
  }
  return peak;
}

bool is_copy_to_host(std::string_view api) { return api.find("DtoH") != std::string_view::npos; }

IterationProfile build_profile(const RecordedIteration& iteration, const ProfileSources& sources) {
  IterationProfile profile;
  profile.log = iteration.log;
  profile.lock = iteration.lock;
  profile.device = iteration.ops.empty() ? 0 : iteration.ops.front().device;
  profile.ops.resize(iteration.ops.size());

  std::vector<double> known;
  for (std::size_t i = 0; i < iteration.ops.size(); ++i) {
    const RecordedOp& recorded = iteration.ops[i];
    ProfileOp& op = profile.ops[i];
    op.identity = recorded.identity;
    op.kernel = recorded.function != nullptr;
    op.to_host = !op.kernel && is_copy_to_host(recorded.api);
    op.library = recorded.library_op;
    op.call_start = recorded.library_call != 0 && (i == 0 || iteration.ops[i - 1].library_call != recorded.library_call);
    op.convolution = op.library != LibraryOp::none
                         ? op.library == LibraryOp::conv_forward
                         : op.kernel && sources.convolution && sources.convolution(recorded.function);
    double duration = -1, stall = -1;
    if (sources.time) sources.time(i, &duration, &stall);
    op.duration_ns = duration;
    op.stall_ns = std::max(stall, 0.0);
    if (duration >= 0) known.push_back(duration);
  }
  const double fallback = known.empty() ? 1000.0 : median(known);
  for (ProfileOp& op : profile.ops) {
    if (op.duration_ns < 0) op.duration_ns = fallback;
    op.start_ns = profile.step_ns;
    profile.step_ns += op.duration_ns;
    profile.stall_ns += op.stall_ns;
  }

  // Units, each once, in order of first use; the uses of each operation.
  std::unordered_map<const vmm::Unit*, std::uint32_t> index;
  for (std::size_t i = 0; i < iteration.ops.size(); ++i) {
    const RecordedOp& recorded = iteration.ops[i];
    ProfileOp& op = profile.ops[i];
    op.first_use = static_cast<std::uint32_t>(profile.uses.size());
    for (std::uint32_t k = 0; k < recorded.unit_count; ++k) {
      vmm::Unit* unit = iteration.units[recorded.first_unit + k];
      auto [it, added] = index.try_emplace(unit, static_cast<std::uint32_t>(profile.units.size()));
      if (added) {
        ProfileUnit fresh;
        fresh.unit = unit;
        fresh.bytes = sources.bytes ? sources.bytes(unit) : 0;
        profile.units.push_back(std::move(fresh));
        profile.total_bytes += profile.units.back().bytes;
      }
      std::vector<std::uint32_t>& uses = profile.units[it->second].uses;
      if (uses.empty() || uses.back() != i) {
        uses.push_back(static_cast<std::uint32_t>(i));
        profile.uses.push_back(it->second);
        const std::uint8_t whole = k < 64 && ((recorded.overwritten >> k) & 1) != 0 ? 1 : 0;
        profile.overwrites.push_back(whole);
        profile.units[it->second].overwritten.push_back(whole);
      }
    }
    op.use_count = static_cast<std::uint32_t>(profile.uses.size()) - op.first_use;
  }
  mark_heavy(profile);
  profile.backward_begins = find_backward_begins(profile);
  return profile;
}

}  // namespace vgpumem::scheduler
