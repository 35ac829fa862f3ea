// What driver calls cost the calling host thread, in simulated time, and what
// releasing device memory costs a copy engine. Two models
// (VGPUSIM_COST_MODEL, docs/simulated-driver.md "Host costs"):
//
// * `calibrated` (the default) charges what a training run on a real GPU
//   paid. During PyTorch training on an H200 the pager's launch thread spent
//   more time in the driver than the GPU spent computing: mapping a unit back
//   cost 77-109 µs per 2 MiB handle, unmapping 33-41 µs per handle, pinning
//   0.24 s per GiB (docs/results.md, 2026-11-27). So VMM calls cost per call
//   and per physical handle whether or not the device is busy; every VMM and
//   pinning call of every thread queues behind one driver-wide lock (the RM
//   API lock, a sleeping mutex in the open kernel modules); launches, copies,
//   event records and stream waits cost the issuing thread a few
//   microseconds; and memory released to the driver is scrubbed by a copy
//   engine before it can be handed out again.
// * `idle` is the model before that run: the H100's idle medians per call
//   (docs/gpu-facts.md §8.6), a map made while the device works costing
//   VGPUSIM_MAP_BUSY_US, nothing else charged. Kept for side-by-side runs.
//
// Every number is in kCalibrated / kIdle below, each with where it comes
// from; the same table is in docs/simulated-driver.md.
#include <algorithm>
#include <array>
#include <iterator>

#include "sim.h"

namespace vgpusim {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// A cost measured at a few handle sizes, interpolated linearly between them
// and held flat outside.
struct SizeCurve {
  std::array<double, 3> mib;
  std::array<double, 3> us;

  double at(double bytes) const {
    const double x = bytes / kMiB;
    if (x <= mib[0]) return us[0];
    for (std::size_t i = 1; i < mib.size(); ++i) {
      if (x <= mib[i]) return us[i - 1] + (us[i] - us[i - 1]) * (x - mib[i - 1]) / (mib[i] - mib[i - 1]);
    }
    return us.back();
  }
};

// The H100's idle medians (gpu-facts §8.6), per call, by the call's size.
SizeCurve idle_curve(VmmCall call) {
  switch (call) {
    case VmmCall::create: return {{2, 20, 64}, {12.5, 13.6, 33.7}};
    case VmmCall::map: return {{2, 20, 64}, {1.0, 1.3, 1.4}};
    case VmmCall::set_access: return {{2, 20, 64}, {26.9, 46.7, 49.5}};
    case VmmCall::unmap: return {{2, 20, 64}, {18.6, 28.8, 29.3}};
    case VmmCall::release: return {{2, 20, 64}, {12.9, 30.5, 46.4}};
    case VmmCall::reserve:
    case VmmCall::address_free: return {{2, 20, 64}, {0.5, 0.5, 0.5}};  // "< 1 µs"
  }
  return {};
}

// Calibrated: a fixed part per call plus a part per physical handle the call
// covers, by the handle's size. Per handle, from the H100 measured while a
// kernel ran (gpu-facts.md table "6", 2 and 64 MiB; 20 MiB interpolated),
// split between the fixed and the per-handle part so that one set-access over
// a unit of 15.5 handles plus their maps costs what the H200 paid per handle
// during training (87.6 µs: map 3.39 s for 38 660 handles mapped, ResNet-50
// `lru`, docs/gpu-runs/2026-11-27-h200-diag.json), and one unmap over such a
// unit 33-41 µs per handle (the reclaimer's 2 371 unmaps).
struct CalibratedVmm {
  double per_call_us;
  SizeCurve per_handle;
};

CalibratedVmm calibrated(VmmCall call) {
  switch (call) {
    case VmmCall::create: return {0, {{2, 33, 64}, {70.8, 58.4, 46.0}}};
    case VmmCall::map: return {0, {{2, 33, 64}, {10.1, 7.2, 4.3}}};
    case VmmCall::set_access: return {30.0, {{2, 33, 64}, {78.6, 60.8, 43.0}}};
    case VmmCall::unmap: return {20.0, {{2, 33, 64}, {39.0, 28.5, 18.0}}};
    case VmmCall::release: return {0, {{2, 33, 64}, {34.6, 35.0, 35.4}}};
    case VmmCall::reserve:
    case VmmCall::address_free: return {0.5, {{2, 33, 64}, {0, 0, 0}}};
  }
  return {};
}

// Pinning host memory: the H200 run pinned 4.16 GB for 991 ms of
// cuMemHostAlloc (0.24 s per GiB; public figures 0.35-0.65). Registering
// memory the caller already faulted in costs about half (ik_llama.cpp
// PR #1988: malloc + register twice as fast as cudaMallocHost).
constexpr double kPinNsPerByte = 0.24e9 / kGiB;
constexpr double kRegisterNsPerByte = kPinNsPerByte / 2;
constexpr double kPinPerCallNs = 10'000;

// Issuing work (no driver lock): a launch about 3 µs (facebookincubator/velox
// PR #6096), an event record with timing 2.5 µs and without 0.25 µs
// (cuda_event_benchmark: 400 K timed records a second, ten times that
// untimed), a stream wait 1.5 µs, a copy as a launch (the H200's pager
// issued 9 660 copies back in 77 ms, its own bookkeeping included: at most
// 8 µs each).
double issue_ns(Issue call) {
  switch (call) {
    case Issue::launch: return 3'000;
    case Issue::copy: return 3'000;
    case Issue::event_record: return 2'500;
    case Issue::event_record_untimed: return 250;
    case Issue::stream_wait: return 1'500;
  }
  return 0;
}

// Scrubbing released device memory on a copy engine: the H100 lost 1.1 ms of
// a 2.2 ms upload-and-kernel on another stream while a thread cycled 64 MiB
// create/map/unmap/release about 7 300 times a second (gpu-facts §8.6b):
// about half an engine for 470 GB/s released, so 1 TB/s.
constexpr double kScrubBytesPerNs = 1000.0;

// What the calling thread spent in VMM and pinning calls (vgpusimThreadDriverCalls).
thread_local ThreadDriverCalls t_calls;

// Runs a driver call of `ns` under the driver's lock on the calling thread's
// clock.
void spend_locked(Simulator& sim, double ns, const char* call) {
  const double before = host_now(sim);
  const double start = sim.driver_lock.book(before, ns);
  sim.driver_lock_waited_ns += start - before;
  advance_host(sim, start, HostSpan::driver_lock);
  advance_host(sim, start + ns, HostSpan::driver_call, call);
  t_calls.ns += start + ns - before;
}

}  // namespace

double DriverLock::book(double at, double duration) {
  // The first gap at or after `at` that holds `duration`. The calendar is
  // kept short: a call can only start before the oldest interval kept if it
  // comes from a thread far behind every other, which the simulator's
  // threads are not (a thread starts at the latest time any has reached).
  double start = at;
  auto it = busy_.upper_bound(start);
  if (it != busy_.begin()) {
    auto before = std::prev(it);
    start = std::max(start, before->second);
  }
  while (it != busy_.end() && it->first < start + duration) {
    start = std::max(start, it->second);
    ++it;
  }
  busy_.emplace(start, start + duration);
  if (busy_.size() > kKept) busy_.erase(busy_.begin());
  return start;
}

double vmm_call_ns(const Simulator& sim, VmmCall call, std::uint64_t bytes) {
  if (sim.cost_model == CostModel::idle) return 1000.0 * idle_curve(call).at(static_cast<double>(bytes));
  const CalibratedVmm c = calibrated(call);
  return 1000.0 * (c.per_call_us + c.per_handle.at(static_cast<double>(bytes)));
}

double vmm_handle_ns(const Simulator& sim, VmmCall call, std::uint64_t handle_bytes) {
  if (sim.cost_model == CostModel::idle) return 0;
  return 1000.0 * calibrated(call).per_handle.at(static_cast<double>(handle_bytes));
}

double vmm_range_call_ns(const Simulator& sim, VmmCall call, std::uint64_t range_bytes) {
  if (sim.cost_model == CostModel::idle) return 1000.0 * idle_curve(call).at(static_cast<double>(range_bytes));
  return 1000.0 * calibrated(call).per_call_us;
}

const ThreadDriverCalls& thread_driver_calls() { return t_calls; }

void spend_vmm_time(Simulator& sim, double ns, const char* call) {
  ++t_calls.vmm;
  if (sim.cost_model == CostModel::idle) {
    t_calls.ns += ns;
    advance_host(sim, host_now(sim) + ns, HostSpan::driver_call, call);
    return;
  }
  spend_locked(sim, ns, call);
}

// Under the idle model, mapping while the device works can be set to cost
// more (VGPUSIM_MAP_BUSY_US); the calibrated model charges the busy cost always.
void spend_map_time(Simulator& sim, int device, std::uint64_t bytes) {
  double cost = vmm_call_ns(sim, VmmCall::map, bytes);
  if (sim.cost_model == CostModel::idle) {
    const double now = host_now(sim);
    const Device& state = sim.devices[static_cast<std::size_t>(device)];
    const bool busy = std::any_of(std::begin(state.engine_free_ns), std::end(state.engine_free_ns),
                                  [now](double free_at) { return free_at > now; });
    if (busy) cost = std::max(cost, sim.map_busy_ns);
  }
  spend_vmm_time(sim, cost, "cuMemMap");
}

void spend_pin_time(Simulator& sim, std::uint64_t bytes, bool registering) {
  ++t_calls.pin;
  if (sim.cost_model == CostModel::idle) return;
  const double per_byte = registering ? kRegisterNsPerByte : kPinNsPerByte;
  spend_locked(sim, kPinPerCallNs + per_byte * static_cast<double>(bytes),
               registering ? "cuMemHostRegister" : "cuMemHostAlloc");
}

void spend_issue_time(Simulator& sim, Issue call) {
  if (sim.cost_model == CostModel::idle) return;
  advance_host(sim, host_now(sim) + issue_ns(call), HostSpan::issue);
}

void scrub_released(Simulator& sim, int device, std::uint64_t bytes) {
  if (sim.cost_model == CostModel::idle || device < 0) return;
  Device& state = sim.devices[static_cast<std::size_t>(device)];
  const auto engine = static_cast<std::size_t>(Engine::copy_h2d);
  const double duration = static_cast<double>(bytes) / kScrubBytesPerNs;
  state.engine_free_ns[engine] = std::max(state.engine_free_ns[engine], host_now(sim)) + duration;
  state.engine_busy_ns[engine] += duration;
  sim.scrubbed_bytes += bytes;
}

}  // namespace vgpusim
