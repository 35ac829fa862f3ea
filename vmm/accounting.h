// Device-memory accounting: the cap ledger plus the registry of what the
// program holds, with every decision traced.
//
// An allocating hook follows one protocol:
//   if (!accounting.reserve(device, bytes, api)) return CUDA_ERROR_OUT_OF_MEMORY;
//   result = real allocation;
//   success ? accounting.commit(kind, key, device, bytes, api)
//           : accounting.abandon(device, bytes);
// so the cap holds however many threads allocate at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "vmm/allocation_registry.h"
#include "vmm/cap_ledger.h"
#include "vmm/memory_observer.h"

namespace vgpumem::vmm {

class Accounting {
 public:
  Accounting(std::function<std::uint64_t(int)> cap_for, MemoryObserver& observer);

  // Reserves `bytes` against `device`'s cap; on refusal records an OOM and
  // returns false.
  bool reserve(int device, std::uint64_t bytes, const char* api);
  void abandon(int device, std::uint64_t bytes);
  void commit(AllocationKind kind, std::uint64_t key, int device, std::uint64_t bytes, const char* api);
  // An allocation made without a reservation (its device was unknown until it
  // existed). Returns false if it pushed the device over its cap; the caller
  // then frees it and forgets it.
  bool adopt(AllocationKind kind, std::uint64_t key, int device, std::uint64_t bytes, const char* api);
  // Charges `extra` more bytes to an allocation already committed (its real
  // size became known after the call, as with a pitch); false if over the cap.
  bool grow(AllocationKind kind, std::uint64_t key, std::uint64_t extra, const char* api);
  // Host memory is tracked for the summary but never charged to a device.
  void commit_host(std::uint64_t key, std::uint64_t bytes, const char* api);

  // A free: refunds and forgets what `key` was charged. Unknown keys (memory
  // the shim never saw) return nullopt and change nothing.
  std::optional<Allocation> forget(AllocationKind kind, std::uint64_t key, const char* api);
  // VMM handles are reference counted: cuMemRetainAllocationHandle adds one,
  // cuMemRelease drops one; the bytes are refunded with the last.
  bool retain(AllocationKind kind, std::uint64_t key);
  std::optional<Allocation> release(AllocationKind kind, std::uint64_t key, const char* api);
  std::optional<Allocation> find(AllocationKind kind, std::uint64_t key) const;

  DeviceUsage usage(int device) { return ledger_.usage(device); }
  bool capped(int device) { return ledger_.cap(device) != kUncapped; }
  CapLedger& ledger() { return ledger_; }
  std::uint64_t ooms_returned() const { return ooms_.load(std::memory_order_relaxed); }

  // {"devices": [{"device", "cap", "counted", "peak"}...], "ooms_returned",
  //  "host_bytes_peak", "live_allocations"}
  nlohmann::json summary() const;

 private:
  void trace_counter(int device);

  CapLedger ledger_;
  AllocationRegistry registry_;
  MemoryObserver& observer_;
  std::atomic<std::uint64_t> ooms_{0};
  std::atomic<std::uint64_t> host_bytes_{0};
  std::atomic<std::uint64_t> host_bytes_peak_{0};
};

}  // namespace vgpumem::vmm
