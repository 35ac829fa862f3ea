// A 2 MiB piece of one of the pager's physical allocations (ChunkPool's
// blocks), the unit in which paged memory is mapped, moved and charged.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace vgpumem::vmm {

inline constexpr std::uint64_t kChunkBytes = std::uint64_t{2} << 20;  // the H100's VMM granularity

// Two chunks map as one mapping when the second follows the first in the
// same block (follows()).
struct Chunk {
  CUmemGenericAllocationHandle handle = 0;  // the block's physical allocation
  std::uint64_t offset = 0;                 // into it: a multiple of kChunkBytes
  std::uint32_t block = 0;                  // the block's slot in its pool

  friend bool operator==(const Chunk&, const Chunk&) = default;
  bool follows(const Chunk& before) const { return handle == before.handle && offset == before.offset + kChunkBytes; }
};

// One mapping a range holds: how many chunks, and the block they are of
// (its slot in the pool), so that the pool knows which blocks some range
// still maps (ChunkPool::note_mapped): a block released while mapped keeps
// its memory until the last unmap, past the cap.
struct Mapping {
  std::uint32_t chunks = 0;
  std::uint32_t block = 0;
};

}  // namespace vgpumem::vmm
