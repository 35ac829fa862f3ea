#include "vmm/host_store.h"

#include <algorithm>

namespace vgpumem::vmm {

void* HostStore::take(std::uint64_t bytes, CUresult* error) {
  *error = CUDA_SUCCESS;
  if (auto it = free_.find(bytes); it != free_.end()) {
    void* buffer = it->second;
    free_.erase(it);
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
  return buffer;
}

bool HostStore::release_one_free() {
  if (free_.empty()) return false;
  auto largest = std::prev(free_.end());
  driver_.host_free(largest->second);
  pinned_ -= largest->first;
  free_.erase(largest);
  return true;
}

}  // namespace vgpumem::vmm
