#include "vmm/address_arena.h"

#include <iterator>

namespace vgpumem::vmm {

void AddressArena::cover(std::uint64_t base, std::uint64_t bytes) {
  free_.clear();
  free_[base] = bytes;
  free_bytes_ = bytes;
}

std::optional<std::uint64_t> AddressArena::take(std::uint64_t bytes) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const std::uint64_t start = it->first, left = it->second - bytes;
    // The remainder is inserted before the range is erased: if the insertion
    // throws (out of memory), the arena is as it was, not short of the rest
    // of the range.
    if (left > 0) free_.emplace_hint(std::next(it), start + bytes, left);
    free_.erase(it);
    free_bytes_ -= bytes;
    return start;
  }
  return std::nullopt;
}

// Nothing is erased before the one insertion that may throw: on an
// exception the arena is as it was (the range stays taken).
void AddressArena::give_back(std::uint64_t address, std::uint64_t bytes) {
  const auto next = free_.lower_bound(address);
  const bool joins_next = next != free_.end() && next->first == address + bytes;
  const auto previous = next != free_.begin() ? std::prev(next) : free_.end();
  const bool joins_previous = previous != free_.end() && previous->first + previous->second == address;
  if (joins_previous) {
    previous->second += bytes + (joins_next ? next->second : 0);
    if (joins_next) free_.erase(next);
  } else {
    free_.emplace_hint(next, address, bytes + (joins_next ? next->second : 0));
    if (joins_next) free_.erase(next);
  }
  free_bytes_ += bytes;
}

}  // namespace vgpumem::vmm
