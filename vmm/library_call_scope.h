// A library call on this thread (cuBLAS, cuDNN; interpose/ opens one for
// the length of each hooked call): what it is, for the access feed to tag
// the operations it launches with (common/library_op.h; the scheduler reads
// layers and phases from it), and what it overwrites whole before it reads
// any of it: a GEMM's output with beta = 0, a cuBLASLt matmul's D when C is
// another buffer. A unit on the host that one of those ranges covers comes
// back without the covered bytes copied in (Pager::bring_in), since the call
// writes every one of them before anything reads them.
//
// Only the calling thread's launches inside the call see the scope: any
// other thread's launch that legitimately precedes the call in stream order
// was enqueued, and so fetched with a copy, before the call began. The
// skipped bytes' host copy is kept until the call returns (Pager::
// end_library_call): a call that fails has them copied back, so a failed call
// never loses the buffer's old contents.
//
// Lives on the hook's stack: nothing here allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <cuda.h>

#include "common/library_op.h"
#include "vmm/unit.h"

namespace vgpumem::vmm {

struct LibraryCallScope {
  static constexpr std::size_t kRanges = 4;
  // Units one call may skip bytes of; more are copied in whole. An output
  // in pieces (PagerOptions::piece_bytes) is a unit a piece: 64 covers 2 GiB
  // in the default 32 MiB pieces.
  static constexpr std::size_t kKept = 64;

  struct Range {
    std::uint64_t address = 0, bytes = 0;
    std::uint64_t end() const { return address + bytes; }
  };
  // A unit that came back without some of its bytes, and the host copy that
  // still holds them. No member initializers: `kept` is left uninitialized
  // (3 KiB a hooked call would otherwise clear), and only its first
  // `kept_count` entries, each written whole, are ever read.
  struct Kept {
    Unit* unit;
    void* host;
    std::uint64_t host_bytes;  // the buffer's size (the unit's when it was taken)
    std::uint64_t offset, bytes;  // the skipped bytes, from the unit's start
    std::uint64_t read;  // the copy-in stream's read of the parts copied (CopyMarks; 0: none)
  };

  LibraryOp op = LibraryOp::none;
  std::uint64_t serial = 0;   // numbers the process's library calls (set when it opens): tells calls apart
  CUstream stream = nullptr;  // the call's stream, waited for before a failed call's bytes are restored
  bool per_thread = false;
  std::array<Range, kRanges> ranges{};
  std::size_t range_count = 0;
  std::array<Kept, kKept> kept;  // [0, kept_count) written; the rest never read
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

  // Which of `units` (the first 64) the call overwrites whole: every byte the
  // program can read of it is covered (one allocation of the pager's, whose
  // asked-for bytes lie in one range).
  std::uint64_t overwritten_whole(Unit* const* units, std::size_t count) const {
    std::uint64_t mask = 0;
    for (std::size_t i = 0; i < count && i < 64 && range_count > 0; ++i) {
      const Unit& unit = *units[i];
      if (unit.requested == 0) continue;
      const Range part = covered(unit.address, unit.requested);
      if (part.address == unit.address && part.bytes == unit.requested) mask |= std::uint64_t{1} << i;
    }
    return mask;
  }
};

// The scope open on the calling thread, if any (Pager::begin_library_call).
LibraryCallScope* library_call_on_this_thread();

}  // namespace vgpumem::vmm
