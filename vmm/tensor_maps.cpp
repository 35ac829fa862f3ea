#include "vmm/tensor_maps.h"

#include <algorithm>

namespace vgpumem::vmm {
namespace {

// Bytes per element as a global tensor lays them out. The packed types
// count values: 16 U4 in 8 bytes (ALIGN8B); 16 U4 or 16 U6 in 16 bytes with
// the gaps (ALIGN16B): one byte a value. A type newer than this code gets
// the widest element (an extent too wide only makes more memory resident).
std::uint64_t element_bits(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: return 8;
  }
  return 128;
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) { return a > kMaxTensorMapBytes - b ? kMaxTensorMapBytes : a + b; }
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  return b != 0 && a > kMaxTensorMapBytes / b ? kMaxTensorMapBytes : a * b;
}

}  // namespace

std::uint64_t tensor_map_extent(CUtensorMapDataType type, std::uint32_t rank, const std::uint64_t* dims,
                                const std::uint64_t* strides, CUtensorMapInterleave interleave) {
  if (rank == 0 || dims == nullptr) return 1;  // never accepted by the driver; at least the unit at the address
  std::uint64_t extent = (saturating_mul(std::min(dims[0], kMaxTensorMapBytes), element_bits(type)) + 7) / 8;
  // An interleaved row is a whole 16- or 32-byte group (NC/8HWC8, NC/16HWC16).
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) extent = (std::max<std::uint64_t>(extent, 32) + 31) & ~31ull;
  for (std::uint32_t i = 1; i < rank && strides != nullptr; ++i) {
    if (dims[i] == 0) continue;
    extent = saturating_add(extent, saturating_mul(std::min(dims[i] - 1, kMaxTensorMapBytes), strides[i - 1]));
  }
  return std::clamp<std::uint64_t>(extent, 1, kMaxTensorMapBytes);
}

TensorMaps::~TensorMaps() {
  delete table_.load(std::memory_order_acquire);
  for (Table* table : retired_) delete table;
}

const TensorMaps::Entry* TensorMaps::lookup(const Table& table, const std::uint64_t* words,
                                            std::uint64_t hash) const {
  for (std::size_t slot = hash & table.mask;; slot = (slot + 1) & table.mask) {
    const Entry& entry = table.entries[slot];
    const std::uint64_t stored = entry.hash.load(std::memory_order_acquire);
    if (stored == 0) return nullptr;  // the table is never full: a probe ends at an empty slot
    if (stored != hash) continue;
    bool same = true;
    for (std::size_t i = 0; i < kMapWords && same; ++i) same = entry.words[i].load(std::memory_order_relaxed) == words[i];
    if (same) return &entry;
  }
}

void TensorMaps::insert(Table& table, const std::uint64_t* words, std::uint64_t hash, TensorMapRange range) {
  std::size_t slot = hash & table.mask;
  while (table.entries[slot].hash.load(std::memory_order_relaxed) != 0) slot = (slot + 1) & table.mask;
  Entry& entry = table.entries[slot];
  for (std::size_t i = 0; i < kMapWords; ++i) entry.words[i].store(words[i], std::memory_order_relaxed);
  entry.address.store(range.address, std::memory_order_relaxed);
  entry.bytes.store(range.bytes, std::memory_order_relaxed);
  const std::uint64_t bit = (hash >> 20) & table.filter_mask;
  table.filter[bit >> 6].fetch_or(1ull << (bit & 63), std::memory_order_relaxed);
  entry.hash.store(hash, std::memory_order_release);
}

void TensorMaps::remember(const void* map, TensorMapRange range) {
  std::uint64_t words[kMapWords];
  std::memcpy(words, map, kMapBytes);
  const std::uint64_t hash = hash_of(words);
  range.bytes = std::clamp<std::uint64_t>(range.bytes, 1, kMaxTensorMapBytes);
  std::lock_guard lock(mutex_);
  Table* table = table_.load(std::memory_order_relaxed);
  if (table != nullptr) {
    if (const Entry* known = lookup(*table, words, hash)) {
      // The same bytes describe the same memory; keep the wider of two
      // extents (one learnt from a re-addressed map of unknown origin).
      auto& bytes = const_cast<Entry*>(known)->bytes;
      if (bytes.load(std::memory_order_relaxed) < range.bytes) bytes.store(range.bytes, std::memory_order_relaxed);
      return;
    }
  }
  const std::size_t count = count_.load(std::memory_order_relaxed);
  if (table == nullptr || (count + 1) * 2 > table->mask + 1) {
    // Half full at most, so a probe is short and always ends.
    auto* grown = new Table(table == nullptr ? kFirstSlots : 2 * (table->mask + 1));
    for (std::size_t slot = 0; table != nullptr && slot <= table->mask; ++slot) {
      const Entry& old = table->entries[slot];
      const std::uint64_t old_hash = old.hash.load(std::memory_order_relaxed);
      if (old_hash == 0) continue;
      std::uint64_t old_words[kMapWords];
      for (std::size_t i = 0; i < kMapWords; ++i) old_words[i] = old.words[i].load(std::memory_order_relaxed);
      insert(*grown, old_words, old_hash,
             {old.address.load(std::memory_order_relaxed), old.bytes.load(std::memory_order_relaxed)});
    }
    if (table != nullptr) retired_.push_back(table);
    table = grown;
    table_.store(table, std::memory_order_release);
  }
  insert(*table, words, hash, range);
  count_.store(count + 1, std::memory_order_release);
}

bool TensorMaps::find(const void* map, TensorMapRange* range) const {
  if (count_.load(std::memory_order_acquire) == 0) return false;
  std::uint64_t words[kMapWords];
  std::memcpy(words, map, kMapBytes);
  const std::uint64_t hash = hash_of(words);
  const Entry* entry = lookup(*table_.load(std::memory_order_acquire), words, hash);
  if (entry == nullptr) return false;
  *range = {entry->address.load(std::memory_order_relaxed), entry->bytes.load(std::memory_order_relaxed)};
  return true;
}

}  // namespace vgpumem::vmm
