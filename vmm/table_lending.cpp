#include "vmm/table_lending.h"

#include <algorithm>

namespace vgpumem::vmm {

// A seqlock without fences (GCC's ThreadSanitizer does not take them): the
// number goes to 0 first, each field is stored with release, the number
// last. A reader that loads a field (acquire) a later writer stored then
// sees that writer's 0 or its number when it loads the number again, so
// seeing the same number before and after means it read one operation's
// names whole.
void TableLending::Slot::write(std::uint64_t number, const Names& names, std::atomic<std::uint64_t>& mask) {
  while (writing.exchange(true, std::memory_order_acquire)) {
  }
  sequence.store(0, std::memory_order_relaxed);
  mask.store(names.mask, std::memory_order_release);
  cell_count.store(names.cell_count, std::memory_order_release);
  word_count.store(names.word_count, std::memory_order_release);
  const std::uint32_t cells_kept = std::min<std::uint32_t>(names.cell_count, kCells);
  for (std::uint32_t i = 0; i < cells_kept; ++i) cells[i].store(names.cells[i], std::memory_order_release);
  for (std::uint32_t i = 0; i < names.word_count; ++i) words[i].store(names.words[i], std::memory_order_release);
  sequence.store(number, std::memory_order_release);
  writing.store(false, std::memory_order_release);
}

// Under the writer's flag, so no write comes between the comparison and the
// new number; a reader that loaded the old number sees the new one after
// its words and skips the slot, as it skips any slot rewritten under it.
bool TableLending::Slot::renew_if_same(std::uint64_t number, const Names& names) {
  while (writing.exchange(true, std::memory_order_acquire)) {
  }
  const std::uint64_t held = sequence.load(std::memory_order_relaxed);
  bool same = held != 0 && held < number && names.cell_count <= kCells && cell_count.load(std::memory_order_relaxed) == names.cell_count &&
              word_count.load(std::memory_order_relaxed) == names.word_count;
  const std::uint32_t cells_kept = std::min<std::uint32_t>(names.cell_count, kCells);
  for (std::uint32_t i = 0; i < cells_kept && same; ++i) same = cells[i].load(std::memory_order_relaxed) == names.cells[i];
  for (std::uint32_t i = 0; i < names.word_count && same; ++i) same = words[i].load(std::memory_order_relaxed) == names.words[i];
  if (same) sequence.store(number, std::memory_order_release);
  writing.store(false, std::memory_order_release);
  return same;
}

bool TableLending::Slot::shares_a_cell(const Names& names) const {
  const std::uint32_t count = cell_count.load(std::memory_order_acquire);
  if (count > kCells || names.cell_count > kCells) return true;  // the masks met
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t cell = cells[i].load(std::memory_order_acquire);
    for (std::uint32_t j = 0; j < names.cell_count; ++j) {
      if (cell == names.cells[j]) return true;
    }
  }
  return false;
}

bool TableLending::Slot::holds_words_of(const Names& names) const {
  if (names.word_count > kWords || word_count.load(std::memory_order_acquire) != names.word_count) return false;
  for (std::uint32_t i = 0; i < names.word_count; ++i) {
    if (words[i].load(std::memory_order_acquire) != names.words[i]) return false;
  }
  return true;
}

bool TableLending::Slot::read(std::uint64_t number, Kept* out) const {
  out->word_count = std::min<std::uint32_t>(word_count.load(std::memory_order_acquire), kWords);
  for (std::uint32_t i = 0; i < out->word_count; ++i) out->words[i] = words[i].load(std::memory_order_acquire);
  return sequence.load(std::memory_order_relaxed) == number;
}

}  // namespace vgpumem::vmm
