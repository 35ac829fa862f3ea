#include "vmm/allocation_registry.h"

namespace vgpumem::vmm {

std::size_t AllocationRegistry::KeyHash::operator()(const Key& key) const noexcept {
  // Allocation addresses are aligned: mix the bits so shards spread evenly.
  std::uint64_t x = key.value ^ (static_cast<std::uint64_t>(key.kind) << 59);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<std::size_t>(x);
}

AllocationRegistry::Shard& AllocationRegistry::shard_for(const Key& key) {
  return shards_[KeyHash{}(key) % kShards];
}
const AllocationRegistry::Shard& AllocationRegistry::shard_for(const Key& key) const {
  return shards_[KeyHash{}(key) % kShards];
}

void AllocationRegistry::insert(AllocationKind kind, std::uint64_t key, const Allocation& allocation) {
  const Key k{kind, key};
  Shard& shard = shard_for(k);
  std::lock_guard lock(shard.mutex);
  shard.entries.insert_or_assign(k, allocation);
}

std::optional<Allocation> AllocationRegistry::remove(AllocationKind kind, std::uint64_t key) {
  const Key k{kind, key};
  Shard& shard = shard_for(k);
  std::lock_guard lock(shard.mutex);
  auto it = shard.entries.find(k);
  if (it == shard.entries.end()) return std::nullopt;
  Allocation allocation = it->second;
  shard.entries.erase(it);
  return allocation;
}

bool AllocationRegistry::retain(AllocationKind kind, std::uint64_t key) {
  const Key k{kind, key};
  Shard& shard = shard_for(k);
  std::lock_guard lock(shard.mutex);
  auto it = shard.entries.find(k);
  if (it == shard.entries.end()) return false;
  ++it->second.references;
  return true;
}

std::optional<Allocation> AllocationRegistry::release(AllocationKind kind, std::uint64_t key) {
  const Key k{kind, key};
  Shard& shard = shard_for(k);
  std::lock_guard lock(shard.mutex);
  auto it = shard.entries.find(k);
  if (it == shard.entries.end()) return std::nullopt;
  if (--it->second.references > 0) return std::nullopt;
  Allocation allocation = it->second;
  shard.entries.erase(it);
  return allocation;
}

std::optional<Allocation> AllocationRegistry::find(AllocationKind kind, std::uint64_t key) const {
  const Key k{kind, key};
  const Shard& shard = shard_for(k);
  std::lock_guard lock(shard.mutex);
  auto it = shard.entries.find(k);
  if (it == shard.entries.end()) return std::nullopt;
  return it->second;
}

std::size_t AllocationRegistry::size() const {
  std::size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    total += shard.entries.size();
  }
  return total;
}

}  // namespace vgpumem::vmm
