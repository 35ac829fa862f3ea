// Joins CUPTI's two halves of a timed launch: our launch id, paired with
// CUPTI's correlation id by the driver's launch callback when the launch was
// issued, and the kernel record (start and end, made when it ran), by that
// correlation id.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

// Note [Naming a launch to CUPTI]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Why not CUPTI's external correlation ids, which this used until 2026-11-27:
// on an H200 (`scripts/gpu/probe_cupti.cu`, docs/gpu-facts.md) an id
// pushed around the launch reached no kernel record unless CUPTI was also
// making API records for every driver or runtime call of the program, and
// even then a launch through the runtime (PyTorch's `cudaLaunchKernel`)
// carries the runtime call's correlation id, not that of the driver call the
// shim forwards: under PyTorch every kernel record came back unattributed and
// the planner waited for timings that never came. The driver callback's
// correlation id matched the kernel record for every launch, through the
// runtime or the driver. The simulated CUPTI now behaves the same
// (`SimulatedCupti.ExternalIdsNeedTheLaunchsApiRecordAsOnTheH200`,
// `ALaunchsDriverCallbackSeesItsKernelRecordsCorrelationId`).
// The trace summary's `cupti` reports the state and the record count
// (docs/trace-format.md).

namespace vgpumem::cupti {

// One completed kernel of a launch the runtime timed.
struct KernelTime {
  std::uint64_t external_id = 0;  // what KernelTimes::begin() was given
  std::uint64_t start_ns = 0;     // CUPTI's clock
  std::uint64_t end_ns = 0;
};

class CorrelationJoin {
 public:
  // Launches issued but not yet seen run are remembered up to this many; a
  // launch that never ran (it failed) must not be remembered forever.
  static constexpr std::size_t kMaxWaiting = 1 << 16;
  // Joined kernels kept until drained (24 bytes each): a runtime that never
  // drains must not grow without end. Beyond this, kernels are counted only.
  static constexpr std::size_t kMaxReady = 1 << 18;

  // A timed launch's id and CUPTI's correlation id for it, from its launch
  // callback: always before its kernel record arrives.
  void add_external(std::uint32_t correlation_id, std::uint64_t external_id);
  // A kernel record: joined into ready() when its launch was timed,
  // counted as unattributed when not (launched before timing began, or by a
  // graph).
  void add_kernel(std::uint32_t correlation_id, std::uint64_t start_ns, std::uint64_t end_ns);

  std::vector<KernelTime>& ready() { return ready_; }
  std::uint64_t unattributed() const { return unattributed_; }
  std::uint64_t forgotten() const { return forgotten_; }
  std::uint64_t overflowed() const { return overflowed_; }

 private:
  std::unordered_map<std::uint32_t, std::uint64_t> waiting_;  // correlation id -> external id
  std::vector<KernelTime> ready_;
  std::uint64_t unattributed_ = 0;
  std::uint64_t forgotten_ = 0;  // launches dropped from waiting_ when it was full
  std::uint64_t overflowed_ = 0;  // joined kernels not kept: ready_ was full
};

}  // namespace vgpumem::cupti
