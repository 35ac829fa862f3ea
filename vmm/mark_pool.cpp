#include "vmm/mark_pool.h"

namespace vgpumem::vmm {

MarkPool::Spare& MarkPool::spare_of(CUcontext context) {
  for (Spare& spare : spare_) {
    if (spare.context == context) return spare;
  }
  return spare_.emplace_back(Spare{context, {}});
}

CUevent MarkPool::take(CUcontext context) {
  {
    std::lock_guard lock(mutex_);
    Spare& spare = spare_of(context);
    if (!spare.events.empty()) {
      const CUevent event = spare.events.back();
      spare.events.pop_back();
      return event;
    }
  }
  // None spare (the first timed iteration in this context, or one longer
  // than any before): made on the caller's thread, in its context, once.
  CUevent event = nullptr;
  if (driver_.event_create == nullptr || driver_.event_create(&event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  std::lock_guard lock(mutex_);
  owner_.emplace(event, context);
  spare_of(context).events.reserve(owner_.size());  // so that give() never allocates
  return event;
}

bool MarkPool::give(CUevent event) {
  std::lock_guard lock(mutex_);
  const auto it = owner_.find(event);
  if (it == owner_.end()) return false;
  if (it->second == nullptr) {
    owner_.erase(it);  // its context is gone, and the event with it
    return true;
  }
  spare_of(it->second).events.push_back(event);
  return true;
}

void MarkPool::forget(CUcontext context) {
  std::lock_guard lock(mutex_);
  for (Spare& spare : spare_) {
    if (spare.context != context) continue;
    for (const CUevent event : spare.events) {
      if (driver_.event_destroy != nullptr) driver_.event_destroy(event);
      owner_.erase(event);
    }
    spare.events.clear();
  }
  for (auto& [event, owner] : owner_) {
    if (owner == context) owner = nullptr;
  }
}

std::size_t MarkPool::made() const {
  std::lock_guard lock(mutex_);
  return owner_.size();
}

}  // namespace vgpumem::vmm
