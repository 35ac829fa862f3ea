// Streams as bits, so a unit can remember every stream that used it in one
// atomic word. A stream is named by its context and handle: the legacy
// default stream is a different stream in every context (keyed by the
// context), a stream the program created by its handle, with the context it
// belongs to noted when it is first seen (the pager records events on it in
// that context). Lookups are lock-free; a first sight, a destroyed stream and
// a destroyed context take a small lock.
//
// Bit 63 stands for "a stream the registry cannot name": the per-thread
// default stream (a different stream on every thread, which no other thread
// can record on) or any stream once the table is full. Work there can only
// be waited for by synchronising the contexts it may have run in, which the
// registry also remembers, per device.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include <cuda.h>

#include "vmm/driver_ops.h"

// Note [Streams as bits]
// ~~~~~~~~~~~~~~~~~~~~~~
// Streams as bits of a 64-bit mask, so a unit
// remembers every stream that used it in one atomic word. A stream is named
// by its context and handle (the legacy stream once per context), with the
// context it belongs to, so the pager records on it in that context; it also
// remembers the contexts seen per device. Work on per-thread default
// streams (blocking streams, unnamed: no other thread can record on one) is
// reached through an event on the legacy stream of each of those contexts,
// which an offload's copy stream waits for on the device (the event is an
// operation of the legacy stream, so the blocking streams' later work waits
// for their earlier work, as after any legacy-stream call; a host-side
// synchronise, as before, stopped the thread for every copy queued too);
// only a stream unnamed for another reason (the table full) falls back to
// synchronising the contexts on the host. `cuStreamDestroy`, `cuCtxDestroy`
// and `cuDevicePrimaryCtxReset` wait for the work and free the bits.

namespace vgpumem::vmm {

class StreamRegistry {
 public:
  static constexpr unsigned kNamed = 63;
  static constexpr std::uint64_t kUnnamedBit = std::uint64_t{1} << kNamed;
  static constexpr unsigned kMaxContexts = 64;

  explicit StreamRegistry(const DriverOps& driver) : driver_(driver) {}

  // The bit for `stream` as the caller meant it (`per_thread`: a _ptsz/_ptds
  // entry point, so 0 is its thread's default stream); `current`: the
  // caller's current context, where a null stream resolves (only read for
  // the default streams).
  std::uint64_t bit_for(CUstream stream, bool per_thread, CUcontext current);
  // Whether the bit for `stream` resolves through the current context.
  static bool needs_current_context(CUstream stream, bool per_thread) {
    return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD || per_thread;
  }

  struct Named {
    CUstream stream = nullptr;   // CU_STREAM_LEGACY for a context's legacy stream
    CUcontext context = nullptr;
    int device = -1;
  };
  // The stream of a named bit (an empty Named for a bit no stream holds).
  Named named(unsigned bit) const;
  // Each context seen on `device`, for a fallback synchronisation.
  template <typename Visit>
  void for_each_context(int device, Visit&& visit) const {
    const unsigned count = context_count_.load(std::memory_order_acquire);
    for (unsigned i = 0; i < count; ++i) {
      const CUcontext context = contexts_[i].context.load(std::memory_order_acquire);
      if (context != nullptr && contexts_[i].device == device) visit(context);
    }
  }

  // Whether the unnamed bit has only ever stood for per-thread default
  // streams (blocking streams, which an event on their context's legacy
  // stream reaches): false once any other stream went unnamed (the table
  // full, or a handle the driver did not know).
  bool unnamed_is_per_thread_only() const { return !unnamed_other_.load(std::memory_order_relaxed); }

  // The bit of a stream the registry has named, or 0 (no insert).
  std::uint64_t find(CUstream stream) const;
  // The program destroys `stream` or every stream of `context`: their bits
  // are free for new streams. Returns the bits given up.
  std::uint64_t retire_stream(CUstream stream);
  std::uint64_t retire_context(CUcontext context);

 private:
  struct Slot {
    std::atomic<std::uintptr_t> key{0};  // 0: empty
    // Written under the lock before `key` is published.
    CUstream stream = nullptr;
    CUcontext context = nullptr;
    int device = -1;
  };
  struct KnownContext {
    std::atomic<CUcontext> context{nullptr};
    int device = -1;  // written before `context` is published
  };

  static std::uintptr_t key_of(CUstream stream, CUcontext current) {
    return stream == nullptr || stream == CU_STREAM_LEGACY ? reinterpret_cast<std::uintptr_t>(current) | 1
                                                           : reinterpret_cast<std::uintptr_t>(stream);
  }
  std::uint64_t insert(std::uintptr_t key, CUstream stream, CUcontext context);
  // The unnamed bit, for a stream that is not a per-thread default stream
  // (unnamed_is_per_thread_only() is false from then on).
  std::uint64_t unnamed_other() {
    unnamed_other_.store(true, std::memory_order_relaxed);
    return kUnnamedBit;
  }
  void note_context(CUcontext context);
  int device_of(CUcontext context) const;

  const DriverOps& driver_;
  Slot slots_[kNamed];
  KnownContext contexts_[kMaxContexts];
  std::atomic<unsigned> context_count_{0};
  std::atomic<bool> unnamed_other_{false};
  std::mutex mutex_;  // inserts and retirements
};

}  // namespace vgpumem::vmm
