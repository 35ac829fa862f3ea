// Address space for paged allocations: first-fit ranges, in granules, inside
// one reservation. Freed ranges merge with their neighbours. Allocation and
// free paths only (the caller holds the pager's lock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace vgpumem::vmm {

class AddressArena {
 public:
  void cover(std::uint64_t base, std::uint64_t bytes);
  // A range of `bytes` (a granule multiple), or nullopt when none is left.
  std::optional<std::uint64_t> take(std::uint64_t bytes);
  void give_back(std::uint64_t address, std::uint64_t bytes);
  std::uint64_t free_bytes() const { return free_bytes_; }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // start -> bytes
  std::uint64_t free_bytes_ = 0;
};

}  // namespace vgpumem::vmm
