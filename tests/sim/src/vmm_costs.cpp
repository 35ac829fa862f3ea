// What the VMM calls cost the calling thread, in simulated time: the H100's
// medians (docs/gpu-facts.md §8.6, idle device, 20 repetitions), interpolated
// linearly in size between the measured 2, 20 and 64 MiB points and
// extended past 64 MiB along the last segment. The cost is per call, hardly
// per byte, which is why a memory manager maps large chunks and pools handles.
// A map made while the device works can be set to cost more
// (VGPUSIM_MAP_BUSY_US, spend_map_time).
#include <algorithm>
#include <array>
#include <iterator>

#include "sim.h"

namespace vgpusim {
namespace {

constexpr std::array<double, 3> kMeasuredBytes = {2.0 * (1 << 20), 20.0 * (1 << 20), 64.0 * (1 << 20)};

struct Costs {
  std::array<double, 3> us;  // at kMeasuredBytes
};

Costs costs_of(VmmCall call) {
  switch (call) {
    case VmmCall::create: return {{12.5, 13.6, 33.7}};
    case VmmCall::map: return {{1.0, 1.3, 1.4}};
    case VmmCall::set_access: return {{26.9, 46.7, 49.5}};
    case VmmCall::unmap: return {{18.6, 28.8, 29.3}};
    case VmmCall::release: return {{12.9, 30.5, 46.4}};
    case VmmCall::reserve:
    case VmmCall::address_free: return {{0.5, 0.5, 0.5}};  // "< 1 µs"
  }
  return {{0, 0, 0}};
}

}  // namespace

double vmm_call_ns(VmmCall call, std::uint64_t bytes) {
  const Costs c = costs_of(call);
  const double x = static_cast<double>(bytes);
  std::size_t segment = x <= kMeasuredBytes[1] ? 0 : 1;
  const double x0 = kMeasuredBytes[segment], x1 = kMeasuredBytes[segment + 1];
  const double y0 = c.us[segment], y1 = c.us[segment + 1];
  const double us = x <= x0 ? y0 : y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  return 1000.0 * (us > 0 ? us : 0);
}

void spend_vmm_time(Simulator& sim, VmmCall call, std::uint64_t bytes) {
  advance_host(sim, host_now(sim) + vmm_call_ns(call, bytes));
}

// Mapping while the device works waits on it: the H200 took 77-109 µs per
// 2 MiB handle during training (docs/results.md), where the H100 took 1 µs idle.
void spend_map_time(Simulator& sim, int device, std::uint64_t bytes) {
  const double now = host_now(sim);
  const double idle = vmm_call_ns(VmmCall::map, bytes);
  const Device& state = sim.devices[static_cast<std::size_t>(device)];
  const bool busy = std::any_of(std::begin(state.engine_free_ns), std::end(state.engine_free_ns),
                                [now](double free_at) { return free_at > now; });
  advance_host(sim, now + (busy ? std::max(idle, sim.map_busy_ns) : idle));
}

}  // namespace vgpusim
