// The scheduler's kernel clock (scheduler/kernel_clock.h) over
// cupti::KernelTimes: the runtime composes the two, so neither scheduler/
// nor cupti/ knows the other. The runtime makes KernelTimes after the
// scheduler (CUPTI is loaded outside the pager's once), hence the pointer is
// read at each use.
#pragma once

#include <atomic>

#include "cupti/kernel_times.h"
#include "scheduler/kernel_clock.h"

namespace vgpumem {

class CuptiKernelClock final : public scheduler::KernelClock {
 public:
  explicit CuptiKernelClock(const std::atomic<cupti::KernelTimes*>& times) : times_(times) {}

  bool active() const noexcept override {
    const cupti::KernelTimes* times = times_.load(std::memory_order_acquire);
    return times != nullptr && times->state() == cupti::TimerState::active;
  }
  std::string_view name() const noexcept override { return "cupti"; }
  void collect(const std::function<void(const scheduler::KernelSpan&)>& take) override {
    cupti::KernelTimes* times = times_.load(std::memory_order_acquire);
    if (times == nullptr) return;
    times->flush();  // CUPTI hands over a buffer only when it is full or flushed
    times->drain([&](const cupti::KernelTime& kernel) { take({kernel.external_id, kernel.start_ns, kernel.end_ns}); });
  }

 private:
  const std::atomic<cupti::KernelTimes*>& times_;
};

}  // namespace vgpumem
