// Pinned host memory that holds offloaded units, bounded by
// VGPUMEM_HOST_LIMIT. Buffers are kept by size and reused: pinning memory is
// slow, and the same sizes come back every training iteration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class HostStore {
 public:
  HostStore(const DriverOps& driver, std::optional<std::uint64_t> limit) : driver_(driver), limit_(limit) {}

  // A pinned buffer of `bytes`, or nullptr when the limit or the driver
  // refuses (`error` says which).
  void* take(std::uint64_t bytes, CUresult* error);
  void give_back(void* buffer, std::uint64_t bytes) { free_.emplace(bytes, buffer); }

  std::uint64_t pinned_bytes() const { return pinned_; }
  std::uint64_t pinned_peak() const { return peak_; }

 private:
  bool release_one_free();

  const DriverOps& driver_;
  std::optional<std::uint64_t> limit_;
  std::multimap<std::uint64_t, void*> free_;  // bytes -> buffer
  std::uint64_t pinned_ = 0, peak_ = 0;
};

}  // namespace vgpumem::vmm
