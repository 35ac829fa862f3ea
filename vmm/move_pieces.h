// The piece a large move is copied in (Pager::offload and fetch), shared
// with the scheduler's model of the copy engines (plan_timing.cpp), which
// must time moves as the pager makes them.
//
// A save of more than one piece goes piece by piece, each numbered among the
// device's saves, and a fetch into the room it makes copies each of its own
// pieces after the save of that piece's chunks alone: in one copy, bringing
// a unit into the room another's save makes waits for the whole save, and
// on a step whose link is busy both ways one engine idles as long as the
// other takes to move the unit. 8 MiB is 150 us of the H100's link, where
// one more copy and event cost a few microseconds of host time.
#pragma once

#include <cstdint>

#include "vmm/chunk_pool.h"

namespace vgpumem::vmm {

inline constexpr std::uint64_t kMovePieceChunks = 4;
inline constexpr std::uint64_t kMovePieceBytes = kMovePieceChunks * kChunkBytes;

}  // namespace vgpumem::vmm
