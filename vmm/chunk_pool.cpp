#include "vmm/chunk_pool.h"

#include <algorithm>
#include <bit>

#include "common/log.h"
#include "vmm/driver_error.h"

namespace vgpumem::vmm {
namespace {

std::uint64_t all_of(std::uint32_t chunks) { return chunks >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << chunks) - 1; }

// The index of a block size (2^i chunks) in free_by_size_.
unsigned size_index(std::uint32_t chunks) { return static_cast<unsigned>(std::countr_zero(chunks)); }

}  // namespace

ChunkPool::~ChunkPool() = default;  // blocks live as long as the process: the driver reclaims them at exit

std::size_t ChunkPool::largest_block() {
  if (block_chunks_ != 0) return std::bit_floor(std::min(block_chunks_, kMaxBlockChunks));
  const std::uint64_t cap = ledger_.cap(device_);
  if (cap == kUncapped) return kMaxBlockChunks;
  return std::bit_floor(std::clamp<std::size_t>(cap / kChunkBytes / 16, 1, kMaxBlockChunks));
}

std::size_t ChunkPool::largest_allowed(std::size_t largest_chunks) {
  const std::size_t largest = largest_block();
  return largest_chunks == 0 ? largest : std::bit_floor(std::min(largest_chunks, largest));
}

std::uint64_t ChunkPool::latest_save(const Block& block) {
  return *std::max_element(block.save.begin(), block.save.begin() + block.chunks);
}

void ChunkPool::sort_free_blocks(std::size_t largest, std::uint64_t saves_done, Saves which) {
  for (auto& blocks : free_by_size_) blocks.clear();
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const Block& block = slots_[slot];
    if (block.handle == 0 || block.chunks > largest || block.free != all_of(block.chunks)) continue;
    const std::uint64_t save = latest_save(block);
    if (which == Saves::done && save > saves_done) continue;
    free_by_size_[size_index(block.chunks)].emplace_back(save, slot);
  }
  // Saves done (and so the smallest serials) first, then those that end first.
  for (auto& blocks : free_by_size_) std::sort(blocks.begin(), blocks.end());
}

std::size_t ChunkPool::choose(std::size_t count, std::size_t largest, Fit fit, std::uint64_t saves_done,
                              Saves which) {
  sort_free_blocks(largest, saves_done, which);
  chosen_.clear();
  missing_.clear();
  std::size_t short_by = 0;
  if (fit == Fit::exact) {
    // Its own decomposition: `largest` for each whole multiple, then the bits.
    const auto take_of_size = [&](std::size_t size, std::size_t wanted, std::size_t* next) {
      auto& blocks = free_by_size_[size_index(static_cast<std::uint32_t>(size))];
      for (; wanted > 0; --wanted) {
        if (*next < blocks.size()) {
          chosen_.push_back(blocks[(*next)++].second);
        } else {
          missing_.push_back(static_cast<std::uint32_t>(size));
          short_by += size;
        }
      }
    };
    std::size_t next_largest = 0;
    take_of_size(largest, count / largest, &next_largest);
    const std::size_t rest = count % largest;
    for (std::size_t size = largest / 2; size > 0; size /= 2) {
      std::size_t next = 0;
      if ((rest & size) != 0) take_of_size(size, 1, &next);
    }
    return short_by;
  }
  std::size_t need = count;
  for (unsigned i = free_by_size_.size(); i-- > 0;) {
    const std::size_t size = std::size_t{1} << i;
    const auto& blocks = free_by_size_[i];
    const std::size_t wanted = std::min(need / size, blocks.size());
    for (std::size_t k = 0; k < wanted; ++k) chosen_.push_back(blocks[k].second);
    need -= wanted * size;
  }
  if (fit == Fit::near && need == 0) {
    const std::size_t exact_blocks = count / largest + static_cast<std::size_t>(std::popcount(count % largest));
    if (chosen_.size() > exact_blocks + 1) return count;  // too many: as if none added up
  }
  return need;
}

CUresult ChunkPool::take(std::size_t count, std::uint64_t saves_done, std::vector<Chunk>* out,
                         std::vector<std::uint64_t>* saves, std::size_t largest_chunks, Fit fit, Saves which) {
  const std::size_t largest = largest_allowed(largest_chunks);
  // Each block made is one the choice lacked, so the choice comes closer to
  // adding up each time; a bound all the same.
  for (int tries = 0;; ++tries) {
    const std::size_t short_by = choose(count, largest, fit, saves_done, which);
    if (short_by == 0) break;
    CUresult error = CUDA_SUCCESS;
    bool cap_full = false;
    // Exact: a size of its decomposition, or none; any: the largest that fits
    // what is missing, smaller where refused.
    if (fit == Fit::near) return CUDA_ERROR_OUT_OF_MEMORY;  // makes nothing
    const std::size_t missing = fit == Fit::exact ? missing_.front() : std::bit_floor(std::min(short_by, largest));
    if (tries == 64 || grow(missing, &error, &cap_full, fit == Fit::any) == 0) {
      if (tries < 64 && !cap_full) {
        // The driver refused under the cap: the pager makes room by offloading instead.
        VGPUMEM_LOG_WARN("cannot create a {} MiB block on device {}: error {}; offloading to make room instead",
                         missing * kChunkBytes >> 20, device_, driver_error(error));
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (const std::uint32_t slot : chosen_) {
    Block& block = slots_[slot];
    for (std::uint32_t i = 0; i < block.chunks; ++i) {
      out->push_back(Chunk{block.handle, i * kChunkBytes, slot});
      if (saves != nullptr) saves->push_back(block.save[i] > saves_done ? block.save[i] : 0);
    }
    block.free = 0;
    free_ -= block.chunks;
  }
  return CUDA_SUCCESS;
}

std::size_t ChunkPool::uncreated_chunks() {
  const std::uint64_t cap = ledger_.cap(device_);
  if (cap == kUncapped) return ~std::size_t{0} / 2;
  const std::uint64_t counted = ledger_.usage(device_).counted;
  return static_cast<std::size_t>((cap - std::min(cap, counted)) / kChunkBytes);
}

bool ChunkPool::reshape(std::size_t count, std::uint64_t saves_done, std::size_t largest_chunks) {
  const std::size_t largest = largest_allowed(largest_chunks);
  const std::size_t missing = choose(count, largest, Fit::exact);
  if (missing == 0) return false;
  std::sort(chosen_.begin(), chosen_.end());
  // The idle free blocks the choice leaves out, smallest first: small
  // blocks become the larger ones units take, and the fewest chunks are
  // released past what is missing.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> idle;  // (chunks, slot)
  std::size_t idle_chunks = 0;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const Block& block = slots_[slot];
    if (block.handle == 0 || block.free != all_of(block.chunks) || block.mappings != 0 ||
        latest_save(block) > saves_done || std::binary_search(chosen_.begin(), chosen_.end(), slot)) {
      continue;
    }
    idle.emplace_back(block.chunks, slot);
    idle_chunks += block.chunks;
  }
  // The room the cap has left counts too: only what it lacks is released.
  const std::size_t room = uncreated_chunks();
  if (room >= missing) return false;  // not the cap: the driver refused (logged by take)
  const std::size_t lacking = missing - room;
  if (idle_chunks < lacking) return false;
  std::sort(idle.begin(), idle.end());
  std::size_t released = 0;
  for (const auto& [chunks, slot] : idle) {
    if (released >= lacking) break;
    release_block(slot);
    released += chunks;
    ++reshaped_;
  }
  return true;
}

// Halves the size until the cap (or the driver, short of memory) takes it:
// near the cap the last blocks are small.
std::size_t ChunkPool::grow(std::size_t chunks, CUresult* error, bool* cap_full, bool halve) {
  *error = CUDA_SUCCESS;
  *cap_full = false;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  if (chunks == 0) return 0;
  for (std::size_t size = std::bit_floor(std::min(chunks, largest_block())); size > 0; size = halve ? size / 2 : 0) {
    if (!ledger_.charge(device_, size * kChunkBytes)) {
      *cap_full = true;
      *error = CUDA_ERROR_OUT_OF_MEMORY;
      continue;
    }
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r =
        counted_call(stats_, DriverWork::vmm, [&] { return driver_.create(&handle, size * kChunkBytes, &prop, 0); });
    if (r != CUDA_SUCCESS) {
      ledger_.refund(device_, size * kChunkBytes);
      if (size > 1) {
        VGPUMEM_LOG_WARN("cannot create a {} MiB block on device {}: error {}; trying a smaller one",
                         size * kChunkBytes >> 20, device_, driver_error(r));
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

std::uint32_t ChunkPool::taken_chunks(std::uint32_t slot) const {
  const Block& block = slots_.at(slot);
  return block.chunks - static_cast<std::uint32_t>(std::popcount(block.free));
}

void ChunkPool::release_block(std::uint32_t slot) {
  Block& block = slots_[slot];
  counted_call(stats_, DriverWork::vmm, [&] { return driver_.release(block.handle); });
  ledger_.refund(device_, block.chunks * kChunkBytes);
  created_ -= block.chunks;
  free_ -= block.chunks;
  block = Block{};
  empty_slots_.push_back(slot);
}

std::uint64_t ChunkPool::release_free(std::uint64_t bytes) {
  std::uint64_t released = 0;
  for (std::uint32_t slot = 0; slot < slots_.size() && released < bytes; ++slot) {
    const Block& block = slots_[slot];
    if (block.handle == 0 || block.free != all_of(block.chunks) || block.mappings != 0) continue;
    released += block.chunks * kChunkBytes;
    release_block(slot);
  }
  return released;
}

}  // namespace vgpumem::vmm
