// A caching allocator for the layered trainer's per-step tensors
// (--allocator caching), following PyTorch's CUDACachingAllocator where it
// decides which address a tensor gets:
//   * every request is rounded up to 512 bytes;
//   * requests up to 1 MiB come from the small pool, whose segments are
//     2 MiB; larger ones from the large pool, whose segments are 20 MiB for
//     requests under 10 MiB and the request rounded up to 2 MiB otherwise;
//   * a request takes the smallest free block of its pool that fits (the
//     lowest address among equals: PyTorch orders its free blocks by size,
//     then address), split when what remains is worth keeping (small pool:
//     at least 512 bytes; large pool: more than 1 MiB);
//   * a freed block coalesces with free neighbours of its segment;
//   * a segment is taken from the driver when no free block fits and is
//     never given back.
// Freeing is bookkeeping only: the block may be handed out again at once,
// because everything runs on one stream (as PyTorch relies on stream order).
// The sizes above are PyTorch's; CachingRules::scaled divides them as the
// trainer divides every byte size.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace layered {

struct CachingRules {
  std::uint64_t rounding = 512;                    // every request is a multiple of this
  std::uint64_t small_request = 1ull << 20;        // up to this: the small pool
  std::uint64_t small_segment = 2ull << 20;
  std::uint64_t large_segment = 20ull << 20;       // for large requests under min_large_request
  std::uint64_t min_large_request = 10ull << 20;   // from here on a segment of the request's own size
  std::uint64_t large_rounding = 2ull << 20;       // ... rounded up to this
  std::uint64_t small_split_remainder = 512;       // split a small block when at least this remains
  std::uint64_t large_split_remainder = 1ull << 20;  // a large one when more than this remains

  // PyTorch's sizes with `scale_down` applied: thresholds as it gives them,
  // segment sizes and the large rounding at least 512 bytes and a multiple
  // of 512.
  static CachingRules scaled(const std::function<std::uint64_t(std::uint64_t)>& scale_down);
};

class CachingAllocator {
 public:
  // Where segments come from: cuMemAlloc in a run, a counter in a dry run.
  using SegmentSource = std::function<CUdeviceptr(std::uint64_t bytes)>;

  CachingAllocator(CachingRules rules, SegmentSource source);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Thread-safe: tensors are taken and given back by whichever thread
  // issues the launch that creates or last reads them.
  CUdeviceptr allocate(std::uint64_t bytes);
  void free(CUdeviceptr address);

  std::uint64_t reserved_bytes() const;        // segments taken from the driver (never given back)
  std::uint64_t peak_allocated_bytes() const;  // the most handed out at once (blocks, rounded)
  std::vector<CUdeviceptr> segments() const;   // in the order they were taken

 private:
  struct Block {
    CUdeviceptr address = 0;
    std::uint64_t size = 0;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->address < b->address;
    }
  };
  using Pool = std::set<Block*, BySizeThenAddress>;

  Pool& pool(bool small) { return small ? small_free_ : large_free_; }
  std::uint64_t segment_size(std::uint64_t request, bool small) const;
  Block* take_free_block(std::uint64_t size, bool small);
  Block* new_segment(std::uint64_t size, bool small);
  void split(Block* block, std::uint64_t size);
  Block* merge_into_prev(Block* block);

  const CachingRules rules_;
  const SegmentSource source_;
  mutable std::mutex mutex_;
  std::unordered_map<CUdeviceptr, std::unique_ptr<Block>> blocks_;  // every block, by its address
  Pool small_free_, large_free_;
  std::vector<CUdeviceptr> segments_;
  std::uint64_t reserved_ = 0, allocated_ = 0, peak_allocated_ = 0;
};

}  // namespace layered
