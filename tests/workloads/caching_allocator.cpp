#include "caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace layered {
namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// A segment size (or the large rounding) after scaling: never under one
// rounding unit, always a whole number of them.
std::uint64_t scaled_segment(const std::function<std::uint64_t(std::uint64_t)>& scale_down, std::uint64_t bytes,
                             std::uint64_t rounding) {
  return std::max(rounding, round_up(scale_down(bytes), rounding));
}

}  // namespace

CachingRules CachingRules::scaled(const std::function<std::uint64_t(std::uint64_t)>& scale_down) {
  const CachingRules pytorch;
  CachingRules r = pytorch;
  r.small_request = scale_down(pytorch.small_request);
  r.small_segment = scaled_segment(scale_down, pytorch.small_segment, r.rounding);
  r.large_segment = scaled_segment(scale_down, pytorch.large_segment, r.rounding);
  r.min_large_request = scale_down(pytorch.min_large_request);
  r.large_rounding = scaled_segment(scale_down, pytorch.large_rounding, r.rounding);
  r.large_split_remainder = scale_down(pytorch.large_split_remainder);
  return r;
}

CachingAllocator::CachingAllocator(CachingRules rules, SegmentSource source)
    : rules_(rules), source_(std::move(source)) {}

CachingAllocator::~CachingAllocator() = default;

CUdeviceptr CachingAllocator::allocate(std::uint64_t bytes) {
  const std::uint64_t size = round_up(std::max<std::uint64_t>(bytes, 1), rules_.rounding);
  const bool small = size <= rules_.small_request;
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = take_free_block(size, small);
  if (block == nullptr) block = new_segment(size, small);
  split(block, size);
  block->allocated = true;
  allocated_ += block->size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return block->address;
}

void CachingAllocator::free(CUdeviceptr address) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = blocks_.find(address);
  if (found == blocks_.end() || !found->second->allocated) {
    // A trainer bug (a double free, or a tensor it never allocated): stop
    // before the bookkeeping goes wrong silently.
    std::fprintf(stderr, "caching allocator: free of 0x%llx, which is not allocated\n",
                 static_cast<unsigned long long>(address));
    std::abort();
  }
  Block* block = found->second.get();
  block->allocated = false;
  allocated_ -= block->size;
  if (block->prev != nullptr && !block->prev->allocated) block = merge_into_prev(block);
  if (block->next != nullptr && !block->next->allocated) block = merge_into_prev(block->next);
  pool(block->small).insert(block);
}

std::uint64_t CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

std::uint64_t CachingAllocator::peak_allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_allocated_;
}

std::vector<CUdeviceptr> CachingAllocator::segments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return segments_;
}

std::uint64_t CachingAllocator::segment_size(std::uint64_t request, bool small) const {
  if (small) return rules_.small_segment;
  const std::uint64_t size =
      request < rules_.min_large_request ? rules_.large_segment : round_up(request, rules_.large_rounding);
  // Scaled rules can leave a 512-byte-rounded request just above the
  // segment meant for it; a segment always holds its request.
  return std::max(size, request);
}

// Best fit: the smallest free block of the pool that holds `size`, the
// lowest address among equals; out of the pool.
CachingAllocator::Block* CachingAllocator::take_free_block(std::uint64_t size, bool small) {
  Pool& free_blocks = pool(small);
  Block key;
  key.size = size;
  const auto found = free_blocks.lower_bound(&key);
  if (found == free_blocks.end()) return nullptr;
  Block* block = *found;
  free_blocks.erase(found);
  return block;
}

CachingAllocator::Block* CachingAllocator::new_segment(std::uint64_t size, bool small) {
  const std::uint64_t bytes = segment_size(size, small);
  auto block = std::make_unique<Block>();
  block->address = source_(bytes);
  block->size = bytes;
  block->small = small;
  reserved_ += bytes;
  segments_.push_back(block->address);
  Block* raw = block.get();
  blocks_[raw->address] = std::move(block);
  return raw;
}

// Cuts `block` to `size` when the rest is worth a block of its own; the rest
// goes back to the pool, free.
void CachingAllocator::split(Block* block, std::uint64_t size) {
  const std::uint64_t remaining = block->size - size;
  const bool worth_it =
      block->small ? remaining >= rules_.small_split_remainder : remaining > rules_.large_split_remainder;
  if (!worth_it) return;
  auto rest = std::make_unique<Block>();
  rest->address = block->address + size;
  rest->size = remaining;
  rest->small = block->small;
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest.get();
  block->next = rest.get();
  block->size = size;
  pool(rest->small).insert(rest.get());
  blocks_[rest->address] = std::move(rest);
}

// `block` joins its free predecessor, which leaves the pool while it grows
// (the pool is ordered by size); the predecessor is returned.
CachingAllocator::Block* CachingAllocator::merge_into_prev(Block* block) {
  Block* prev = block->prev;
  pool(prev->small).erase(prev);
  pool(block->small).erase(block);  // (when block is itself a free neighbour)
  prev->size += block->size;
  prev->next = block->next;
  if (block->next != nullptr) block->next->prev = prev;
  blocks_.erase(block->address);
  return prev;
}

}  // namespace layered
