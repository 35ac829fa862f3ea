// Lending: the producer-to-consumer grace (launch_grace.h) narrowed to the
// pairs that can need it.
//
// A table of device pointers built on the device (PyTorch's batched linear
// algebra, `_grouped_mm`'s prepare kernel) is written by one kernel whose
// parameters name the targets and read by a later one whose parameters name
// only the table. The blanket grace keeps everything the last K operations of
// a stream named on the device, which on a chain of layers is every map for
// K operations: at a tight cap that leaves no room for a schedule. Lending
// keeps nothing: an operation that names a 512-byte cell of a small
// allocation that one of the last K operations on its stream also named is
// lent what that operation named — its units are held and made resident for
// it as its own, wherever they went in between. A consumer always names the
// table its producer wrote, so it gets the producer's targets back.
//
// Why small allocations only: the tables are a few KiB (a pointer per
// matrix or group), so they live in small allocations (PyTorch's small pool:
// requests up to 1 MiB in 2 MiB segments; here, whatever the pager packs in
// slabs or makes as one unit no larger than `small_bytes`). Two operations
// sharing a large buffer — a convolution chain's workspace, one layer's
// output read by the next — lend nothing, and there the schedule may send a
// unit out as its last use is enqueued. A table in a larger allocation is
// not covered; VGPUMEM_GRACE=blanket restores the blanket grace
// (docs/configuration.md).
//
// What is kept, per stream bit (StreamRegistry): the last kSlots operations
// that named a small cell, each with its number on the stream (the grace's
// counter), a 64-bit mask of its small cells, up to kCells of them, and up to
// kWords of the words of its parameters that pointed into paged memory. An
// operation that named more cells than kCells keeps its mask only, and any
// consumer whose mask meets it is lent (more than needed, never less); one
// that named more paged words than kWords cannot be lent whole and is left to
// the blanket grace (the pager stamps its units instead: Names::overflowed).
// Words, not units, are kept: a word is looked up again when lent, so a unit
// freed in between is never touched (a word now naming another allocation
// only lends more).
//
// The launch path takes no lock here to read: each slot is a seqlock of
// relaxed atomics (a writer on the same stream on another thread is
// unordered with the reader's operation anyway). Two writers reach one slot
// only when a stream's ring wraps around under one of them (threads
// launching on one stream): a flag per slot makes the later wait. An
// operation that names no small allocation reads and writes nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

// Note [Lending launch tables]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The producer-to-consumer grace as it is by default
// (`VGPUMEM_GRACE=lend`): while a launch's words are looked up, those that
// land in a small allocation (a slab, or a unit of one allocation no larger
// than `VGPUMEM_LEND_MAX_BYTES`) are noted as 512-byte cells, and every paged
// word as a word (`Access`'s `Names`: counts cleared, arrays written up to
// them). A launch that named a small cell takes a slot in its stream's ring
// of eight (its number on the stream from the grace's counter, a 64-bit mask
// of its cells, up to four cells, up to eight words; a seqlock of
// atomics, no lock to read). A later launch naming a small cell checks the
// ring's masks, then cells, for a launch at most K before it; each match's
// words are looked up again (a freed target names nothing) and join the
// launch as its own, held, before the fast path's residency check. What
// cannot fit beside the launch's own under the cap is dropped before
// anything moves (`Access::drop_from`). A launch with more words than a slot
// keeps, or an unreadable one (every unit), stamps its units as the blanket
// grace does. Copies and memsets neither lend nor borrow. See
// docs/configuration.md#vgpumem_grace.

namespace vgpumem::vmm {

class TableLending {
 public:
  static constexpr unsigned kStreams = 64;  // one ring per stream bit, as LaunchGrace
  static constexpr std::size_t kSlots = 8;  // operations naming a small cell kept per stream
  static constexpr std::size_t kCells = 4;
  static constexpr std::size_t kWords = 8;
  static constexpr unsigned kCellShift = 9;  // 512-byte cells

  // What one operation named, gathered as its words are looked up. Only the
  // counts start cleared (begin()): the arrays are read up to them.
  struct Names {
    std::uint64_t mask = 0;             // a bit per small cell named (hashed)
    std::uint32_t cell_count = 0;       // small cells named (may exceed kCells)
    std::uint32_t word_count = 0;       // paged words named (may exceed kWords)
    bool named_everything = false;      // the operation named every unit (unreadable parameters)
    std::uint64_t cells[kCells];        // NOLINT: read up to cell_count
    std::uint64_t words[kWords];        // NOLINT: read up to word_count

    void begin() {
      mask = 0;
      cell_count = 0;
      word_count = 0;
      named_everything = false;
    }
    // A word that pointed into paged memory.
    void add_word(std::uint64_t word) {
      if (word_count < kWords) words[word_count] = word;
      ++word_count;
    }
    // A word that pointed into a small allocation.
    void add_small_cell(std::uint64_t word) {
      const std::uint64_t cell = word >> kCellShift;
      mask |= bit_of(cell);
      if (cell_count < kCells) cells[cell_count] = cell;
      ++cell_count;
    }
    bool names_small() const { return cell_count != 0; }
    // Whether `word` is one of the words kept of this operation's own (a
    // word past kWords is not known: false, and it is lent, as before).
    bool names_word(std::uint64_t word) const {
      const std::uint32_t kept = word_count < kWords ? word_count : static_cast<std::uint32_t>(kWords);
      for (std::uint32_t i = 0; i < kept; ++i) {
        if (words[i] == word) return true;
      }
      return false;
    }
    // Its words cannot all be kept: lending cannot stand for the grace.
    bool overflowed() const { return word_count > kWords || named_everything; }
  };

  // `window`: K, how many operations later a consumer is still lent; 0
  // turns lending off.
  explicit TableLending(std::uint32_t window) : window_(window) {}

  std::uint32_t window() const { return window_; }

  // Calls `on_word(word)` for each word kept by an operation of `stream` at
  // most `window` operations before `sequence` (the consumer's number there)
  // that named a small cell `names` names, unless the consumer names that
  // word itself: its unit is the consumer's own already. A chain of
  // launches over the same small buffers (an optimizer's, a benchmark's)
  // then looks nothing up. Returns how many operations lent a word.
  template <typename OnWord>
  std::size_t lend(unsigned stream, std::uint64_t sequence, const Names& names, OnWord&& on_word) const {
    if (window_ == 0 || !names.names_small()) return 0;
    std::size_t lenders = 0;
    const Ring& ring = rings_[stream % kStreams];
    for (std::size_t at = 0; at < kSlots; ++at) {
      if ((ring.masks[at].load(std::memory_order_relaxed) & names.mask) == 0) continue;
      const Slot& slot = ring.slots[at];
      const std::uint64_t seen = slot.sequence.load(std::memory_order_acquire);
      if (seen == 0 || seen >= sequence || sequence - seen > window_ || !slot.shares_a_cell(names)) continue;
      // A repeat of the same launch: it names every word kept, so nothing
      // to lend, found without copying the words out (were the slot
      // rewritten meanwhile, it would be skipped below as well).
      if (slot.holds_words_of(names)) continue;
      Kept kept;
      if (!slot.read(seen, &kept)) continue;  // rewritten meanwhile: by an operation after this one
      bool lent = false;
      for (std::uint32_t i = 0; i < kept.word_count; ++i) {
        if (names.names_word(kept.words[i])) continue;
        on_word(kept.words[i]);
        lent = true;
      }
      if (lent) ++lenders;
    }
    return lenders;
  }

  // Keeps what operation `sequence` of `stream` named, if it named a small
  // cell and its words fit (the caller stamps the rest: Names::overflowed).
  // An operation that named exactly what the last one kept named (a launch
  // repeated over the same buffers: an optimizer's per-parameter chain, a
  // benchmark) renews that slot's number instead of taking another: the
  // newer number lends the same words to every consumer the older would, so
  // nothing is lost, and the ring keeps more distinct operations, which a
  // consumer then reads one slot for, not one per repeat.
  void keep(unsigned stream, std::uint64_t sequence, const Names& names) {
    if (window_ == 0 || !names.names_small() || names.overflowed()) return;
    Ring& ring = rings_[stream % kStreams];
    const std::size_t last = (ring.next.load(std::memory_order_relaxed) + kSlots - 1) % kSlots;
    if (ring.slots[last].renew_if_same(sequence, names)) return;
    const std::size_t at = ring.next.fetch_add(1, std::memory_order_relaxed) % kSlots;
    ring.slots[at].write(sequence, names, ring.masks[at]);
  }

 private:
  // A slot's words read out whole (Slot::read).
  struct Kept {
    std::uint32_t word_count = 0;
    std::array<std::uint64_t, kWords> words;  // read up to word_count
  };

  // What a reader checks first (sequence, cells) in one cache line, the
  // words after it.
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> sequence{0};  // 0: empty, or being written
    std::atomic<std::uint32_t> cell_count{0}, word_count{0};
    std::array<std::atomic<std::uint64_t>, kCells> cells{};
    std::atomic<bool> writing{false};        // a writer holds the slot
    std::array<std::atomic<std::uint64_t>, kWords> words{};

    // Also sets `mask`, the slot's filter in its ring.
    void write(std::uint64_t number, const Names& names, std::atomic<std::uint64_t>& mask);
    // Gives the slot `number` if it holds an earlier operation that named
    // exactly `names` (the same cells and words, in order); false otherwise.
    bool renew_if_same(std::uint64_t number, const Names& names);
    // Whether one of its cells is one `names` names; past kCells on either
    // side only the masks are known, and they met (the caller checked).
    // Read before the words, so that most slots the mask lets through cost
    // a few loads; a writer racing it is caught by read().
    bool shares_a_cell(const Names& names) const;
    // Whether its words are `names`' own, in the same order.
    bool holds_words_of(const Names& names) const;
    // Its words; false when a writer came between (the slot no longer
    // holds `number`).
    bool read(std::uint64_t number, Kept* out) const;
  };

  // The slots' masks side by side: a launch checks all eight in one line.
  struct alignas(64) Ring {
    std::array<std::atomic<std::uint64_t>, kSlots> masks{};
    std::atomic<std::size_t> next{0};
    std::array<Slot, kSlots> slots{};
  };

  static std::uint64_t bit_of(std::uint64_t cell) {
    return std::uint64_t{1} << ((cell * 0x9E3779B97F4A7C15ull) >> 58);
  }
  const std::uint32_t window_;
  std::array<Ring, kStreams> rings_{};
};

}  // namespace vgpumem::vmm
