#include "vmm/chunk_pool.h"

#include <algorithm>
#include <bit>

#include "common/log.h"

namespace vgpumem::vmm {
namespace {

std::uint64_t all_of(std::uint32_t chunks) { return (std::uint64_t{1} << chunks) - 1; }  // chunks <= 32

}  // namespace

ChunkPool::~ChunkPool() = default;  // blocks live as long as the process: the driver reclaims them at exit

std::size_t ChunkPool::largest_block() {
  if (block_chunks_ != 0) return std::min(block_chunks_, kMaxBlockChunks);
  const std::uint64_t cap = ledger_.cap(device_);
  if (cap == kUncapped) return kMaxBlockChunks;
  return std::clamp<std::size_t>(cap / kChunkBytes / 16, 1, kMaxBlockChunks);
}

CUresult ChunkPool::take(std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                         std::vector<std::uint64_t>* saves, bool whole_blocks) {
  // All or nothing: taken while some are missing, the chunks an offload
  // frees next would be split between this unit and the next, and runs
  // would never form again. New blocks stay free where they do not suffice.
  while (free_ < count) {
    CUresult error = CUDA_SUCCESS;
    bool cap_full = false;
    const std::size_t missing = count - free_;
    if (grow(whole_blocks ? std::max(missing, kBlockChunks) : missing, &error, &cap_full) == 0) {
      if (!cap_full) {
        // The driver refused under the cap: the pager makes room by offloading instead.
        VGPUMEM_LOG_WARN("cannot create even a 2 MiB block on device {}: error {}; offloading to make room instead",
                         device_, static_cast<int>(error));
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  std::size_t need = count;
  const auto take_runs = [&](std::uint64_t saved_by) {
    while (need > 0) {
      const Run run = best_run(need, saved_by);
      if (run.length == 0) return;
      const std::size_t taking = std::min<std::size_t>(need, run.length);
      take_run(run, taking, saves_done, out, saves);
      need -= taking;
    }
  };
  // Chunks whose saves are done; then, if too few, those whose saves end
  // first: the fetch waits for the latest save among them, so no later one
  // than the `need` chunks left require.
  take_runs(saves_done);
  if (need > 0) take_runs(saved_by_when(need, saves_done));
  return CUDA_SUCCESS;  // free_ >= count: every chunk was found
}

std::uint64_t ChunkPool::eligible(const Block& block, std::uint64_t saved_by) {
  std::uint64_t mask = 0;
  for (std::uint64_t rest = block.free; rest != 0; rest &= rest - 1) {
    const int i = std::countr_zero(rest);
    if (block.save[static_cast<std::size_t>(i)] <= saved_by) mask |= std::uint64_t{1} << i;
  }
  return mask;
}

// The earliest save serial by which `need` more free chunks are saved (all
// free chunks' latest, if fewer are free).
std::uint64_t ChunkPool::saved_by_when(std::size_t need, std::uint64_t saves_done) {
  pending_.clear();  // reused: no allocation once grown
  for (const Block& block : slots_) {
    if (block.handle == 0) continue;
    for (std::uint64_t rest = block.free; rest != 0; rest &= rest - 1) {
      const std::uint64_t save = block.save[static_cast<std::size_t>(std::countr_zero(rest))];
      if (save > saves_done) pending_.push_back(save);
    }
  }
  if (pending_.empty()) return saves_done;
  const std::size_t nth = std::min(need, pending_.size()) - 1;
  std::nth_element(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(nth), pending_.end());
  return pending_[nth];
}

// The shortest run that holds all `need` chunks (it leaves the long runs to
// long requests), else the longest there is. A linear pass over the blocks:
// a few thousand at most (an H100's 80 GiB in 32 MiB blocks), most of them
// with nothing free, each skipped at one test.
ChunkPool::Run ChunkPool::best_run(std::size_t need, std::uint64_t saved_by) const {
  Run fitting, longest;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const Block& block = slots_[slot];
    if (block.handle == 0 || block.free == 0) continue;
    std::uint64_t mask = eligible(block, saved_by);
    while (mask != 0) {
      const int first = std::countr_zero(mask);
      const int length = std::countr_one(mask >> first);
      const Run run{slot, static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(length)};
      if (run.length >= need) {
        if (run.length == need) return run;
        if (fitting.length == 0 || run.length < fitting.length) fitting = run;
      } else if (run.length > longest.length) {
        longest = run;
      }
      mask &= ~(all_of(run.length) << first);
    }
  }
  return fitting.length != 0 ? fitting : longest;
}

void ChunkPool::take_run(const Run& run, std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                         std::vector<std::uint64_t>* saves) {
  Block& block = slots_[run.block];
  for (std::uint32_t i = run.first; i < run.first + count; ++i) {
    out->push_back(Chunk{block.handle, i * kChunkBytes, run.block});
    if (saves != nullptr) saves->push_back(block.save[i] > saves_done ? block.save[i] : 0);
    block.free &= ~(std::uint64_t{1} << i);
  }
  free_ -= count;
}

void ChunkPool::give_back(const Chunk& chunk, std::uint64_t save) {
  Block& block = slots_[chunk.block];
  const auto i = static_cast<std::uint32_t>(chunk.offset / kChunkBytes);
  block.free |= std::uint64_t{1} << i;
  block.save[i] = save;
  ++free_;
}

bool ChunkPool::take_back(const std::vector<Chunk>& chunks, std::uint64_t first_save, std::uint64_t last_save) {
  if (first_save == 0) return false;  // given back with no save to tell it by
  for (const Chunk& chunk : chunks) {
    if (chunk.block >= slots_.size()) return false;
    const Block& block = slots_[chunk.block];
    const auto i = static_cast<std::uint32_t>(chunk.offset / kChunkBytes);
    if (block.handle != chunk.handle || (block.free & (std::uint64_t{1} << i)) == 0 || block.save[i] < first_save ||
        block.save[i] > last_save) {
      return false;
    }
  }
  for (const Chunk& chunk : chunks) slots_[chunk.block].free &= ~(std::uint64_t{1} << (chunk.offset / kChunkBytes));
  free_ -= chunks.size();
  return true;
}

// Halves the size until the cap (or the driver, short of memory) takes it:
// near the cap the last blocks are small.
std::size_t ChunkPool::grow(std::size_t chunks, CUresult* error, bool* cap_full) {
  *error = CUDA_SUCCESS;
  *cap_full = false;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  for (std::size_t size = std::min(chunks, largest_block()); size > 0; size /= 2) {
    if (!ledger_.charge(device_, size * kChunkBytes)) {
      *cap_full = true;
      *error = CUDA_ERROR_OUT_OF_MEMORY;
      continue;
    }
    CUmemGenericAllocationHandle handle = 0;
    if (const CUresult r = driver_.create(&handle, size * kChunkBytes, &prop, 0); r != CUDA_SUCCESS) {
      ledger_.refund(device_, size * kChunkBytes);
      if (size > 1) {
        VGPUMEM_LOG_WARN("cannot create a {} MiB block on device {}: error {}; trying a smaller one",
                         size * kChunkBytes >> 20, device_, static_cast<int>(r));
      }
      *cap_full = false;
      *error = r;
      continue;
    }
    std::uint32_t slot = 0;
    if (empty_slots_.empty()) {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      slot = empty_slots_.back();
      empty_slots_.pop_back();
    }
    Block& block = slots_[slot];
    block.handle = handle;
    block.chunks = static_cast<std::uint32_t>(size);
    block.free = all_of(block.chunks);
    block.save.fill(0);
    created_ += size;
    free_ += size;
    *error = CUDA_SUCCESS;
    *cap_full = false;
    return size;
  }
  return 0;
}

std::uint32_t ChunkPool::taken_chunks(std::uint32_t slot) const {
  const Block& block = slots_.at(slot);
  return block.chunks - static_cast<std::uint32_t>(std::popcount(block.free));
}

std::uint64_t ChunkPool::release_free(std::uint64_t bytes) {
  std::uint64_t released = 0;
  for (std::uint32_t slot = 0; slot < slots_.size() && released < bytes; ++slot) {
    Block& block = slots_[slot];
    if (block.handle == 0 || block.free != all_of(block.chunks)) continue;
    driver_.release(block.handle);
    ledger_.refund(device_, block.chunks * kChunkBytes);
    created_ -= block.chunks;
    free_ -= block.chunks;
    released += block.chunks * kChunkBytes;
    block = Block{};
    empty_slots_.push_back(slot);
  }
  return released;
}

}  // namespace vgpumem::vmm
