// The kernel observer: how the simulated CUPTI (tests/sim/cupti/) learns of
// launches and of kernels running on the simulated clock, as the real CUPTI
// learns of them from inside the real driver.
#include <atomic>
#include <cmath>

#include "sim.h"

namespace vgpusim {
namespace {

// Set rarely (when a profiler enables kernel activity), read at every launch:
// one atomic pointer, no lock.
std::atomic<const vgpusimKernelObserver*> g_observer{nullptr};

unsigned long long to_clock_ns(double ns) { return static_cast<unsigned long long>(std::llround(ns)); }

}  // namespace

std::uint32_t observe_launch() {
  const vgpusimKernelObserver* observer = g_observer.load(std::memory_order_acquire);
  if (observer == nullptr || observer->launching == nullptr) return 0;
  return observer->launching(observer->user);
}

void observe_run(const Pending& work, int device) {
  const vgpusimKernelObserver* observer = g_observer.load(std::memory_order_acquire);
  if (observer == nullptr || observer->ran == nullptr) return;
  const vgpusimKernelRun run{work.operation.name, to_clock_ns(work.start_ns), to_clock_ns(work.end_ns),
                             work.stream_id,      work.operation.correlation,  device};
  observer->ran(&run, observer->user);
}

}  // namespace vgpusim

SIM_EXPORT void vgpusimSetKernelObserver(const vgpusimKernelObserver* observer) {
  vgpusim::g_observer.store(observer, std::memory_order_release);
}
