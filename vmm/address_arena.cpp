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
    free_.erase(it);
    if (left > 0) free_[start + bytes] = left;
    free_bytes_ -= bytes;
    return start;
  }
  return std::nullopt;
}

void AddressArena::give_back(std::uint64_t address, std::uint64_t bytes) {
  free_bytes_ += bytes;
  std::uint64_t start = address, length = bytes;
  auto next = free_.lower_bound(address);
  if (next != free_.end() && next->first == address + bytes) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == address) {
      previous->second += length;
      return;
    }
  }
  free_[start] = length;
}

}  // namespace vgpumem::vmm
