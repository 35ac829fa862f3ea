#include "vmm/link_meter.h"

#include <algorithm>
#include <array>

#include "vmm/context_scope.h"

namespace vgpumem::vmm {

LinkMeter::~LinkMeter() {
  for (const Sample& sample : pending_) {
    ContextScope in(driver_, sample.context);
    driver_.event_destroy(sample.before);
    driver_.event_destroy(sample.after);
  }
}

bool LinkMeter::begin(int direction, CUevent* before, CUevent* after) {
  const std::uint64_t n = copies_[direction]++;
  if ((n >= kFirst && n % kEvery != 0) || pending_.size() >= kPending || driver_.event_elapsed == nullptr) return false;
  if (driver_.event_create(before, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
  if (driver_.event_create(after, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    driver_.event_destroy(*before);
    return false;
  }
  return true;
}

void LinkMeter::end(int direction, CUcontext context, CUevent before, CUevent after, std::uint64_t bytes,
                    bool recorded) {
  if (!recorded) {
    driver_.event_destroy(before);
    driver_.event_destroy(after);
    return;
  }
  pending_.push_back({direction, context, before, after, bytes});
}

void LinkMeter::poll() {
  // One direction's copies in one context run in turn on one stream, in
  // the order they were sampled: past the first still running there, the
  // later ones are not asked.
  std::array<CUcontext, kPending> running_context{};
  std::array<int, kPending> running_direction{};
  std::size_t running = 0;
  const auto done = [&](const Sample& sample) {
    for (std::size_t i = 0; i < running; ++i) {
      if (running_context[i] == sample.context && running_direction[i] == sample.direction) return false;
    }
    ContextScope in(driver_, sample.context);
    if (driver_.event_query(sample.after) != CUDA_SUCCESS) {
      if (running < kPending) {
        running_context[running] = sample.context;
        running_direction[running++] = sample.direction;
      }
      return false;
    }
    float ms = 0;
    if (driver_.event_elapsed(&ms, sample.before, sample.after) == CUDA_SUCCESS && ms > 0) {
      bytes_[sample.direction] += static_cast<double>(sample.bytes);
      ns_[sample.direction] += static_cast<double>(ms) * 1e6;
      rate_[sample.direction].store(bytes_[sample.direction] / ns_[sample.direction], std::memory_order_relaxed);
    }
    driver_.event_destroy(sample.before);
    driver_.event_destroy(sample.after);
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

}  // namespace vgpumem::vmm
