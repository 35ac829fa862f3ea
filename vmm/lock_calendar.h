// The pager's lock on a simulated driver's clocks.
//
// On a GPU the pager's lock is held across driver calls that take tens of
// microseconds (the mover's maps, the reclaimer's unmaps), and a launch
// thread that needs it waits: on the H200, ResNet-50's launch thread waited
// 57 ms a step for it while the reclaimer held it 76 ms (docs/results.md).
// On the simulated driver each thread has a clock of its own, which its
// driver calls advance, and a lock held for simulated milliseconds is held
// for real microseconds: no thread waited. The calendar gives the lock the
// holds it had in simulated time, [taken, let go) on the holder's clock, and
// a thread that takes the lock at a simulated time inside one of them moves
// its clock to that hold's end, as it would have waited.
//
// As the simulator's driver lock does, it takes the order the threads
// really took the lock in and charges only the overlap: a thread whose clock
// is before every recorded hold goes first for free. The last kHolds holds
// are kept (a ring); the calendar is touched only by the lock's holder.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/thread_safety.h"

namespace vgpumem::vmm {

class LockCalendar final : public LockObserver {
 public:
  static constexpr std::size_t kHolds = 64;

  // `now`: the calling thread's simulated clock; `handoff(t)`: moves it
  // forward to t (DriverOps::host_time_ns, host_handoff).
  LockCalendar(unsigned long long (*now)(), void (*handoff)(unsigned long long, const char*))
      : now_(now), handoff_(handoff) {}

  void acquired() override;
  void releasing() override;

  // Simulated time threads spent waiting for holds, summed.
  std::uint64_t waited_ns() const { return waited_ns_.load(std::memory_order_relaxed); }

 private:
  struct Hold {
    std::uint64_t from = 0, to = 0;
  };
  unsigned long long (*const now_)();
  void (*const handoff_)(unsigned long long, const char*);
  std::array<Hold, kHolds> holds_{};
  std::size_t next_ = 0;
  std::uint64_t taken_at_ = 0;
  std::atomic<std::uint64_t> waited_ns_{0};
};

}  // namespace vgpumem::vmm
