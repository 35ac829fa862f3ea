// Streams as bits, so a unit can remember every stream that used it in one
// atomic word. Lock-free: a fixed table of stream handles, filled by
// compare-and-swap on first sight. Stream 63 of the mask stands for "a
// stream the registry could not name" (the table is full, or the per-thread
// default stream, which is a different stream on every thread): work there
// can only be waited for by synchronising the context.
#pragma once

#include <atomic>
#include <cstdint>

#include <cuda.h>

namespace vgpumem::vmm {

class StreamRegistry {
 public:
  static constexpr unsigned kNamed = 63;
  static constexpr std::uint64_t kUnnamedBit = std::uint64_t{1} << kNamed;

  // The bit for `stream` as the caller meant it (`per_thread`: the caller used
  // a _ptsz/_ptds entry point, so 0 is its thread's default stream).
  std::uint64_t bit_for(CUstream stream, bool per_thread) {
    if (stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread)) return kUnnamedBit;
    const CUstream key = stream == nullptr ? CU_STREAM_LEGACY : stream;
    for (unsigned i = 0; i < kNamed; ++i) {
      CUstream seen = slots_[i].load(std::memory_order_acquire);
      if (seen == key) return std::uint64_t{1} << i;
      if (seen == kEmpty && slots_[i].compare_exchange_strong(seen, key, std::memory_order_acq_rel)) {
        return std::uint64_t{1} << i;
      }
      if (seen == key) return std::uint64_t{1} << i;  // another thread named it first
    }
    return kUnnamedBit;
  }
  CUstream stream_of(unsigned bit) const { return slots_[bit].load(std::memory_order_acquire); }
  // A destroyed stream's handle can come back for a new stream; forgetting it
  // is never needed for correctness (waiting on a reused handle only orders more).

 private:
  static inline const CUstream kEmpty = nullptr;
  std::atomic<CUstream> slots_[kNamed] = {};
};

}  // namespace vgpumem::vmm
