#include "vmm/lock_calendar.h"

namespace vgpumem::vmm {

void LockCalendar::acquired() {
  const std::uint64_t arrived = now_();
  std::uint64_t at = arrived;
  // Holds may follow one another: move past each that covers the time
  // reached, until none does.
  for (bool moved = true; moved;) {
    moved = false;
    for (const Hold& hold : holds_) {
      if (hold.from <= at && at < hold.to) {
        at = hold.to;
        moved = true;
      }
    }
  }
  if (at != arrived) {
    handoff_(at, "pager lock");
    waited_ns_.fetch_add(at - arrived, std::memory_order_relaxed);
  }
  taken_at_ = at;
}

void LockCalendar::releasing() {
  const std::uint64_t now = now_();
  if (now <= taken_at_) return;  // held for no simulated time: nobody waits for it
  holds_[next_] = {taken_at_, now};
  next_ = (next_ + 1) % kHolds;
}

}  // namespace vgpumem::vmm
