#include "vmm/pointer_tables.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <mutex>

#include <nlohmann/json.hpp>

#include "vmm/unit.h"

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kGranuleMask = ~(GranuleIndex::kGranule - 1);

}  // namespace

// The host buffer may be unaligned: words are read at 8-byte offsets from its start.
std::vector<std::uint64_t> PointerTables::paged_granules(const void* host, std::size_t bytes) {
  std::vector<std::uint64_t> granules;
  const auto* in = static_cast<const unsigned char*>(host);
  const std::size_t scanned = std::min(bytes, kScanLimit);
  const GranuleIndex::Window window = index_.window();
  // Granules seen lately, direct-mapped: a table names few buffers many
  // times (runs of one, or several interleaved), and each is kept once
  // without growing the list by a word per pointer.
  constexpr std::size_t kSeen = 256;
  std::uint64_t seen[kSeen];
  std::fill(std::begin(seen), std::end(seen), ~std::uint64_t{0});
  for (std::size_t at = 0; at + sizeof(std::uint64_t) <= scanned; at += sizeof(std::uint64_t)) {
    std::uint64_t word = 0;
    std::memcpy(&word, in + at, sizeof word);
    const std::uint64_t granule = word & kGranuleMask;
    if (index_.lookup(window, word) == nullptr) continue;  // most words of most uploads: data
    std::uint64_t& slot = seen[(granule >> GranuleIndex::kGranuleShift) % kSeen];
    if (slot == granule) continue;
    granules.push_back(granule);
    slot = granule;
  }
  std::sort(granules.begin(), granules.end());
  granules.erase(std::unique(granules.begin(), granules.end()), granules.end());
  uploads_scanned_.fetch_add(1, std::memory_order_relaxed);
  bytes_scanned_.fetch_add(scanned, std::memory_order_relaxed);
  return granules;
}

void PointerTables::uploaded(std::uint64_t destination, const void* host, std::size_t bytes) {
  if (host == nullptr || bytes == 0) return;
  Unit* holder = index_.lookup(destination);
  if (holder == nullptr) return;  // not paged: never offloaded, nothing to follow into it
  std::vector<std::uint64_t> granules = paged_granules(host, bytes);  // outside the lock: the scan is the cost
  std::uint64_t start = destination, end = destination + bytes;
  std::unique_lock lock(mutex_);
  erase_covered(start, end);
  // A table this upload overwrites only in part keeps its other words: the
  // two become one table over both ranges (a superset).
  auto it = tables_.upper_bound(start);
  if (it != tables_.begin() && std::prev(it)->second.end > start) --it;
  while (it != tables_.end() && it->first < end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second.end);
    granules.insert(granules.end(), it->second.granules.begin(), it->second.granules.end());
    drop(it++);
  }
  if (granules.empty()) return;
  std::sort(granules.begin(), granules.end());
  granules.erase(std::unique(granules.begin(), granules.end()), granules.end());
  target_granules_ += granules.size();
  holder->tables.fetch_add(1, std::memory_order_release);
  tables_.emplace(start, Table{end, holder, std::move(granules)});
  tables_peak_ = std::max<std::uint64_t>(tables_peak_, tables_.size());
  target_granules_peak_ = std::max(target_granules_peak_, target_granules_);
}

void PointerTables::overwritten(std::uint64_t address, std::uint64_t bytes) {
  if (bytes == 0) return;
  {
    std::shared_lock lock(mutex_);
    if (tables_.empty()) return;
  }
  std::unique_lock lock(mutex_);
  erase_covered(address, address + bytes);
}

void PointerTables::erase_covered(std::uint64_t address, std::uint64_t end) {
  for (auto it = tables_.lower_bound(address); it != tables_.end() && it->first < end;) {
    if (it->second.end <= end) {
      drop(it++);
    } else {
      ++it;
    }
  }
}

void PointerTables::drop(std::map<std::uint64_t, Table>::iterator it) {
  target_granules_ -= it->second.granules.size();
  it->second.holder->tables.fetch_sub(1, std::memory_order_release);
  tables_.erase(it);
}

void PointerTables::host_pinned(std::uint64_t address, std::uint64_t bytes) {
  if (address == 0 || bytes == 0) return;
  std::unique_lock lock(mutex_);
  host_[address] = address + bytes;
  host_low_.store(std::min(host_low_.load(), address), std::memory_order_release);
  host_high_.store(std::max(host_high_.load(), address + bytes), std::memory_order_release);
}

// The bounds stay: a word in a released buffer only takes follow()'s lock to
// find nothing there.
void PointerTables::host_released(std::uint64_t address) {
  std::unique_lock lock(mutex_);
  host_.erase(address);
}

void PointerTables::follow(const std::uint64_t* words, std::size_t count, std::vector<std::uint64_t>& targets) {
  std::shared_lock lock(mutex_);
  const Table* last = nullptr;
  bool followed = false;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t word = words[i];
    if (auto it = tables_.upper_bound(word); it != tables_.begin()) {
      const Table& table = std::prev(it)->second;
      if (word < table.end && &table != last) {
        targets.insert(targets.end(), table.granules.begin(), table.granules.end());
        last = &table;
        followed = true;
        continue;
      }
    }
    if (may_point_into_host(word)) followed |= scan_host(word, targets);
  }
  if (followed) launches_followed_.fetch_add(1, std::memory_order_relaxed);
}

// A recorded host buffer `word` points into, read for paged words: all of
// it up to kScanLimit, or kScanLimit bytes from `word` on in a larger one.
// Its address is the one kernels use (unified addressing: the host pointer).
bool PointerTables::scan_host(std::uint64_t word, std::vector<std::uint64_t>& targets) {
  auto it = host_.upper_bound(word);
  if (it == host_.begin() || word >= std::prev(it)->second) return false;
  --it;
  const std::uint64_t start = it->second - it->first <= kScanLimit ? it->first : word & ~std::uint64_t{7};
  const std::uint64_t end = std::min(it->second, start + kScanLimit);
  const GranuleIndex::Window window = index_.window();
  std::uint64_t last = 0;
  for (std::uint64_t at = start; at + sizeof(std::uint64_t) <= end; at += sizeof(std::uint64_t)) {
    std::uint64_t value = 0;
    std::memcpy(&value, reinterpret_cast<const void*>(at), sizeof value);
    if ((value & kGranuleMask) == last || index_.lookup(window, value) == nullptr) continue;
    targets.push_back(value);
    last = value & kGranuleMask;
  }
  host_buffers_scanned_.fetch_add(1, std::memory_order_relaxed);
  host_bytes_scanned_.fetch_add(end - start, std::memory_order_relaxed);
  return true;
}

nlohmann::json PointerTables::summary() const {
  std::shared_lock lock(mutex_);
  return {{"tables", tables_.size()},
          {"tables_peak", tables_peak_},
          {"target_granules", target_granules_},
          {"target_granules_peak", target_granules_peak_},
          {"uploads_scanned", uploads_scanned_.load()},
          {"bytes_scanned", bytes_scanned_.load()},
          {"launches_followed", launches_followed_.load()},
          {"host_buffers", host_.size()},
          {"host_buffers_scanned", host_buffers_scanned_.load()},
          {"host_bytes_scanned", host_bytes_scanned_.load()}};
}

}  // namespace vgpumem::vmm
