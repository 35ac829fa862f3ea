#include "vmm/granule_index.h"

namespace vgpumem::vmm {
namespace {

std::unique_ptr<std::atomic<Unit*>[]> empty_slots(std::size_t count) {
  auto slots = std::make_unique<std::atomic<Unit*>[]>(count);
  for (std::size_t i = 0; i < count; ++i) slots[i].store(nullptr, std::memory_order_relaxed);
  return slots;
}

}  // namespace

void GranuleIndex::cover(std::uint64_t base, std::uint64_t bytes) {
  slots_ = empty_slots(static_cast<std::size_t>(bytes >> kGranuleShift));
  base_ = base;
  bytes_.store(bytes, std::memory_order_release);
}

bool GranuleIndex::cover_more(std::uint64_t base, std::uint64_t bytes) {
  const std::uint64_t start = base & ~(kGranule - 1);
  const std::uint64_t end = (base + bytes + kGranule - 1) & ~(kGranule - 1);
  const std::size_t count = extra_count_.load(std::memory_order_relaxed);
  if (bytes == 0 || end - start > kMaxExtraBytes || count == kMaxExtraRanges) return false;
  extra_slots_.push_back(empty_slots(static_cast<std::size_t>((end - start) >> kGranuleShift)));
  Extra& extra = extras_[count];
  extra.base = start;
  extra.slots = extra_slots_.back().get();
  extra.bytes.store(end - start, std::memory_order_release);
  extra_count_.store(count + 1, std::memory_order_release);
  return true;
}

void GranuleIndex::uncover(std::uint64_t base) {
  const std::uint64_t start = base & ~(kGranule - 1);
  const std::size_t count = extra_count_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < count; ++i) {
    if (extras_[i].base == start && extras_[i].bytes.load(std::memory_order_relaxed) != 0) {
      extras_[i].bytes.store(0, std::memory_order_release);
      return;
    }
  }
}

const std::atomic<Unit*>* GranuleIndex::extra_slot(std::uint64_t address) const {
  const std::size_t count = extra_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Extra& extra = extras_[i];
    const std::uint64_t span = extra.bytes.load(std::memory_order_acquire);
    const std::uint64_t offset = address - extra.base;
    if (offset < span) return &extra.slots[offset >> kGranuleShift];
  }
  return nullptr;
}

std::atomic<Unit*>* GranuleIndex::slot_for(std::uint64_t address) {
  const std::uint64_t offset = address - base_;
  if (offset < bytes_.load(std::memory_order_relaxed)) return &slots_[offset >> kGranuleShift];
  return const_cast<std::atomic<Unit*>*>(extra_slot(address));
}

void GranuleIndex::assign(std::uint64_t address, std::uint64_t bytes, Unit* unit) {
  for (std::uint64_t at = address; at < address + bytes; at += kGranule) {
    if (std::atomic<Unit*>* slot = slot_for(at)) slot->store(unit, std::memory_order_release);
  }
}

}  // namespace vgpumem::vmm
