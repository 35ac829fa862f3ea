// Kernel durations measured off the program's streams (Note [Where
// durations come from] in scheduler/step_times.h): the scheduler's interface to a kernel clock
// (CUPTI's activity records, shim/cupti_kernel_clock.h), as
// vmm/pager_control.h is its interface to the pager. The launch path pushes
// a launch id around each kernel of a timed step (vmm::Access::set_launch_id);
// the clock later hands out (launch id, start, end) for it.
//
// The clock delivers a kernel only once it has completed and its record has
// been flushed, so the planner asks for a step's spans with patience
// (KernelSpans::await), never forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>

// Note [The kernel clock]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The scheduler's interface to a kernel clock (`scheduler/kernel_clock.h`,
// implemented over `cupti::KernelTimes` by `shim/cupti_kernel_clock.h`):
// whether it is active, and the (launch id, start, end) of kernels completed
// since the last call (CUPTI flushed first). `KernelSpans` is the planner's
// side: it keeps spans from one read to the next and waits for a step's with
// patience, never forever.

namespace vgpumem::scheduler {

struct KernelSpan {
  std::uint64_t launch_id = 0;
  std::uint64_t start_ns = 0, end_ns = 0;  // the clock's timeline
};

class KernelClock {
 public:
  virtual ~KernelClock() = default;
  // Whether kernels launched now get a span: false when the clock is absent,
  // taken by a profiler, or has stepped aside for one (then timed steps are
  // timed with marks again).
  virtual bool active() const noexcept = 0;
  // Where the spans come from, for the trace ("cupti").
  virtual std::string_view name() const noexcept = 0;
  // Hands out every span completed since the last call: asks the clock to
  // deliver what it holds first (CUPTI's flush). Never waits for a kernel.
  virtual void collect(const std::function<void(const KernelSpan&)>& take) = 0;
};

// The planner's side of a clock: spans by launch id, kept from one read to
// the next (a flush for one step may deliver the start of the next timed
// one). Not thread-safe: the planning thread's.
class KernelSpans {
 public:
  // How long to wait for a missing span after the last one arrived: a
  // kernel still queued behind the step gets its record when it completes,
  // but one CUPTI dropped (its buffers all out) never does.
  static constexpr std::chrono::milliseconds kPatience{2000};

  explicit KernelSpans(KernelClock& clock) : clock_(clock) {}

  KernelClock& clock() const { return clock_; }
  // Collects until every id in `ids` (zeros skipped) has its span, the clock
  // is no longer active (what it flushed on stepping aside is all there
  // will be), or `patience` passes with nothing new. Polls each millisecond.
  // Returns how many are still missing.
  std::size_t await(std::span<const std::uint64_t> ids, std::chrono::milliseconds patience = kPatience);
  // The span of `id`, if collected; handed out once.
  std::optional<KernelSpan> take(std::uint64_t id);
  // A read is done: spans kept through two reads that no read took belong
  // to steps never read (dropped, or held back) and are forgotten.
  void end_read();
  std::size_t kept() const { return kept_.size(); }

 private:
  std::size_t missing(std::span<const std::uint64_t> ids) const;
  bool collect();  // true if anything new came

  KernelClock& clock_;
  struct Kept {
    KernelSpan span;
    std::uint64_t read = 0;  // the read during which it came
  };
  std::unordered_map<std::uint64_t, Kept> kept_;
  std::uint64_t reads_ = 0;
};

}  // namespace vgpumem::scheduler
