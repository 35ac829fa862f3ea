// What a library call about to run overwrites whole before it reads any of
// it: a GEMM's output with beta = 0, a cuBLASLt matmul's D when C is another
// buffer. The hook that knows (interpose/, from the call's arguments) opens a
// scope on its thread for the length of the call; a unit on the host that
// one of its ranges covers then comes back without the covered bytes copied
// in (Pager::bring_in), since the call writes every one of them before
// anything reads them.
//
// Only the calling thread's launches inside the call see the scope: any
// other thread's launch that legitimately precedes the call in stream order
// was enqueued, and so fetched with a copy, before the call began. The
// skipped bytes' host copy is kept until the call returns (Pager::
// end_overwrite): a call that fails has them copied back, so a failed call
// never loses the buffer's old contents.
//
// Lives on the hook's stack: nothing here allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <cuda.h>

namespace vgpumem::vmm {

struct Unit;

struct OverwriteScope {
  static constexpr std::size_t kRanges = 4;
  static constexpr std::size_t kKept = 8;  // units one call may skip bytes of; more are copied in whole

  struct Range {
    std::uint64_t address = 0, bytes = 0;
    std::uint64_t end() const { return address + bytes; }
  };
  // A unit that came back without some of its bytes, and the host copy that
  // still holds them.
  struct Kept {
    Unit* unit = nullptr;
    void* host = nullptr;
    std::uint64_t host_bytes = 0;  // the buffer's size (the unit's when it was taken)
    std::uint64_t offset = 0, bytes = 0;  // the skipped bytes, from the unit's start
  };

  CUstream stream = nullptr;  // the call's stream, waited for before a failed call's bytes are restored
  bool per_thread = false;
  std::array<Range, kRanges> ranges{};
  std::size_t range_count = 0;
  std::array<Kept, kKept> kept{};
  std::size_t kept_count = 0;

  // Adds a range the call overwrites whole; false when the scope is full
  // (the range is then fetched as any other: never wrong, only slower).
  bool add(std::uint64_t address, std::uint64_t bytes) {
    if (bytes == 0 || range_count == kRanges) return false;
    ranges[range_count++] = Range{address, bytes};
    return true;
  }

  // The largest part of [address, address + bytes) one range covers, empty
  // if none does.
  Range covered(std::uint64_t address, std::uint64_t bytes) const {
    Range best{};
    for (std::size_t i = 0; i < range_count; ++i) {
      const std::uint64_t from = ranges[i].address > address ? ranges[i].address : address;
      const std::uint64_t to = ranges[i].end() < address + bytes ? ranges[i].end() : address + bytes;
      if (to > from && to - from > best.bytes) best = Range{from, to - from};
    }
    return best;
  }

  bool can_keep() const { return kept_count < kKept; }
};

}  // namespace vgpumem::vmm
