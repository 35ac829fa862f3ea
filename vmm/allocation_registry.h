// What the program holds: every device allocation (and VMM handle, array,
// host allocation) the shim has seen, keyed by its address or handle, with the
// device and bytes it was charged. Allocation and free paths only: a sharded
// map so concurrent allocators rarely contend.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace vgpumem::vmm {

// Keys of different kinds live in different namespaces (a VMM handle value may
// equal some device address).
enum class AllocationKind : std::uint8_t {
  device,        // cuMemAlloc*, pitch, managed, async/pool allocations
  device_v1,     // legacy 32-bit cuMemAlloc/cuMemAllocPitch
  vmm_handle,    // cuMemCreate handles
  array,         // CUarray / CUmipmappedArray
  host,          // pinned host memory (cuMemHostAlloc, cuMemAllocHost, registered)
};

struct Allocation {
  int device = -1;              // -1 for host memory
  std::uint64_t bytes = 0;      // bytes charged
  std::uint32_t references = 1; // VMM handles: create + each retain
  bool counted = true;          // charged against a device cap
};

class AllocationRegistry {
 public:
  void insert(AllocationKind kind, std::uint64_t key, const Allocation& allocation);
  // Removes and returns the entry, if present.
  std::optional<Allocation> remove(AllocationKind kind, std::uint64_t key);
  // For handles: adds a reference; false if unknown.
  bool retain(AllocationKind kind, std::uint64_t key);
  // For handles: drops a reference; returns the entry when the last one went.
  std::optional<Allocation> release(AllocationKind kind, std::uint64_t key);
  std::optional<Allocation> find(AllocationKind kind, std::uint64_t key) const;
  std::size_t size() const;

 private:
  struct Key {
    AllocationKind kind;
    std::uint64_t value;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const noexcept;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<Key, Allocation, KeyHash> entries;
  };
  static constexpr std::size_t kShards = 32;
  Shard& shard_for(const Key& key);
  const Shard& shard_for(const Key& key) const;
  std::array<Shard, kShards> shards_;
};

}  // namespace vgpumem::vmm
