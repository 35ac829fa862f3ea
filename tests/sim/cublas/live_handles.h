// The handles a library has created and not yet destroyed, so that a call on
// a destroyed (or never created) handle answers CUBLAS_STATUS_NOT_INITIALIZED
// instead of reading freed memory. Lookups share a reader lock: calls on
// different handles, or on one handle from several threads, do not serialise.
#pragma once

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace vgpusim_blas {

template <class Handle>
class LiveHandles {
 public:
  void add(const Handle* handle) {
    std::unique_lock lock(mutex_);
    live_.insert(handle);
  }
  // False when `handle` was not live.
  bool remove(const Handle* handle) {
    std::unique_lock lock(mutex_);
    return live_.erase(handle) == 1;
  }
  bool contains(const Handle* handle) const {
    if (handle == nullptr) return false;
    std::shared_lock lock(mutex_);
    return live_.contains(handle);
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_set<const Handle*> live_;
};

}  // namespace vgpusim_blas
