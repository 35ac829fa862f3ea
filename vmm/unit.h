// A unit of paging: a granule-aligned range of the arena that moves between
// device and host as a whole. A large allocation is one unit; small ones are
// packed, many to a 2 MiB slab unit.
//
// States (docs/architecture.md, "The unit's states"; Note [Units and slabs], below):
//   resident     mapped on its chunks; usable by streams in `ready_for`,
//                others wait on `ready` first (it is moving in, or its
//                chunks were last read by an offload still in flight)
//   moving_out   transient, under the pager's lock, while it is offloaded
//   on_host      its bytes are in `host`; its range may still be mapped on
//                chunks now owned by others until `saved` completes
//                (`unmap_pending`)
// The launch path reads `state`, `ready_for` and bumps `launching` without a
// lock; everything else is guarded by the pager's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <vector>

#include <cuda.h>

#include "vmm/chunk.h"

// Note [Units and slabs]
// ~~~~~~~~~~~~~~~~~~~~~~
// The paging unit: a 2 MiB-multiple range that moves as a whole.
// An allocation over 1 MiB is a unit of its own (rounded up to 2 MiB);
// smaller ones are packed, 512-byte aligned, into 2 MiB slab units, so a
// 512-byte tensor does not cost 2 MiB (a slab moves with all it holds). A
// freed small allocation's range goes back to its slab, merged with free
// neighbours; the next small allocation takes the first fit, lowest address
// first, so a program that allocates and frees small buffers for hours does
// not grow its slabs. A slab is released when its last allocation goes.

namespace vgpumem::vmm {

enum class Residency : std::uint8_t { resident, moving_out, on_host };

// Why a unit is pinned resident for as long as it lives: something uses it
// that no hook sees (docs/configuration.md, "What is pinned resident").
enum class LifetimePin : std::uint8_t {
  captured = 1,    // work captured into a CUDA graph uses it (the graph replays unseen)
  ipc = 2,         // handed to another process by cuIpcGetMemHandle
  shared = 4,      // the program's cuMemSetAccess gave another device access to its mapping
  exported = 8,    // a handle of the program's exported as a shareable handle (one real handle now)
  graph_node = 16, // a node of a graph built node by node names it (the graph replays unseen)
  dma_buf = 32,    // exported as a dma-buf (cuMemGetHandleForAddressRange): a NIC or device reads its pages unseen
};
inline constexpr int kLifetimePinReasons = 6;

// Where the program mapped one of its own handles (cuMemMap): the unit's
// chunks are mapped there too while it is resident, with the access the
// program granted its own device (cuMemSetAccess) replayed at each remap.
struct Alias {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;      // a multiple of kChunkBytes
  std::uint64_t offset = 0;     // into the handle: a multiple of kChunkBytes
  CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;  // what the program granted its own device
  bool mapped = false;          // on the unit's chunks now
  std::vector<Mapping> runs;     // its mappings, in address order, while mapped
};

struct Unit {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;  // a multiple of kChunkBytes
  int device = 0;
  std::uint32_t ordinal = 0;  // its place in its device's table: stable while the program reuses its buffers
  bool slab = false;
  // A unit of one allocation of the pager's: the bytes the program asked for
  // that lie in it (the rest up to `bytes` is rounding nobody reads). 0 for
  // a slab or a handle of the program's.
  std::uint64_t requested = 0;
  // An allocation made in pieces (PagerOptions::piece_bytes): each piece is
  // a unit of its own, back to back in the arena, moving on its own; but a
  // kernel given a pointer into any of them may read all of them, so
  // whatever names the allocation by a pointer names every piece
  // (Pager::add_whole). `first_piece` leads to the first, `next_piece`
  // chains them in address order. Both null for a unit that is a whole
  // allocation, a slab or a handle. Set before the unit is published in the
  // index; read by the launch path without the lock, as `address` is.
  Unit* first_piece = nullptr;
  Unit* next_piece = nullptr;

  std::atomic<Residency> state{Residency::resident};
  std::atomic<std::uint32_t> launching{0};  // launches between check and enqueue
  std::atomic<std::uint64_t> ready_for{~std::uint64_t{0}};  // stream bits that need not wait on `ready`
  std::atomic<std::uint64_t> used_by{0};    // stream bits that used it since it became resident
  std::atomic<std::uint64_t> last_use{0};   // launch tick, for LRU
  std::atomic<std::uint32_t> tables{0};     // pointer tables registered in it (PointerTables)
  std::atomic<std::uint64_t> grace_stamp{0};  // the stream and operation that last named it (LaunchGrace)
  // Prefetches of it posted to the mover and not yet made (vmm/mover.h): a
  // launch that finds it on the host waits for them rather than fetch it
  // twice. And, on a simulated driver, the mover's clock when it last
  // brought it in, for the first launch after to wait for (0: none).
  std::atomic<std::uint32_t> fetches_queued{0};
  std::atomic<std::uint64_t> mover_arrival_ns{0};

  // Under the pager's lock.
  std::uint32_t pins = 0;              // pinned resident (see Pager::pin)
  std::uint32_t live = 0;              // allocations in it (slabs: many)
  std::map<std::uint64_t, std::uint64_t> holes;  // a slab's free ranges: offset -> bytes, coalesced
  std::vector<Chunk> chunks;
  // The largest block its chunks may come in (ChunkPool::take), 0 for the
  // pool's largest; 1 for a handle of the program's, which the program may
  // map from any of its chunks, and a block maps only from its start.
  std::uint32_t largest_block = 0;
  // Its own range's mappings, one per run of chunks that follow one another
  // in a block: their lengths in chunks, in address order. Kept until the
  // range is unmapped, which may be after the chunks went back (fast mode):
  // the driver unmaps whole mappings only.
  std::vector<Mapping> home_runs;
  // Fast mode, while its range is still mapped after an offload: the chunks
  // it gave back, which still hold its bytes until someone reuses them
  // (Pager::revive).
  std::vector<Chunk> given_back;
  void* host = nullptr;
  // Owned; null when nothing to wait for. Written under the pager's lock;
  // read there, or by a launch that holds the unit resident and orders its
  // stream after the unit's arrival without the lock (Pager::order_unlocked),
  // counted in `ready_readers` for as long as it uses the event, so that
  // set_ready destroys a replaced event only once no such launch uses it.
  std::atomic<CUevent> ready{nullptr};
  std::atomic<std::uint32_t> ready_readers{0};
  CUevent saved = nullptr;             // owned; the offload's completion
  // Owned: the save a revival left running (Pager::revive), which still
  // reads the range; the range is not unmapped before it is done
  // (Pager::unmap_home): an unmap under a copy is a fatal 700 on a GPU.
  CUevent revived_save = nullptr;
  // `ready` and `ready_for` as it went out: a copy bringing it in may still
  // have been landing then. Its save waits for that copy, and a unit
  // revived before its save ends (Pager::revive) takes them back, so that a
  // stream that had not waited for that copy still does. Until its range
  // is unmapped (Pager::finish_unmap), when the save, and so the copy, is
  // done.
  CUevent ready_at_save = nullptr;     // owned
  std::uint64_t ready_for_at_save = 0;
  std::uint64_t save_serial = 0;       // the offload's place among its device's saves (ChunkPool): its last piece's
  std::uint64_t save_first = 0;        // its first piece's (Pager::offload); its pieces are numbered in turn to save_serial
  bool unmap_pending = false;
  bool stale_mapping = false;          // an unmap after its offload was refused: retried before it maps again
  std::atomic<std::uint8_t> lifetime_pins{0};  // LifetimePin bits; any holds one of `pins`
  bool retired = false;                // freed; kept for reuse (a stale lookup may still hold it)
  bool marked = false;                 // scratch for one pass that must count each unit once

  // A handle the program made with cuMemCreate (Pager::create_handle): the
  // unit's own range is the handle's home, and `aliases` are where the program
  // mapped it. `real` is the one driver handle it became when the program
  // exported it (then `chunks` is empty and it never moves).
  CUmemGenericAllocationHandle program_handle = 0;  // the virtual handle, or 0 for the pager's own
  std::vector<Alias> aliases;
  CUmemGenericAllocationHandle real = 0;

  // The address the program knows it by, for logs and traces: its first
  // mapping for a handle of the program's, its own range otherwise.
  std::uint64_t seen_at() const { return aliases.empty() ? address : aliases.front().address; }
  std::uint64_t span_at = 0;  // the address its open residency span was traced at (seen_at() at the offload)
};

// Calls `each` with every unit of `unit`'s allocation: its pieces in
// address order, or `unit` alone if it is not one; stops at the first call
// that returns false, and returns false then.
template <typename Each>
bool for_each_piece(Unit* unit, Each&& each) {
  if (unit->first_piece == nullptr) return each(unit);
  for (Unit* piece = unit->first_piece; piece != nullptr; piece = piece->next_piece) {
    if (!each(piece)) return false;
  }
  return true;
}

}  // namespace vgpumem::vmm
