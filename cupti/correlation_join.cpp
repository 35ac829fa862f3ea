#include "cupti/correlation_join.h"

namespace vgpumem::cupti {

void CorrelationJoin::add_external(std::uint32_t correlation_id, std::uint64_t external_id) {
  if (waiting_.size() >= kMaxWaiting) {
    forgotten_ += waiting_.size();
    waiting_.clear();
  }
  waiting_[correlation_id] = external_id;
}

void CorrelationJoin::add_kernel(std::uint32_t correlation_id, std::uint64_t start_ns, std::uint64_t end_ns) {
  auto it = waiting_.find(correlation_id);
  if (it == waiting_.end()) {
    ++unattributed_;
    return;
  }
  if (ready_.size() < kMaxReady) {
    ready_.push_back({it->second, start_ns, end_ns});
  } else {
    ++overflowed_;
  }
  waiting_.erase(it);
}

}  // namespace vgpumem::cupti
