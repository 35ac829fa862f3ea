// Physical device memory for paged allocations: physical allocations
// ("blocks") of a power of two of 2 MiB chunks, 2 MiB to 64 MiB, one pool
// per device. A unit is given whole blocks whose sizes add up to its own
// (a 26 MiB unit: 16 + 8 + 2 MiB), and maps each one whole, from its start.
// Every block that exists is charged to the device's cap whole, so the cap
// bounds physical bytes, whatever is mapped where. Blocks are created once
// and reused: creating one costs 12-70 µs and, on release, a scrub of its
// memory on a copy engine (docs/gpu-facts.md §8.6b), so they are released
// only to make room for the program's own, unpaged allocations, or for
// blocks of the sizes a unit needs when the cap holds no more (reshape).
//
// Why whole blocks of powers of two: every cuMemMap maps one range of one
// physical allocation, from its start ("offset: currently must be zero",
// CUDA driver API), and the VMM calls cost per call and per handle mapped,
// not per byte (docs/gpu-facts.md §8.6; on an H200 under training 77-109 µs
// per 2 MiB handle, docs/results.md). A unit of n chunks takes at most
// popcount(n) handles of the largest sizes the pool allows (one for a
// 32 MiB piece), where 2 MiB chunks took n. Any set of free blocks that
// adds up to n will do: with sizes that are powers of two, taking the
// largest block that still fits, again and again, finds one whenever one
// exists (each size divides the next, so smaller blocks that add up to a
// larger one can always stand in for it, and the other way round).
//
// Guarded by the pager's lock, the reclaimer's blocks made ahead included.
//
// A chunk given back by an eviction may still be read by the copy that saves
// its contents: it carries that save's serial (the pager numbers a device's
// saves in the order its copy-out stream runs them), and whoever reuses it
// orders its first write after that save (see Pager). take() prefers blocks
// whose saves are done, then those whose saves end first, then new blocks.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "vmm/cap_ledger.h"
#include "vmm/chunk.h"
#include "vmm/driver_ops.h"
#include "vmm/host_path_stats.h"

// Note [Whole blocks]
// ~~~~~~~~~~~~~~~~~~~
// Physical memory in blocks: `cuMemCreate` allocations
// of a power of two of 2 MiB chunks, 2 MiB to 64 MiB (the largest a
// sixteenth of the cap by default: `VGPUMEM_BLOCK_BYTES`), one pool per
// device. A unit is given whole blocks that add up to it, the largest
// first (a 26 MiB unit: 16 + 8 + 2 MiB; a 32 MiB piece: one block), and its
// range is mapped one `cuMemMap` per block, each from the block's start
// (`Pager::map_runs`), then one `cuMemSetAccess` over the whole range. Why:
// `cuMemMap` maps a handle from offset 0 only ("currently must be zero",
// `cuda.h`; the simulated driver refuses any other, so nothing here relies
// on more), and a VMM call costs per call and per handle, not per byte: with
// one allocation per 2 MiB chunk, bringing a unit back on an H200 cost
// 77–109 µs per chunk (results.md), and with chunks cut from shared blocks
// the runs a unit got fragmented (2.3 chunks a mapping in ResNet-50 at half
// its peak on the simulator). With powers of two, any free blocks that add
// up to the unit serve, and taking the largest that still fits, again and
// again, finds them whenever they exist (each size divides the next). Among
// blocks of one size those whose saves are done come first, then those
// whose saves end first; blocks of the sizes missing are made while the cap
// has room. Where the cap is full and the free blocks are of the wrong sizes
// (`ChunkPool::reshape`), finished saves are unmapped and free blocks no save
// still reads that the unit would not use are released, the smallest first,
// to make the sizes missing (`paging.devices.reshaped_blocks` counts them);
// otherwise more is offloaded. A handle of the program's (`cuMemCreate` on a
// paged device) takes 2 MiB blocks only: the program may map it from any of
// its chunks. Every block that exists is charged to the cap whole, whatever
// it is mapped under: the cap bounds physical bytes. Blocks are created once
// and reused (creation costs 12–70 µs and a scrub on release, gpu-facts
// §8.6, §8.6b) and released when the program's unpaged allocations need the
// room (`Pager::make_room`, called when such an allocation would pass the
// cap): `make_room` empties whole blocks, the one with the fewest units in
// their launch grace and then the fewest bytes first, and only where no
// block can be emptied (a held or pinned unit on each) takes victims one by
// one in the policy's order. The runs mapped are kept (`Unit::home_runs`) so
// the range is unmapped mapping by mapping where the driver refuses one
// unmap over several. Tests: `ChunkPoolTest.*` (every mapping a whole handle
// from its start), `PagingBlocks.*` (the trainer bit-identical on 8 MiB
// blocks under every check mode).

namespace vgpumem::vmm {

// The reclaimer's spare blocks: 32 MiB, the size of a large feature map in a
// CNN step (and of the pieces allocations are made of under auto).
inline constexpr std::size_t kBlockChunks = 16;
inline constexpr std::size_t kMaxBlockChunks = 32;  // 64 MiB: the largest block

class ChunkPool {
 public:
  // `block_chunks`: the largest block; 0 for automatic (largest_block()).
  // `stats`: where its driver calls are counted (null: nowhere).
  ChunkPool(int device, const DriverOps& driver, CapLedger& ledger, std::size_t block_chunks = 0,
            HostPathStats* stats = nullptr)
      : device_(device), driver_(driver), ledger_(ledger), block_chunks_(block_chunks), stats_(stats) {}
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // How take() may make up a unit from free blocks: `exact`, only in the
  // blocks of its own binary decomposition (n = 13: 8 + 4 + 1, with blocks
  // of `largest` for every whole multiple of it), made where the cap allows:
  // the fewest handles, and what the unit gives back on its next offload
  // serves it again; `any`, any free blocks that add up, the largest first
  // (more handles, but no block made or released); `near`, as `any` in at
  // most one block more than `exact` would take (a block more to map costs
  // less than making and releasing blocks).
  enum class Fit : std::uint8_t { exact, near, any };
  // Which free blocks take() may use: only those whose saves are done (a
  // copy into the others waits on the device for the save that reads them:
  // a prefetch queued behind an offload), or any.
  enum class Saves : bool { done, any };
  // Appends the chunks of whole free blocks that add up to `count` chunks to
  // `out`, block by block, each block's in order (and each chunk's save
  // serial to `saves`: the save its first write must wait for, if later than
  // `saves_done`, else 0): blocks of at most `largest_chunks` (0:
  // largest_block()), as `fit` and `which` allow; among blocks of a size,
  // those whose saves are done first, then those whose saves end first. All or nothing:
  // CUDA_ERROR_OUT_OF_MEMORY, appending none, when the cap refused a block
  // (or the driver did: logged) before the free blocks added up.
  CUresult take(std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                std::vector<std::uint64_t>* saves, std::size_t largest_chunks = 0, Fit fit = Fit::exact,
                Saves which = Saves::any);
  // Where take(count, exact) failed for want of room under the cap:
  // releases free blocks the exact take would not use whose saves are done
  // (by `saves_done`) and that no range maps (the caller unmaps finished
  // saves' ranges first), the smallest first, enough to make the sizes
  // missing. True if it released any; false if such blocks do not add up to
  // what is missing.
  bool reshape(std::size_t count, std::uint64_t saves_done, std::size_t largest_chunks = 0);
  // A new block of the largest power of two of chunks up to `chunks` (and up
  // to largest_block()), halved while the cap (`cap_full`) or the driver
  // (`error` is the driver's) refuses it (`halve`; else exactly that size or
  // none), all free; the chunks it holds, 0 when none could be made. Logs
  // only a refused size it goes on from.
  std::size_t grow(std::size_t chunks, CUresult* error, bool* cap_full, bool halve = true);
  // A range maps the block in `slot` (`mapped`), or no longer does: a block
  // some range still maps is never released (its memory would stay until
  // the last unmap, past the cap).
  void note_mapped(std::uint32_t slot, bool mapped) {
    std::uint32_t& count = slots_[slot].mappings;
    count = mapped ? count + 1 : count - (count != 0 ? 1 : 0);
  }
  // `save`: the serial of a save that may still read it (0: none).
  void give_back(const Chunk& chunk, std::uint64_t save = 0);
  // Takes exactly `chunks` back out of the free ones if every one of them is
  // still there as given back by the save numbered [first_save, last_save]
  // (its pieces': no one has reused it since, for a chunk taken and given
  // back again carries a later save, or none); false, changing nothing, if not.
  bool take_back(const std::vector<Chunk>& chunks, std::uint64_t first_save, std::uint64_t last_save);
  // Releases blocks whose chunks are all free and that no range maps until at least `bytes` are
  // refunded to the cap or none is left; returns what was refunded (a block
  // goes whole, so it may be more).
  std::uint64_t release_free(std::uint64_t bytes);

  std::uint64_t created_bytes() const { return created_ * kChunkBytes; }
  std::uint64_t free_bytes() const { return free_ * kChunkBytes; }
  std::size_t free_chunks() const { return free_; }
  // Chunks the cap has room to make yet, besides those free.
  std::size_t uncreated_chunks();
  std::size_t blocks() const { return slots_.size() - empty_slots_.size(); }
  // Block slots, live or empty: a chunk's `block` is below this.
  std::size_t slots() const { return slots_.size(); }
  // The chunks of the block in `slot` that are taken (0 for an empty slot).
  std::uint32_t taken_chunks(std::uint32_t slot) const;
  // The largest block it makes, in chunks, a power of two: as set (rounded
  // down), or a sixteenth of the cap (2 MiB to 64 MiB; 64 MiB uncapped). A
  // block is released only when all of it is free, and a unit pinned
  // resident keeps its blocks: small next to the cap, blocks cannot hold
  // much of it hostage.
  std::size_t largest_block();
  // Blocks released to make blocks of other sizes (reshape), so far.
  std::uint64_t reshaped_blocks() const { return reshaped_; }
  int device() const { return device_; }

 private:
  struct Block {
    CUmemGenericAllocationHandle handle = 0;  // 0: an empty slot
    std::uint32_t chunks = 0;
    std::uint64_t free = 0;  // bit i: chunk i is free
    std::uint32_t mappings = 0;  // ranges that map it now (note_mapped)
    std::array<std::uint64_t, kMaxBlockChunks> save{};
  };
  // Sorts the free blocks of each size (of at most `largest`; with their
  // saves done by `saves_done` if `which` says so) into free_by_size_,
  // earliest saves first.
  void sort_free_blocks(std::size_t largest, std::uint64_t saves_done, Saves which);
  // Fills chosen_ with the free blocks take(count, fit) would use; returns
  // the chunks they fall short by (0: they add up), and for `exact` the
  // sizes missing in missing_.
  std::size_t choose(std::size_t count, std::size_t largest, Fit fit, std::uint64_t saves_done = 0,
                     Saves which = Saves::any);
  // The latest save any chunk of `block` may still be read by.
  static std::uint64_t latest_save(const Block& block);
  std::size_t largest_allowed(std::size_t largest_chunks);
  void release_block(std::uint32_t slot);

  int device_;
  const DriverOps& driver_;
  CapLedger& ledger_;
  std::size_t block_chunks_;
  HostPathStats* stats_;
  std::vector<Block> slots_;
  std::vector<std::uint32_t> empty_slots_;  // released blocks' slots, reused by the next
  // Scratch for choose(), reused (no allocation once grown): the free
  // blocks of each size (2^i chunks) as (latest save, slot), and the choice.
  std::array<std::vector<std::pair<std::uint64_t, std::uint32_t>>, 6> free_by_size_;
  std::vector<std::uint32_t> chosen_;
  std::vector<std::uint32_t> missing_;  // block sizes (chunks) choose(exact) found none free of
  std::uint64_t created_ = 0;               // chunks, in live blocks
  std::uint64_t free_ = 0;                  // chunks free
  std::uint64_t reshaped_ = 0;              // blocks released by reshape()
};

}  // namespace vgpumem::vmm
