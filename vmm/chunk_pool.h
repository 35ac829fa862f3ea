// Physical device memory for paged allocations, in 2 MiB chunks (the H100's
// VMM granularity), one pool per device. Every chunk that exists is charged
// to the device's cap, so the cap bounds physical bytes, whatever is mapped
// where. Chunks are created once and reused: creating one costs 12-34 µs and
// can disturb other streams (docs/gpu-facts.md §8.6), so they are released
// only when the program's own, unpaged allocations need the room.
//
// Guarded by the pager's lock, the reclaimer's chunks made ahead included
// (create(), then give_back()).
//
// A chunk given back by an eviction may still be read by the copy that saves
// its contents: it carries that save's serial (the pager numbers a device's
// saves in the order its copy-out stream runs them), and whoever reuses it
// orders its first write after that save (see Pager). take() prefers chunks
// whose saves are done, then the oldest save.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "vmm/cap_ledger.h"
#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

inline constexpr std::uint64_t kChunkBytes = std::uint64_t{2} << 20;

class ChunkPool {
 public:
  ChunkPool(int device, const DriverOps& driver, CapLedger& ledger) : device_(device), driver_(driver), ledger_(ledger) {}
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // A free chunk, or a new one if the cap allows; nullopt when neither
  // (`error` says whether the cap or the driver refused). `saves_done`: the
  // serial up to which saves have completed; `*save` gets the chunk's save
  // serial if that is later (its first write must wait for it), else 0.
  std::optional<CUmemGenericAllocationHandle> take(CUresult* error, std::uint64_t saves_done = 0,
                                                   std::uint64_t* save = nullptr);
  // A new chunk charged to the cap; nullopt when the cap refuses
  // (`cap_full`) or the driver does (`error` is the driver's). Logs nothing.
  std::optional<CUmemGenericAllocationHandle> create(CUresult* error, bool* cap_full);
  // `save`: the serial of a save that may still read it (0: none).
  void give_back(CUmemGenericAllocationHandle chunk, std::uint64_t save = 0) { free_.push_back({chunk, save}); }
  // Takes exactly `chunks` back out of the free list if every one of them is
  // still there as given back by the save numbered [first_save, last_save]
  // (its pieces': no one has reused it since, for a chunk taken and given
  // back again carries a later save, or none); false, changing nothing, if not.
  bool take_back(const std::vector<CUmemGenericAllocationHandle>& chunks, std::uint64_t first_save,
                 std::uint64_t last_save);
  // Releases free chunks until `bytes` are refunded to the cap or none is left.
  std::uint64_t release_free(std::uint64_t bytes);

  std::uint64_t created_bytes() const { return created_ * kChunkBytes; }
  std::uint64_t free_bytes() const { return free_.size() * kChunkBytes; }
  std::size_t free_chunks() const { return free_.size(); }
  int device() const { return device_; }

 private:
  int device_;
  const DriverOps& driver_;
  CapLedger& ledger_;
  struct Free {
    CUmemGenericAllocationHandle chunk;
    std::uint64_t save;
  };
  std::vector<Free> free_;
  std::uint64_t created_ = 0;
};

}  // namespace vgpumem::vmm
