// Physical device memory for paged allocations, in 2 MiB chunks (the H100's
// VMM granularity) carved out of larger physical allocations, blocks of up
// to 64 MiB, one pool per device. Every block that exists is charged to the
// device's cap whole, so the cap bounds physical bytes, whatever is mapped
// where. Blocks are created once and reused: creating one costs 12-34 µs and
// can disturb other streams (docs/gpu-facts.md §8.6), so they are released
// only when the program's own, unpaged allocations need the room, and only
// once every chunk of theirs is free.
//
// Why blocks: every cuMemMap maps one range of one physical allocation, and
// the VMM calls cost per call, not per byte (§8.6). A unit given chunks that
// follow one another in one block maps them in one call and grants access to
// one mapping; given 2 MiB allocations, a 32 MiB unit took 16 maps, and on an
// H200 under training 77-109 µs per chunk (docs/results.md). So take() hands
// out runs of consecutive chunks: the shortest free run that holds the whole
// request, else the longest, again and again.
//
// Guarded by the pager's lock, the reclaimer's blocks made ahead included.
//
// A chunk given back by an eviction may still be read by the copy that saves
// its contents: it carries that save's serial (the pager numbers a device's
// saves in the order its copy-out stream runs them), and whoever reuses it
// orders its first write after that save (see Pager). take() prefers chunks
// whose saves are done, then any free chunk, then a new block.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vmm/cap_ledger.h"
#include "vmm/chunk.h"
#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

// A new block's chunks when a request or the spares need fewer: 32 MiB, the
// size of a large feature map in a CNN step, and 1/2500 of an H100.
inline constexpr std::size_t kBlockChunks = 16;
inline constexpr std::size_t kMaxBlockChunks = 32;  // 64 MiB: the largest block

class ChunkPool {
 public:
  // `block_chunks`: the largest block; 0 for automatic (largest_block()).
  ChunkPool(int device, const DriverOps& driver, CapLedger& ledger, std::size_t block_chunks = 0)
      : device_(device), driver_(driver), ledger_(ledger), block_chunks_(block_chunks) {}
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // Appends `count` chunks to `out` (and each one's save serial to `saves`:
  // the save its first write must wait for, if later than `saves_done`,
  // else 0), in runs that map as one, from free chunks whose saves are done
  // first, then from those whose saves end first; new blocks are made first
  // where too few are free and the cap allows (of kBlockChunks at least
  // when `whole_blocks`, else just what is missing). All or nothing:
  // CUDA_ERROR_OUT_OF_MEMORY, appending none, when the cap refused a new
  // block (or the driver did: logged) before `count` were free.
  CUresult take(std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                std::vector<std::uint64_t>* saves, bool whole_blocks = true);
  // A new block of up to `chunks` (fewer where the cap has less room), all
  // free. 0 when the cap refuses even one chunk (`cap_full`) or the driver
  // does (`error` is the driver's). Logs only a refused size it goes on from.
  std::size_t grow(std::size_t chunks, CUresult* error, bool* cap_full);
  // `save`: the serial of a save that may still read it (0: none).
  void give_back(const Chunk& chunk, std::uint64_t save = 0);
  // Takes exactly `chunks` back out of the free ones if every one of them is
  // still there as given back by the save numbered [first_save, last_save]
  // (its pieces': no one has reused it since, for a chunk taken and given
  // back again carries a later save, or none); false, changing nothing, if not.
  bool take_back(const std::vector<Chunk>& chunks, std::uint64_t first_save, std::uint64_t last_save);
  // Releases blocks whose chunks are all free until at least `bytes` are
  // refunded to the cap or none is left; returns what was refunded (a block
  // goes whole, so it may be more).
  std::uint64_t release_free(std::uint64_t bytes);

  std::uint64_t created_bytes() const { return created_ * kChunkBytes; }
  std::uint64_t free_bytes() const { return free_ * kChunkBytes; }
  std::size_t free_chunks() const { return free_; }
  std::size_t blocks() const { return slots_.size() - empty_slots_.size(); }
  // Block slots, live or empty: a chunk's `block` is below this.
  std::size_t slots() const { return slots_.size(); }
  // The chunks of the block in `slot` that are taken (0 for an empty slot).
  std::uint32_t taken_chunks(std::uint32_t slot) const;
  // The largest block it makes, in chunks: as set, or a sixteenth of the
  // cap (2 MiB to 64 MiB; 64 MiB uncapped). A block is released only when
  // all of it is free, and a unit pinned resident keeps its block: small
  // next to the cap, blocks cannot hold much of it hostage.
  std::size_t largest_block();
  int device() const { return device_; }

 private:
  struct Block {
    CUmemGenericAllocationHandle handle = 0;  // 0: an empty slot
    std::uint32_t chunks = 0;
    std::uint64_t free = 0;  // bit i: chunk i is free
    std::array<std::uint64_t, kMaxBlockChunks> save{};
  };
  struct Run {
    std::uint32_t block = 0, first = 0, length = 0;
  };
  // Bits of `block`'s free chunks saved by the save numbered `saved_by`.
  static std::uint64_t eligible(const Block& block, std::uint64_t saved_by);
  std::uint64_t saved_by_when(std::size_t need, std::uint64_t saves_done);
  // The run to take next for `need` chunks among those saved by `saved_by`;
  // length 0 if none.
  Run best_run(std::size_t need, std::uint64_t saved_by) const;
  void take_run(const Run& run, std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                std::vector<std::uint64_t>* saves);

  int device_;
  const DriverOps& driver_;
  CapLedger& ledger_;
  std::size_t block_chunks_;
  std::vector<Block> slots_;
  std::vector<std::uint32_t> empty_slots_;  // released blocks' slots, reused by the next
  std::vector<std::uint64_t> pending_;      // scratch for saved_by_when
  std::uint64_t created_ = 0;               // chunks, in live blocks
  std::uint64_t free_ = 0;                  // chunks free
};

}  // namespace vgpumem::vmm
