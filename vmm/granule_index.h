// Which paged unit an address belongs to, answered without a lock.
//
// The pager carves every paged allocation out of one reserved address range
// (the arena); this index has one slot per 2 MiB granule of it, holding the
// unit that owns the granule or nullptr. A lookup is a subtraction, a shift
// and one atomic load, so the launch hook can test every argument word of
// every launch. Slots are written only on the allocation and free paths.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace vgpumem::vmm {

struct Unit;

class GranuleIndex {
 public:
  static constexpr unsigned kGranuleShift = 21;  // 2 MiB, the VMM granularity on the H100
  static constexpr std::uint64_t kGranule = std::uint64_t{1} << kGranuleShift;

  GranuleIndex() = default;
  // Covers [base, base + bytes); bytes a multiple of kGranule. Once only.
  void cover(std::uint64_t base, std::uint64_t bytes);

  Unit* lookup(std::uint64_t address) const {
    const std::uint64_t span = bytes_.load(std::memory_order_acquire);  // 0 until covered
    const std::uint64_t offset = address - base_;                        // wraps for addresses below base
    if (offset >= span) return nullptr;
    return slots_[offset >> kGranuleShift].load(std::memory_order_acquire);
  }
  // Points every granule of [address, address + bytes) at `unit` (or nullptr).
  void assign(std::uint64_t address, std::uint64_t bytes, Unit* unit);

  std::uint64_t base() const { return base_; }
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_acquire); }

 private:
  std::uint64_t base_ = 0;
  std::atomic<std::uint64_t> bytes_{0};  // published last: a lookup that sees it sees the rest
  std::unique_ptr<std::atomic<Unit*>[]> slots_;
};

}  // namespace vgpumem::vmm
