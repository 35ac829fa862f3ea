// Which paged unit an address belongs to, answered without a lock.
//
// The pager carves every paged allocation out of one reserved address range
// (the arena); the program's own reservations (cuMemAddressReserve, where it
// maps the handles it made with cuMemCreate) are covered too, since the pager
// pages those handles. Each covered range has one slot per 2 MiB granule,
// holding the unit that owns the granule or nullptr. A lookup is a
// subtraction, a shift and one atomic load for the arena, and the same for
// each of the program's reservations (a handful: PyTorch makes one per
// stream and pool), so the launch hook can test every argument word of every
// launch. Slots are written only on the allocation, map and free paths.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

// Note [The arena and the granule index]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One `cuMemAddressReserve` of 1 TiB
// at the first paged allocation; every paged allocation is a range of it
// that never moves, so pointers the program holds stay valid whatever is
// resident. The granule index has one atomic slot per 2 MiB of the arena
// (and of each reservation of the program's, Note [The program's own virtual memory]), pointing at the unit
// that owns it: "is this word a paged pointer, and whose?" is a
// subtraction, a shift and one load, without a lock.

namespace vgpumem::vmm {

struct Unit;

class GranuleIndex {
 public:
  static constexpr unsigned kGranuleShift = 21;  // 2 MiB, the VMM granularity on the H100
  static constexpr std::uint64_t kGranule = std::uint64_t{1} << kGranuleShift;
  // The program's reservations the index covers at once, and the largest it
  // covers (8 MiB of slots). Beyond either, handles mapped there are not
  // paged. A freed reservation's entry is reused by a later one (PyTorch
  // frees and reserves again on every empty_cache()).
  static constexpr std::size_t kMaxExtraRanges = 64;
  static constexpr std::uint64_t kMaxExtraBytes = std::uint64_t{2} << 40;

  GranuleIndex() = default;
  // Covers the arena [base, base + bytes); bytes a multiple of kGranule. Once only.
  void cover(std::uint64_t base, std::uint64_t bytes);
  // Covers one more range, granule-aligned outward (a reservation of the
  // program's). False when it is too large or the entries are used up.
  // Writers hold the pager's lock.
  bool cover_more(std::uint64_t base, std::uint64_t bytes);
  // Stops covering the range cover_more() began at `base`: its lookups miss
  // from now on, and its entry is free for the next reservation.
  void uncover(std::uint64_t base);
  // Whether `address` lies in a range covered by cover_more().
  bool in_extra_range(std::uint64_t address) const { return extra_slot(address) != nullptr; }

  // Where the index looks, read once for a scan over many words: the
  // arena, and the window around the program's reservations. A scan that
  // runs while a reservation is covered may miss it, as if it had run just
  // before (nothing is mapped in a new reservation yet).
  struct Window {
    std::uint64_t arena_base, arena_bytes, low, high;
  };
  Window window() const {
    return Window{base_, bytes_.load(std::memory_order_acquire), extra_low_.load(std::memory_order_acquire),
                  extra_high_.load(std::memory_order_acquire)};
  }
  Unit* lookup(const Window& window, std::uint64_t address) const {
    const std::uint64_t offset = address - window.arena_base;  // wraps for addresses below it
    if (offset < window.arena_bytes) return slots_[offset >> kGranuleShift].load(std::memory_order_acquire);
    // The window turns most words that are not pointers away in two comparisons.
    if (address < window.low || address >= window.high) return nullptr;
    const std::atomic<Unit*>* slot = extra_slot(address);
    return slot == nullptr ? nullptr : slot->load(std::memory_order_acquire);
  }
  Unit* lookup(std::uint64_t address) const { return lookup(window(), address); }
  // Points every granule of [address, address + bytes) at `unit` (or
  // nullptr). The range lies in the arena or in one covered reservation.
  void assign(std::uint64_t address, std::uint64_t bytes, Unit* unit);

  std::uint64_t base() const { return base_; }
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_acquire); }

 private:
  // One of the program's reservations, or a free entry (bytes 0). An entry
  // is rewritten when a new reservation reuses it, under a sequence count:
  // odd while it is being rewritten, and a lookup that sees it change
  // between reading the count and reading the fields reads again. A slot
  // array is never freed while the index lives (a lookup may still be
  // reading the old one); a reuse keeps it when it is large enough.
  struct Extra {
    std::atomic<std::uint32_t> sequence{0};
    std::atomic<std::uint64_t> base{0};
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::atomic<Unit*>*> slots{nullptr};
    std::uint64_t capacity = 0;  // slots in `slots`; the writer's (under the pager's lock)
  };
  const std::atomic<Unit*>* extra_slot(std::uint64_t address) const;
  std::atomic<Unit*>* slot_for(std::uint64_t address);
  void widen_window(std::uint64_t start, std::uint64_t end);

  std::uint64_t base_ = 0;
  std::atomic<std::uint64_t> bytes_{0};  // published last: a lookup that sees it sees the rest
  std::unique_ptr<std::atomic<Unit*>[]> slots_;
  std::array<Extra, kMaxExtraRanges> extras_;
  std::atomic<std::size_t> extra_count_{0};  // entries ever used (live or free), in order
  // [extra_low_, extra_high_) holds every reservation ever covered, and is
  // empty until the first. The low end only falls and the high end only
  // rises, written before the reservation is published: whatever mix of old
  // and new ends a lookup reads still holds every range it may look for.
  std::atomic<std::uint64_t> extra_low_{UINT64_MAX}, extra_high_{0};
  std::vector<std::unique_ptr<std::atomic<Unit*>[]>> extra_slots_;  // owns every Extra::slots
};

}  // namespace vgpumem::vmm
