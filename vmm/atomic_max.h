// Raises an atomic to `value` if it holds less: a peak, or the latest of
// several threads' times. Relaxed: a reader needs a recent view, not an
// order with anything else.
#pragma once

#include <atomic>
#include <cstdint>

namespace vgpumem::vmm {

inline void raise_to(std::atomic<std::uint64_t>& most, std::uint64_t value) {
  std::uint64_t seen = most.load(std::memory_order_relaxed);
  while (seen < value && !most.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace vgpumem::vmm
