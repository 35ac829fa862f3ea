#include "vmm/copy_marks.h"

#include <algorithm>

namespace vgpumem::vmm {

std::uint64_t CopyMarks::mark_as(const DriverOps& driver, CUstream stream, std::uint64_t serial) {
  issued_ = serial;
  CUevent event = nullptr;
  if (!idle_.empty()) {
    event = idle_.back();
    idle_.pop_back();
  } else if (driver.event_create(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    return serial;
  }
  if (driver.event_record(event, stream) != CUDA_SUCCESS) {
    driver.event_destroy(event);
    return serial;
  }
  pending_.push_back({serial, event});
  return serial;
}

void CopyMarks::poll(const DriverOps& driver) {
  while (!pending_.empty() && driver.event_query(pending_.front().event) == CUDA_SUCCESS) {
    done_ = std::max(done_, pending_.front().serial);
    idle_.push_back(pending_.front().event);
    pending_.pop_front();
  }
}

CUevent CopyMarks::event_for(std::uint64_t serial) const {
  if (serial <= done_) return nullptr;
  const auto it = std::lower_bound(pending_.begin(), pending_.end(), serial,
                                   [](const Mark& mark, std::uint64_t s) { return mark.serial < s; });
  return it != pending_.end() && it->serial == serial ? it->event : nullptr;
}

void CopyMarks::retire(const DriverOps& driver) {
  for (const Mark& mark : pending_) driver.event_destroy(mark.event);
  for (const CUevent event : idle_) driver.event_destroy(event);
  pending_.clear();
  idle_.clear();
  done_ = issued_;
}

}  // namespace vgpumem::vmm
