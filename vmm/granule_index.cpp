#include "vmm/granule_index.h"

#include <algorithm>

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
  if (bytes == 0 || end - start > kMaxExtraBytes) return false;
  const std::uint64_t granules = (end - start) >> kGranuleShift;
  const std::size_t count = extra_count_.load(std::memory_order_relaxed);
  std::size_t entry = count;
  for (std::size_t i = 0; i < count; ++i) {
    if (extras_[i].bytes.load(std::memory_order_relaxed) == 0) {
      entry = i;
      break;
    }
  }
  if (entry == kMaxExtraRanges) return false;
  widen_window(start, end);  // before the entry is published
  Extra& extra = extras_[entry];
  std::atomic<Unit*>* slots = extra.slots.load(std::memory_order_relaxed);
  if (extra.capacity < granules) {
    extra_slots_.push_back(empty_slots(static_cast<std::size_t>(granules)));
    slots = extra_slots_.back().get();
    extra.capacity = granules;
  } else {
    for (std::uint64_t i = 0; i < granules; ++i) slots[i].store(nullptr, std::memory_order_relaxed);
  }
  // A lookup that reads any new field (acquire) also sees the odd count
  // stored before it (release), and reads again.
  extra.sequence.fetch_add(1, std::memory_order_relaxed);  // odd: being rewritten
  extra.base.store(start, std::memory_order_release);
  extra.slots.store(slots, std::memory_order_release);
  extra.bytes.store(end - start, std::memory_order_release);
  extra.sequence.fetch_add(1, std::memory_order_release);  // even again: published
  if (entry == count) extra_count_.store(count + 1, std::memory_order_release);
  return true;
}

void GranuleIndex::widen_window(std::uint64_t start, std::uint64_t end) {
  if (start < extra_low_.load(std::memory_order_relaxed)) extra_low_.store(start, std::memory_order_release);
  if (end > extra_high_.load(std::memory_order_relaxed)) extra_high_.store(end, std::memory_order_release);
}

void GranuleIndex::uncover(std::uint64_t base) {
  const std::uint64_t start = base & ~(kGranule - 1);
  const std::size_t count = extra_count_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < count; ++i) {
    Extra& extra = extras_[i];
    if (extra.base.load(std::memory_order_relaxed) == start && extra.bytes.load(std::memory_order_relaxed) != 0) {
      extra.bytes.store(0, std::memory_order_release);  // lookups miss from now on; no fields change
      return;
    }
  }
}

const std::atomic<Unit*>* GranuleIndex::extra_slot(std::uint64_t address) const {
  const std::size_t count = extra_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < count; ++i) {
    const Extra& extra = extras_[i];
    // A miss needs no consistent read: an entry being rewritten holds a new
    // reservation, where nothing is mapped yet, so no address in it has a
    // unit to miss. A hit is read again under the sequence count.
    const std::uint64_t guess = address - extra.base.load(std::memory_order_relaxed);
    if (guess >= extra.bytes.load(std::memory_order_relaxed)) continue;
    for (;;) {
      // Acquire loads, so the second read of the count comes after them.
      const std::uint32_t before = extra.sequence.load(std::memory_order_acquire);
      const std::uint64_t start = extra.base.load(std::memory_order_acquire);
      const std::uint64_t span = extra.bytes.load(std::memory_order_acquire);
      std::atomic<Unit*>* slots = extra.slots.load(std::memory_order_acquire);
      if ((before & 1) != 0 || extra.sequence.load(std::memory_order_relaxed) != before) continue;  // being rewritten
      const std::uint64_t offset = address - start;
      if (offset < span) return &slots[offset >> kGranuleShift];
      break;
    }
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
