#include "vmm/host_store.h"

#include <algorithm>

namespace vgpumem::vmm {

void* HostStore::take(std::uint64_t bytes, int device, CUresult* error, bool* still_read) {
  *error = CUDA_SUCCESS;
  if (still_read != nullptr) *still_read = false;
  const auto [first, last] = free_.equal_range(bytes);
  auto chosen = last;
  for (auto it = first; it != last; ++it) {
    if (it->second.read_by == kIdle || it->second.read_by == device) {
      chosen = it;
      break;
    }
  }
  if (chosen == last && first != last) {
    drain(first->second.read_by);  // read by another device's copy stream: done first
    chosen = first;
  }
  if (chosen != last) {
    void* buffer = chosen->second.buffer;
    if (still_read != nullptr) *still_read = chosen->second.read_by == device;
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
  if (const CUresult r = driver_.host_alloc(&buffer, bytes, 0); r != CUDA_SUCCESS) {
    *error = r;
    return nullptr;
  }
  pinned_ += bytes;
  peak_ = std::max(peak_, pinned_);
  last_on_demand_ = bytes;
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
    driver_.host_free(buffer);
    return;
  }
  pinned_ += bytes;
  peak_ = std::max(peak_, pinned_);
  ++pinned_ahead_;
  free_.emplace(bytes, Free{buffer, kIdle});
}

// Every buffer that device's copy stream read is idle once it is drained.
void HostStore::drain(int device) {
  if (device == kIdle) return;
  if (drain_) drain_(device);
  for (auto& [bytes, entry] : free_) {
    if (entry.read_by == device) entry.read_by = kIdle;
  }
}

bool HostStore::release_one_free() {
  if (free_.empty()) return false;
  auto largest = std::prev(free_.end());
  drain(largest->second.read_by);  // never unpinned under a copy
  driver_.host_free(largest->second.buffer);
  pinned_ -= largest->first;
  free_.erase(largest);
  return true;
}

}  // namespace vgpumem::vmm
