#include "cupti/activity_buffers.h"

namespace vgpumem::cupti {

ActivityBuffers::ActivityBuffers(std::size_t count, std::size_t bytes) : bytes_(bytes) {
  storage_.reserve(count);
  free_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    // operator new[] aligns to 16 bytes; CUPTI asks for 8.
    storage_.push_back(std::make_unique<std::uint8_t[]>(bytes));
    free_.push_back(storage_.back().get());
  }
}

std::uint8_t* ActivityBuffers::take() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return nullptr;
  std::uint8_t* buffer = free_.back();
  free_.pop_back();
  return buffer;
}

void ActivityBuffers::give_back(std::uint8_t* buffer) {
  if (buffer == nullptr) return;
  std::lock_guard lock(mutex_);
  free_.push_back(buffer);
}

}  // namespace vgpumem::cupti
