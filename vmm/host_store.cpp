#include "vmm/host_store.h"

#include <algorithm>

namespace vgpumem::vmm {

void* HostStore::take(std::uint64_t bytes, int device, CUresult* error, std::uint64_t reads_done,
                      std::uint64_t* read) {
  *error = CUDA_SUCCESS;
  if (read != nullptr) *read = 0;
  // The free buffers of the smallest size that serves: its own, else the
  // next up to kLargerServes times it.
  auto first = free_.lower_bound(bytes);
  if (first != free_.end() && first->first > bytes * kLargerServes) first = free_.end();
  const auto last = first == free_.end() ? first : free_.upper_bound(first->first);
  // Free to write at once: idle, or last read on this device by a read
  // known done (or by none: only this device's copy-out stream may still
  // write it, and the caller's copy runs after that). Else the one read on
  // this device whose read comes first.
  auto chosen = last, soonest = last;
  for (auto it = first; it != last; ++it) {
    const Free& entry = it->second;
    if (entry.read_by == kIdle || (entry.read_by == device && entry.read <= reads_done)) {
      chosen = it;
      break;
    }
    if (entry.read_by == device && (soonest == last || entry.read < soonest->second.read)) soonest = it;
  }
  if (chosen == last) chosen = soonest;
  if (chosen == last && first != last) {
    drain(first->second.read_by);  // read by another device's copy stream: done first
    chosen = first;
  }
  if (chosen != last) {
    void* buffer = chosen->second.buffer;
    if (read != nullptr && chosen->second.read_by == device && chosen->second.read > reads_done) {
      *read = chosen->second.read;
    }
    free_.erase(chosen);
    return buffer;
  }
  // Room under the limit, made by unpinning buffers of other sizes if need be.
  while (limit_ && pinned_ + bytes > *limit_) {
    if (!release_one_free()) {
      *error = CUDA_ERROR_OUT_OF_MEMORY;
      return nullptr;
    }
  }
  void* buffer = nullptr;
  CUresult result = CUDA_SUCCESS;
  {
    DriverCallTimer timed(stats_, DriverWork::pin, bytes);
    if ((result = driver_.host_alloc(&buffer, bytes, 0)) != CUDA_SUCCESS) timed.pinned_nothing();
  }
  if (result != CUDA_SUCCESS) {
    *error = result;
    return nullptr;
  }
  pinned_ += bytes;
  peak_ = std::max(peak_, pinned_);
  last_on_demand_ = bytes;
  pinned_size_[buffer] = bytes;
  return buffer;
}

std::optional<std::uint64_t> HostStore::spare_wanted() const {
  const std::uint64_t bytes = last_on_demand_;
  // Room for the spare and one more on demand: pinned outside the lock, the
  // spare must not be what pushes a concurrent take() over the limit.
  if (bytes == 0 || free_.count(bytes) != 0 || (limit_ && pinned_ + 2 * bytes > *limit_)) return std::nullopt;
  return bytes;
}

void HostStore::add_spare(void* buffer, std::uint64_t bytes) {
  if (limit_ && pinned_ + bytes > *limit_) {
    counted_call(stats_, DriverWork::pin, [&] { return driver_.host_free(buffer); });
    return;
  }
  pinned_ += bytes;
  peak_ = std::max(peak_, pinned_);
  pinned_size_[buffer] = bytes;
  ++pinned_ahead_;
  free_.emplace(bytes, Free{buffer, kIdle, 0});
}

// Every buffer that device's copy stream read is idle once it is drained.
void HostStore::drain(int device) {
  if (device == kIdle) return;
  if (drain_) drain_(device);
  for (auto& [bytes, entry] : free_) {
    if (entry.read_by == device) {
      entry.read_by = kIdle;
      entry.read = 0;
    }
  }
}

bool HostStore::release_one_free() {
  if (free_.empty()) return false;
  auto largest = std::prev(free_.end());
  drain(largest->second.read_by);  // never unpinned under a copy
  counted_call(stats_, DriverWork::pin, [&] { return driver_.host_free(largest->second.buffer); });
  pinned_size_.erase(largest->second.buffer);
  pinned_ -= largest->first;
  free_.erase(largest);
  return true;
}

}  // namespace vgpumem::vmm
