#include "scheduler/kernel_clock.h"

#include <thread>

namespace vgpumem::scheduler {

std::size_t KernelSpans::missing(std::span<const std::uint64_t> ids) const {
  std::size_t count = 0;
  for (const std::uint64_t id : ids) count += id != 0 && !kept_.contains(id);
  return count;
}

bool KernelSpans::collect() {
  bool any = false;
  clock_.collect([&](const KernelSpan& span) {
    kept_[span.launch_id] = {span, reads_};
    any = true;
  });
  return any;
}

std::size_t KernelSpans::await(std::span<const std::uint64_t> ids, std::chrono::milliseconds patience) {
  collect();
  auto last_news = std::chrono::steady_clock::now();
  std::size_t left = missing(ids);
  while (left > 0) {
    // Inactive: stepped aside (its last flush is in) or never started.
    if (!clock_.active()) {
      collect();
      return missing(ids);
    }
    if (std::chrono::steady_clock::now() - last_news > patience) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (collect()) last_news = std::chrono::steady_clock::now();
    left = missing(ids);
  }
  return 0;
}

std::optional<KernelSpan> KernelSpans::take(std::uint64_t id) {
  const auto at = kept_.find(id);
  if (at == kept_.end()) return std::nullopt;
  const KernelSpan span = at->second.span;
  kept_.erase(at);
  return span;
}

void KernelSpans::end_read() {
  // Collected during the read before this one, and not taken by this one.
  std::erase_if(kept_, [this](const auto& entry) { return entry.second.read < reads_; });
  ++reads_;
}

}  // namespace vgpumem::scheduler
