#include "vmm/chunk_pool.h"

#include <algorithm>
#include <functional>

#include "common/format_bytes.h"
#include "common/log.h"

namespace vgpumem::vmm {

ChunkPool::~ChunkPool() = default;  // chunks live as long as the process: the driver reclaims them at exit

std::optional<CUmemGenericAllocationHandle> ChunkPool::take(CUresult* error, std::uint64_t saves_done,
                                                            std::uint64_t* save) {
  *error = CUDA_SUCCESS;
  if (save != nullptr) *save = 0;
  if (!free_.empty()) {
    // The last given back whose save is done (or that had none); else the
    // one whose save ends first.
    std::size_t chosen = free_.size();
    for (std::size_t i = free_.size(); i-- > 0;) {
      if (free_[i].save <= saves_done) {
        chosen = i;
        break;
      }
      if (chosen == free_.size() || free_[i].save < free_[chosen].save) chosen = i;
    }
    const Free taken = free_[chosen];
    free_[chosen] = free_.back();
    free_.pop_back();
    if (save != nullptr && taken.save > saves_done) *save = taken.save;
    return taken.chunk;
  }
  bool cap_full = false;
  std::optional<CUmemGenericAllocationHandle> chunk = create(error, &cap_full);
  if (!chunk && !cap_full) {
    // The driver refused under the cap: the pager makes room by offloading instead.
    VGPUMEM_LOG_WARN("cannot create a 2 MiB chunk on device {}: error {}; offloading to make room instead", device_,
                     static_cast<int>(*error));
    *error = CUDA_ERROR_OUT_OF_MEMORY;
  }
  return chunk;
}

bool ChunkPool::take_back(const std::vector<CUmemGenericAllocationHandle>& chunks, std::uint64_t first_save,
                          std::uint64_t last_save) {
  if (first_save == 0) return false;  // given back with no save to tell it by
  std::vector<std::size_t> at;
  at.reserve(chunks.size());
  for (const CUmemGenericAllocationHandle chunk : chunks) {
    const auto it =
        std::find_if(free_.begin(), free_.end(), [&](const Free& f) { return f.chunk == chunk && f.save >= first_save && f.save <= last_save; });
    if (it == free_.end()) return false;
    at.push_back(static_cast<std::size_t>(it - free_.begin()));
  }
  // Highest index first, so that moving the last entry into a hole never
  // moves one still to be taken.
  std::sort(at.begin(), at.end(), std::greater<>());
  for (const std::size_t i : at) {
    free_[i] = free_.back();
    free_.pop_back();
  }
  return true;
}

std::optional<CUmemGenericAllocationHandle> ChunkPool::create(CUresult* error, bool* cap_full) {
  *error = CUDA_SUCCESS;
  *cap_full = !ledger_.charge(device_, kChunkBytes);
  if (*cap_full) {
    *error = CUDA_ERROR_OUT_OF_MEMORY;
    return std::nullopt;
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  CUmemGenericAllocationHandle chunk = 0;
  if (const CUresult r = driver_.create(&chunk, kChunkBytes, &prop, 0); r != CUDA_SUCCESS) {
    ledger_.refund(device_, kChunkBytes);
    *error = r;
    return std::nullopt;
  }
  ++created_;
  return chunk;
}

std::uint64_t ChunkPool::release_free(std::uint64_t bytes) {
  std::uint64_t released = 0;
  while (released < bytes && !free_.empty()) {
    driver_.release(free_.back().chunk);
    free_.pop_back();
    ledger_.refund(device_, kChunkBytes);
    --created_;
    released += kChunkBytes;
  }
  return released;
}

}  // namespace vgpumem::vmm
