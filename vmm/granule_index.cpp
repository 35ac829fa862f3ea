#include "vmm/granule_index.h"

namespace vgpumem::vmm {

void GranuleIndex::cover(std::uint64_t base, std::uint64_t bytes) {
  const std::size_t count = static_cast<std::size_t>(bytes >> kGranuleShift);
  slots_ = std::make_unique<std::atomic<Unit*>[]>(count);
  for (std::size_t i = 0; i < count; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  base_ = base;
  bytes_.store(bytes, std::memory_order_release);
}

void GranuleIndex::assign(std::uint64_t address, std::uint64_t bytes, Unit* unit) {
  for (std::uint64_t at = address; at < address + bytes; at += kGranule) {
    slots_[(at - base_) >> kGranuleShift].store(unit, std::memory_order_release);
  }
}

}  // namespace vgpumem::vmm
