// The TMA tensor maps the program encoded, and what memory each describes.
//
// On Hopper a kernel may reach an operand only through a 128-byte opaque
// CUtensorMap passed by value (a __grid_constant__ parameter, or a member of
// a parameter struct), whose layout is undocumented: the word scan cannot
// rely on finding the address in it. So the encode hooks remember each map's
// bytes with the range it describes, and a launch looks its parameters up
// here, at 64-byte-aligned offsets (a map's alignment), to add those ranges
// to what it makes resident.
//
// Readers (launches) take no lock and allocate nothing: an open-addressing
// table of immutable entries, published by one release store each; writers
// (encodes) take a mutex. A full table is copied into one twice its size and
// the old one kept until the registry goes, so a reader still on it stays
// valid. Entries are never dropped: forgetting a map still in use would
// launch a kernel over memory that is not there.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include <cuda.h>

// Note [TMA tensor maps]
// ~~~~~~~~~~~~~~~~~~~~~~
// TMA tensor maps (`vmm/tensor_maps.{h,cpp}`, hooks in
// `interpose/hooks_tensor_map.cpp`): on Hopper, CUTLASS, cuBLASLt, cuDNN and
// Triton's host-side descriptors hand a kernel an operand's address only
// inside an opaque 128-byte `CUtensorMap` passed by value, whose layout is
// undocumented, so the word scan cannot be relied on to see it. With paging
// on, the hooks of `cuTensorMapEncodeTiled`, `cuTensorMapEncodeIm2col`,
// `cuTensorMapEncodeIm2colWide` and `cuTensorMapReplaceAddress` (reached by
// symbol, `dlsym` and `cuGetProcAddress` like every hook) forward the call
// and, when the driver accepted it, remember the map's 128 bytes with the
// range it describes: from the global address, `dims[0]` elements (a whole
// 16- or 32-byte group when interleaved) plus `(dims[i] − 1) × strides[i−1]`
// for each further dimension, capped at 1 TiB. A re-addressed map keeps its
// extent; one the shim never saw encoded gets one byte, which still brings
// the whole unit at the address. The launch path then looks every parameter
// of 128 bytes or more up at each 64-byte-aligned offset (a map's alignment;
// the packed `extra` buffer from its start, and, for a kernel whose layout
// the cache could not hold, every word), and each map found adds its range
// to what the launch makes resident and holds (`Pager::prepare_range`, the
// same hold as the words'). The registry is read with no lock and no
// allocation: an open-addressing table of immutable entries, each published
// by a release store, behind a filter of eight bits a slot; the hash is taken
// from the XOR of each 64-byte half, so each half of a parameter is folded
// once. Encodes take a mutex; a half-full table is copied into one twice its
// size and the old one kept (a launch may still be reading it). A launch
// when no map was ever encoded pays one load. Entries are never dropped —
// forgetting a map still in use would launch over memory that is not there —
// so the registry grows with the distinct maps a program encodes (152 bytes
// each, table at most half full); see docs/benchmarks.md for the
// cost of the match. The trace summary counts the maps remembered and found
// in launches (`paging.tensor_maps`). Not covered: a map the program copies
// into device memory and a kernel reads from there (CUTLASS's grouped GEMMs
// rewrite such maps on the device: issue 13's device-built tables), and bytes
// of a map changed by hand rather than through the driver. Still to check on
// an H100: whether the real driver's map holds the address as a plain word
// (the word scan would then see it too) and whether cuBLASLt and cuDNN call
// `cuTensorMapEncode*` through the paths the shim hooks.

namespace vgpumem::vmm {

// The memory one tensor map describes.
struct TensorMapRange {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

// The bytes a map over this global tensor may touch, from the encode call's
// own arguments (element size, dims, byte strides of dims 1..rank-1),
// rounded up for interleaved layouts and capped at kMaxTensorMapBytes.
// Runs after the real driver accepted them.
std::uint64_t tensor_map_extent(CUtensorMapDataType type, std::uint32_t rank, const std::uint64_t* dims,
                                const std::uint64_t* strides, CUtensorMapInterleave interleave);
inline constexpr std::uint64_t kMaxTensorMapBytes = 1ull << 40;  // the driver's own limit on a stride

class TensorMaps {
 public:
  static constexpr std::size_t kMapBytes = sizeof(CUtensorMap);  // 128
  static constexpr std::size_t kMapWords = kMapBytes / sizeof(std::uint64_t);
  static constexpr std::size_t kMapAlignment = 64;  // where a map can sit in a parameter

  TensorMaps() = default;
  ~TensorMaps();
  TensorMaps(const TensorMaps&) = delete;
  TensorMaps& operator=(const TensorMaps&) = delete;

  // A map the driver just encoded (or re-addressed): its 128 bytes at `map`
  // describe `range`. The same bytes remembered again keep the wider range.
  void remember(const void* map, TensorMapRange range);
  // The range of the map whose bytes are at `map`, if one was remembered.
  bool find(const void* map, TensorMapRange* range) const;
  // Maps remembered so far (a launch with none to look for pays one load).
  std::size_t size() const { return count_.load(std::memory_order_acquire); }
  // Maps found in launches' parameters so far (for the trace summary).
  std::uint64_t found() const { return found_.load(std::memory_order_relaxed); }

  // Calls found(range) for every remembered map among `size` parameter
  // bytes at 64-byte-aligned offsets from `bytes` (a parameter, or the
  // packed `extra` buffer, whose start is 64-byte aligned).
  template <typename Found>
  void find_in_parameter(const void* bytes, std::size_t size, Found&& found) const {
    find_at_stride(bytes, size, kMapAlignment, found);
  }
  // The same over candidate words whose parameter boundaries are unknown: a
  // map is tried at every word.
  template <typename Found>
  void find_in_words(const std::uint64_t* words, std::size_t count, Found&& found) const {
    find_at_stride(words, count * sizeof(std::uint64_t), sizeof(std::uint64_t), found);
  }
  // Every remembered map among a launch's parameters: each parameter of
  // `sizes` (the kernel's layout) that `params` gives, or the packed `extra`
  // buffer; with `params` but no layout (a kernel the layout cache could not
  // hold), every word of the launch's candidate `words`.
  template <typename Found>
  void find_in_launch(const std::vector<std::uint32_t>* sizes, void** params, void** extra,
                      const std::uint64_t* words, std::size_t count, Found&& found) const {
    if (count_.load(std::memory_order_relaxed) == 0) return;
    if (params != nullptr && sizes == nullptr) return find_in_words(words, count, found);
    if (params != nullptr) {
      for (std::size_t i = 0; i < sizes->size(); ++i) {
        if ((*sizes)[i] >= kMapBytes && params[i] != nullptr) find_in_parameter(params[i], (*sizes)[i], found);
      }
      return;
    }
    // {CU_LAUNCH_PARAM_BUFFER_POINTER, p, CU_LAUNCH_PARAM_BUFFER_SIZE, &n, CU_LAUNCH_PARAM_END}
    const void* buffer = nullptr;
    std::size_t size = 0;
    for (std::size_t i = 0; extra != nullptr && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) std::memcpy(&size, extra[i + 1], sizeof size);
    }
    if (buffer != nullptr) find_in_parameter(buffer, size, found);
  }

 private:
  struct Entry {
    std::atomic<std::uint64_t> hash{0};  // 0: empty; stored last, with release
    std::atomic<std::uint64_t> words[kMapWords] = {};
    std::atomic<std::uint64_t> address{0}, bytes{0};
  };
  struct Table {
    explicit Table(std::size_t slots)
        : mask(slots - 1), entries(new Entry[slots]), filter_mask(slots * 8 - 1),
          filter(new std::atomic<std::uint64_t>[slots / 8]()) {}
    ~Table() {
      delete[] entries;
      delete[] filter;
    }
    std::size_t mask;
    Entry* entries;
    // A first test for a launch's candidates: one bit per hash, eight bits
    // a slot (at least 16 per map: one candidate that is no map in 16 gets
    // past it), so most parameter bytes cost a load and a test.
    std::uint64_t filter_mask;
    std::atomic<std::uint64_t>* filter;
  };
  static constexpr std::size_t kFirstSlots = 1024;

  // The hash of a map's 128 bytes from the XOR of each 64-byte half: a
  // parameter's halves are each folded once however many windows share
  // them, and the mixing is two multiplies, not a chain over 16 words.
  static std::uint64_t fold(const unsigned char* half) {
    std::uint64_t w[8];
    std::memcpy(w, half, sizeof w);
    return (w[0] ^ w[1]) ^ (w[2] ^ w[3]) ^ ((w[4] ^ w[5]) ^ (w[6] ^ w[7]));
  }
  static std::uint64_t hash_of_folds(std::uint64_t low, std::uint64_t high) {
    std::uint64_t hash = low ^ ((high << 17) | (high >> 47));
    hash = (hash ^ (hash >> 33)) * 0xFF51AFD7ED558CCDull;
    hash = (hash ^ (hash >> 33)) * 0xC4CEB9FE1A85EC53ull;
    return (hash ^ (hash >> 33)) | 1;  // never 0, the empty mark
  }
  static std::uint64_t hash_of(const std::uint64_t* words) {
    return hash_of_folds(fold(reinterpret_cast<const unsigned char*>(words)),
                         fold(reinterpret_cast<const unsigned char*>(words + kMapWords / 2)));
  }
  static bool filtered_out(const Table& table, std::uint64_t hash) {
    const std::uint64_t bit = (hash >> 20) & table.filter_mask;
    return (table.filter[bit >> 6].load(std::memory_order_relaxed) & (1ull << (bit & 63))) == 0;
  }
  const Entry* lookup(const Table& table, const std::uint64_t* words, std::uint64_t hash) const;
  static void insert(Table& table, const std::uint64_t* words, std::uint64_t hash, TensorMapRange range);

  template <typename Found>
  void find_at_stride(const void* bytes, std::size_t size, std::size_t stride, Found& found) const {
    if (size < kMapBytes || count_.load(std::memory_order_acquire) == 0) return;
    const Table* table = table_.load(std::memory_order_acquire);
    const auto* at = static_cast<const unsigned char*>(bytes);
    constexpr std::size_t kHalf = kMapBytes / 2;
    std::uint64_t low = fold(at);
    for (std::size_t offset = 0; offset + kMapBytes <= size; offset += stride) {
      if (stride != kHalf) low = fold(at + offset);  // windows that share no half
      const std::uint64_t high = fold(at + offset + kHalf);
      const std::uint64_t hash = hash_of_folds(low, high);
      low = high;
      if (filtered_out(*table, hash)) continue;
      std::uint64_t words[kMapWords];
      std::memcpy(words, at + offset, kMapBytes);
      if (const Entry* entry = lookup(*table, words, hash)) {
        found_.fetch_add(1, std::memory_order_relaxed);  // only on a hit: a launch that holds a map
        found(TensorMapRange{entry->address.load(std::memory_order_relaxed),
                             entry->bytes.load(std::memory_order_relaxed)});
      }
    }
  }

  std::mutex mutex_;  // writers only
  std::atomic<Table*> table_{nullptr};
  std::atomic<std::size_t> count_{0};
  // Its own cache line: launches that hold maps write it, every launch reads
  // count_ and table_.
  alignas(64) mutable std::atomic<std::uint64_t> found_{0};
  std::vector<Table*> retired_;  // tables readers may still be on
};

}  // namespace vgpumem::vmm
