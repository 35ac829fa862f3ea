// The pager's allocations: admitting one against the host limit, carving
// it from the arena (a unit of its own, pieces of a large one, or a slice of
// a slab for a small one), and freeing it, at once or once the stream or
// graph that frees it reaches the free. (Pager's other parts: pager.cpp.)
#include <algorithm>
#include <utility>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/context_scope.h"
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"
#include "vmm/driver_error.h"

// Note [Paged allocations]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// With a cap and paging on, `cuMemAlloc`, `cuMemAllocPitch`,
// `cuMemAllocAsync` (outside a capture), `cuMemAllocFromPoolAsync` from a
// pool that allows it (Note [Pools the pager serves]) and the program's own `cuMemCreate` handles
// (Note [The program's own virtual memory]) are served by `vmm/Pager` instead of the driver
// (a `cuMemFreeAsync` records an event on its stream, and the room comes back
// once that event is reached); everything else keeps going to the driver and
// is charged as before. The pieces, one file each:

// Note [Allocations in pieces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A unit moves whole. With `VGPUMEM_PIECE_BYTES` (32 MiB by default under
// auto, off under the other policies; docs/configuration.md#vgpumem_piece_bytes),
// an allocation larger than that size is made in pieces, so that a plan can
// send some of a large buffer away and keep the rest. The model said pieces
// of 4 MiB at the bench's scale (32 MiB at full size) would bring every
// ResNet-50 cell of the bench within 1.10 of its floor, and the bench agrees (docs/journal/2026-11-26-benchmarks.md#moving-part-of-a-unit-what-the-model-says-2026-11-26-night;
// `vgpumem simulate --pieces`); the bench's `--pieces` measures it.
//
// * Pieces are units (`Pager::new_pieces`). The allocation's range is
//   taken from the arena at once and made as several units back to back,
//   each a whole number of chunks, each with its own residency, events, host
//   copy and place in the victim order and the plan. Nothing that moves
//   memory learns a new state: offload, fetch, revive, the strict and torture
//   orders and the reclaimer work on a piece exactly as on a unit. Each piece
//   is pinned while the next is made, so an allocation whose pieces cannot be
//   resident at once is refused when it is made, as a whole one is, and a
//   piece never pushes out an earlier one. `Unit::first_piece` and
//   `Unit::next_piece` link them, set before the index publishes them.
// * An allocation is named whole. A kernel given a pointer into an
//   allocation may read any byte of it, so every place that turns a pointer
//   into units takes every piece (`Pager::add_whole`, `for_each_piece`):
//   launch words, the targets of pointer tables, tensor maps, the lifetime
//   pins (IPC, capture, peer access, dma-buf, graph nodes) and a texture's
//   pin. A word that points into a table asks whether any piece holds one,
//   since a table may start in the piece before the one the word lands in.
//   Copies and memsets name the exact range they touch
//   (`add_named_by_range(..., Extent::exact)`), so they bring back only the
//   pieces they cover. Frees, `cuMemGetAddressRange` and the pointer
//   attributes answer for the allocation from the allocation table, as
//   before; a free releases every piece, wherever each is.
// * Where a wrong byte could come from, and the test that breaks first
//   for each (`tests/paging/pieces_test.cpp`; each was run with its rule
//   broken and failed): a word into piece 0 of an allocation on the host
//   (under torture, pieces 1 to 3 are unmapped unless named); a pointer table
//   that starts in piece 0, reached through a word into piece 1; a library
//   call's overwrite range that covers some pieces whole and two in part
//   (`copy_in_except` skips bytes relative to each piece; a failed call gets
//   them back); a free while one piece is on its way in and another on its
//   way out; a pin by address. End to end, the small CNN in pieces under
//   auto, lru and torture (`PagingLayered.SmallCnnInPiecesIs...`): every bit
//   as uncapped, no illegal access; with pieces not named whole it fails.
// * The profile needs nothing new: the feed hears of every piece an
//   operation names, so each operation touching the allocation touches each
//   piece, as `--pieces` modelled it; the planner takes pieces as it takes
//   units.
// * What it costs: more units (a 50 MiB map is 13 of 4 MiB), so more
//   events, more entries in the launch path's `Access` (its fixed part of 32
//   spills sooner), and copies of 4 MiB, whose per-copy cost on the real link
//   is a GPU measurement still owed.

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kAllocationAlignment = 512;
constexpr std::uint64_t kMinimumArenaBytes = std::uint64_t{4} << 30;

std::uint64_t round_up(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

}  // namespace

// With a host limit, what is stored must leave room to swap: bringing a unit
// back offloads others into free host memory before its own host copy is
// free, so the largest unit's worth of host memory is kept in reserve.
bool Pager::admits(int device, std::uint64_t bytes) const {
  if (!options_.host_limit) return true;
  const std::uint64_t cap = ledger_.cap(device);
  if (cap == kUncapped) return true;
  const std::uint64_t room = cap + *options_.host_limit;
  return stored_bytes_ + bytes + std::max(largest_unit_, bytes) <= room;
}

// admits(), or false with the refusal logged and counted as out of memory.
bool Pager::admit_or_refuse(int device, std::uint64_t bytes) {
  if (admits(device, bytes)) return true;
  VGPUMEM_LOG_INFO("paged allocation of {} refused: the cap and VGPUMEM_HOST_LIMIT hold {} already",
                   format_bytes(bytes), format_bytes(stored_bytes_));
  ooms_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

Unit* Pager::new_unit(int device, std::uint64_t bytes, bool slab, std::uint32_t largest_block) {
  if (!admit_or_refuse(device, bytes)) return nullptr;
  const std::optional<std::uint64_t> address = arena_.take(bytes);
  if (!address) return nullptr;
  Unit* unit = new_unit_at(device, *address, bytes, slab, largest_block);
  if (unit == nullptr) arena_.give_back(*address, bytes);
  return unit;
}

// A unit over [address, address + bytes) of the arena, taken by the caller
// (and given back by it when this fails), resident on new chunks.
Unit* Pager::new_unit_at(int device, std::uint64_t address, std::uint64_t bytes, bool slab,
                         std::uint32_t largest_block) {
  DeviceState& state = device_state(device);
  Unit* unit = nullptr;
  for (const auto& candidate : state.units) {
    if (candidate->retired && candidate->launching.load() == 0) {
      unit = candidate.get();
      break;
    }
  }
  if (unit == nullptr) {
    state.units.push_back(std::make_unique<Unit>());
    unit = state.units.back().get();
    unit->ordinal = static_cast<std::uint32_t>(state.units.size() - 1);
  }
  unit->address = address;
  unit->bytes = bytes;
  unit->device = device;
  unit->slab = slab;
  unit->largest_block = largest_block;
  unit->requested = 0;
  // Written only where it changes: the launch path reads these unlocked,
  // and a unit that never was a piece is never written.
  if (unit->first_piece != nullptr) unit->first_piece = nullptr;
  if (unit->next_piece != nullptr) unit->next_piece = nullptr;
  unit->pins = 0;
  unit->lifetime_pins.store(0);
  unit->live = 0;
  unit->holes.clear();
  if (slab) unit->holes.emplace(0, bytes);
  unit->retired = false;
  unit->used_by.store(0);
  unit->last_use.store(tick_at(tick_.load(), 0));  // as if used at the start of this window
  if (take_chunks(state, bytes / kChunkBytes, unit, &unit->chunks) != CUDA_SUCCESS || map_chunks(unit) != CUDA_SUCCESS) {
    return_chunks(state, &unit->chunks);
    unit->retired = true;
    return nullptr;
  }
  // Chunks freed by an offload still in flight: the first user waits for it.
  CUevent ready = nullptr;
  if (!saved_units_.empty() && record_on_copy_stream(state, &ready) != CUDA_SUCCESS) drain_copy_stream(state);
  set_ready(unit, ready);
  state.resident_bytes += bytes;
  trace_resident(device, state);
  stored_bytes_ += bytes;
  largest_unit_ = std::max(largest_unit_, bytes);
  unit->state.store(Residency::resident);
  index_.assign(unit->address, bytes, unit);
  return unit;
}

// The arena: as large as the process allows, a quarter as much each time
// the driver refuses.
CUresult Pager::reserve_arena() {
  CUdeviceptr base = 0;
  CUresult result = CUDA_ERROR_OUT_OF_MEMORY;
  std::uint64_t bytes = options_.arena_bytes;
  for (; bytes >= kMinimumArenaBytes; bytes /= 4) {
    if ((result = driver_.address_reserve(&base, bytes, kChunkBytes, 0, 0)) == CUDA_SUCCESS) break;
  }
  if (result != CUDA_SUCCESS) {
    VGPUMEM_LOG_ERROR("cannot reserve address space for paged allocations (tried {} down to {}): error {}",
                      format_bytes(options_.arena_bytes), format_bytes(kMinimumArenaBytes), driver_error(result));
    return result;
  }
  if (bytes != options_.arena_bytes) {
    VGPUMEM_LOG_INFO("paged allocations get {} of address space ({} was refused)", format_bytes(bytes),
                     format_bytes(options_.arena_bytes));
  }
  arena_.cover(base, bytes);
  index_.cover(base, bytes);
  arena_ready_ = true;
  return CUDA_SUCCESS;
}

// The arena, and the device's copy stream and context, on its first use.
CUresult Pager::ready_device(int device) {
  if (!arena_ready_) {
    if (const CUresult result = reserve_arena(); result != CUDA_SUCCESS) return result;
  }
  DeviceState& state = device_state(device);
  if (state.copy_stream != nullptr && state.to_device_stream != nullptr) return CUDA_SUCCESS;
  // The device's primary context, whatever context the caller has current
  // (a pool of device 1 used with device 0 current, a thread with none):
  // the pager's copy stream, events and chunks live there, and it outlives
  // any context the program creates and destroys.
  if (state.context == nullptr &&
      (driver_.primary_context_retain == nullptr ||
       driver_.primary_context_retain(&state.context, device) != CUDA_SUCCESS)) {
    state.context = nullptr;
    if (driver_.context_get_current != nullptr) driver_.context_get_current(&state.context);
  }
  ContextScope in(driver_, state.context);
  for (CUstream* stream : {&state.copy_stream, &state.to_device_stream}) {
    if (*stream != nullptr) continue;
    if (const CUresult result = driver_.stream_create(stream, CU_STREAM_NON_BLOCKING); result != CUDA_SUCCESS) {
      *stream = nullptr;
      return result;
    }
  }
  return CUDA_SUCCESS;
}

CUresult Pager::allocate(int device, std::uint64_t bytes, CUdeviceptr* out) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  if (const CUresult result = ready_device(device); result != CUDA_SUCCESS) return result;
  DeviceState& state = device_state(device);
  ContextScope in(driver_, state.context);
  reap_saved_units(false);
  Unit* unit = nullptr;
  std::uint64_t address = 0;
  if (bytes <= options_.slab_max_bytes) {
    const std::uint64_t size = round_up(bytes, kAllocationAlignment);
    std::uint64_t offset = 0;
    unit = carve_from_slabs(state, size, &offset);
    if (unit == nullptr) {
      Unit* slab = new_unit(device, kChunkBytes, true);
      if (slab == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
      state.slabs_with_room.emplace(slab->address, slab);
      unit = carve_from_slabs(state, size, &offset);
    }
    address = unit->address + offset;
  } else if (options_.piece_bytes != 0 && bytes > options_.piece_bytes) {
    unit = new_pieces(device, round_up(bytes, kChunkBytes), bytes);
    if (unit == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    address = unit->address;
  } else {
    unit = new_unit(device, round_up(bytes, kChunkBytes), false);
    if (unit == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    address = unit->address;
    unit->requested = bytes;
  }
  if (unit->first_piece == nullptr) ++unit->live;  // each piece holds its one allocation already
  allocations_[address] = AllocationInfo{unit, bytes, false, next_serial_++};
  *out = address;
  return CUDA_SUCCESS;
}

// Each piece is made resident while the ones before it are pinned, so the
// allocation is refused here, as a whole one would be, when it cannot be
// resident at once (a kernel needs every piece together), and a piece made
// later never offloads an earlier one. Linked only once all are made: the
// index lookups that follow the links see whole chains.
Unit* Pager::new_pieces(int device, std::uint64_t rounded, std::uint64_t requested) {
  if (!admit_or_refuse(device, rounded)) return nullptr;
  const std::optional<std::uint64_t> address = arena_.take(rounded);
  if (!address) return nullptr;
  std::vector<Unit*> pieces;
  for (std::uint64_t offset = 0; offset < rounded; offset += options_.piece_bytes) {
    const std::uint64_t bytes = std::min(options_.piece_bytes, rounded - offset);
    Unit* piece = new_unit_at(device, *address + offset, bytes, false);
    if (piece == nullptr) break;
    piece->requested = std::min(bytes, requested - offset);
    piece->live = 1;
    ++piece->pins;
    pieces.push_back(piece);
  }
  for (Unit* piece : pieces) --piece->pins;
  const bool made = !pieces.empty() && pieces.back()->address + pieces.back()->bytes == *address + rounded;
  if (!made) {
    for (Unit* piece : pieces) {
      release_unit(piece);  // gives its range back
    }
    const std::uint64_t made_bytes = pieces.empty() ? 0 : pieces.back()->address + pieces.back()->bytes - *address;
    arena_.give_back(*address + made_bytes, rounded - made_bytes);
    return nullptr;
  }
  ++allocations_in_pieces_;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    pieces[i]->first_piece = pieces.front();
    pieces[i]->next_piece = i + 1 < pieces.size() ? pieces[i + 1] : nullptr;
  }
  return pieces.front();
}

void Pager::release_unit(Unit* unit) {
  DeviceState& state = device_state(unit->device);
  ContextScope in(driver_, state.context);
  unmap_now(unit);
  // A copy bringing it in may still be writing its chunks: they are reused next.
  if (unit->ready != nullptr) driver_.event_synchronize(unit->ready);
  if (unit->real != 0) {  // a handle the program exported: one real allocation, charged as itself
    counted_call(&host_path_, DriverWork::vmm, [&] { return driver_.unmap(unit->address, unit->bytes); });
    unmap_aliases(unit);
    counted_call(&host_path_, DriverWork::vmm, [&] { return driver_.release(unit->real); });
    ledger_.refund(unit->device, unit->bytes);
    unit->real = 0;
    state.resident_bytes -= unit->bytes;
    trace_resident(unit->device, state);
  } else if (unit->state.load() == Residency::resident) {
    unmap_home(unit);
    unmap_aliases(unit);
    return_chunks(state, &unit->chunks);
    state.resident_bytes -= unit->bytes;
    trace_resident(unit->device, state);
  } else if (unit->host != nullptr) {
    observer_.moved(unit->device, unit->span_at, unit->bytes, false);  // ends its span
    host_.give_back(unit->host, unit->bytes);
    unit->host = nullptr;
  }
  set_ready(unit, nullptr);
  stored_bytes_ -= unit->bytes;
  index_.assign(unit->address, unit->bytes, nullptr);
  arena_.give_back(unit->address, unit->bytes);
  state.slabs_with_room.erase(unit->address);
  unit->holes.clear();
  for (const Alias& alias : unit->aliases) index_.assign(alias.address, alias.bytes, nullptr);
  unit->aliases.clear();
  unit->program_handle = 0;
  const std::uint8_t lifetime_pins = unit->lifetime_pins.exchange(0);
  for (int reason = 0; reason < kLifetimePinReasons; ++reason) {
    if ((lifetime_pins >> reason) & 1) lifetime_pinned_bytes_[reason].fetch_sub(unit->bytes, std::memory_order_relaxed);
  }
  unit->state.store(Residency::on_host);
  unit->retired = true;
}

// The live allocation starting at `address`, or end() if none (inside a
// paged range but not an allocation's start, or freed already).
std::map<std::uint64_t, Pager::AllocationInfo>::iterator Pager::live_allocation(CUdeviceptr address) {
  auto it = allocations_.find(address);
  return it != allocations_.end() && it->second.freeing ? allocations_.end() : it;
}

bool Pager::allocation_range(std::uint64_t address, std::uint64_t* start, std::uint64_t* bytes) const {
  if (index_.lookup(address) == nullptr) return false;
  MutexLock lock(mutex_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return false;
  --it;
  if (it->second.freeing || address >= it->first + std::max<std::uint64_t>(it->second.bytes, 1)) return false;
  *start = it->first;
  *bytes = it->second.bytes;
  return true;
}

bool Pager::free(CUdeviceptr address, CUresult* result) {
  if (index_.lookup(address) == nullptr) return false;
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  auto it = live_allocation(address);
  if (it == allocations_.end()) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  reap_freed_allocations();  // frees a graph has reached, or owed since a capture closed
  if (capture_open()) {
    // Synchronising now would end the program's capture: the memory is
    // released once no capture is open (reap_freed_allocations).
    it->second.freeing = true;
    frees_after_capture_.push_back(address);
    *result = CUDA_SUCCESS;
    return true;
  }
  // cuMemFree synchronises: the work that may still use the memory is done.
  if ((*result = wait_for_program_work(it->second.unit->device)) != CUDA_SUCCESS) return true;
  release_allocation(it);
  return true;
}

void Pager::release_allocation(std::map<std::uint64_t, AllocationInfo>::iterator it) {
  Unit* unit = it->second.unit;
  const std::uint64_t offset = it->first - unit->address;
  const std::uint64_t size = round_up(it->second.bytes, kAllocationAlignment);
  tables_.overwritten(it->first, size);  // tables in it name nothing now
  allocations_.erase(it);
  if (unit->first_piece != nullptr) {
    release_pieces(unit);
  } else if (--unit->live == 0) {
    release_unit(unit);
  } else if (unit->slab) {
    return_to_slab(device_state(unit->device), unit, offset, size);
  }
}

void Pager::release_pieces(Unit* first) {
  for (Unit* piece = first; piece != nullptr;) {
    Unit* next = piece->next_piece;
    piece->live = 0;
    release_unit(piece);
    piece = next;
  }
}

// First fit over the slabs that have room, lowest address first; the slab,
// and the allocation's offset in it, or nullptr.
Unit* Pager::carve_from_slabs(DeviceState& state, std::uint64_t size, std::uint64_t* offset) {
  for (auto slab_it = state.slabs_with_room.begin(); slab_it != state.slabs_with_room.end(); ++slab_it) {
    Unit* slab = slab_it->second;
    for (auto hole = slab->holes.begin(); hole != slab->holes.end(); ++hole) {
      if (hole->second < size) continue;
      *offset = hole->first;
      const std::uint64_t left = hole->second - size;
      slab->holes.erase(hole);
      if (left > 0) slab->holes.emplace(*offset + size, left);
      if (slab->holes.empty()) state.slabs_with_room.erase(slab_it);
      return slab;
    }
  }
  return nullptr;
}

// A freed allocation's range goes back to its slab, merged with its
// neighbours, for the next small allocation to reuse.
void Pager::return_to_slab(DeviceState& state, Unit* slab, std::uint64_t offset, std::uint64_t size) {
  auto next = slab->holes.lower_bound(offset);
  if (next != slab->holes.end() && next->first == offset + size) {
    size += next->second;
    next = slab->holes.erase(next);
  }
  if (next != slab->holes.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += size;
      state.slabs_with_room.emplace(slab->address, slab);
      return;
    }
  }
  slab->holes.emplace(offset, size);
  state.slabs_with_room.emplace(slab->address, slab);
}

bool Pager::free_async(CUdeviceptr address, CUstream stream, bool per_thread, CUresult* result) {
  if (index_.lookup(address) == nullptr) return false;
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  auto it = live_allocation(address);
  if (it == allocations_.end()) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  const CUstream named = canonical(stream, per_thread);
  if (capture_open() && capturing(named)) {
    // On a capturing stream the free happens when the graph runs: an event
    // recorded here would only be captured (and a query of it answers
    // "done" at once). A host node in the graph says when it is reached.
    std::unique_ptr<GraphFree> note(new GraphFree{this, address, it->second.serial});  // kept as long as the pager
    if ((*result = driver_.launch_host_function(named, &Pager::graph_reached_free, note.get())) != CUDA_SUCCESS) {
      return true;
    }
    graph_free_notes_.push_back(std::move(note));
    it->second.freeing = true;
    return true;
  }
  CUevent done = nullptr;
  if ((*result = driver_.event_create(&done, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) return true;
  if ((*result = driver_.event_record(done, named)) != CUDA_SUCCESS) {
    driver_.event_destroy(done);
    return true;
  }
  it->second.freeing = true;
  pending_frees_.push_back(PendingFree{address, done});
  reap_freed_allocations();
  return true;
}

void Pager::reap_freed_allocations() {
  auto reached = [&](const PendingFree& pending) REQUIRES(mutex_) {
    if (driver_.event_query(pending.done) != CUDA_SUCCESS) return false;
    driver_.event_destroy(pending.done);
    if (auto it = allocations_.find(pending.address); it != allocations_.end()) release_allocation(it);
    return true;
  };
  pending_frees_.erase(std::remove_if(pending_frees_.begin(), pending_frees_.end(), reached), pending_frees_.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> graph_frees;
  {
    MutexLock lock(graph_frees_mutex_);
    graph_frees.swap(graph_frees_reached_);
  }
  for (const auto& [address, serial] : graph_frees) {
    // The graph ran past its free node: nothing of its own uses the memory.
    if (auto it = allocations_.find(address); it != allocations_.end() && it->second.serial == serial) {
      release_allocation(it);
    }
  }
  if (!frees_after_capture_.empty() && !capture_open()) {
    std::vector<std::uint64_t> frees;
    frees.swap(frees_after_capture_);
    for (std::uint64_t address : frees) {
      auto it = allocations_.find(address);
      if (it == allocations_.end()) continue;
      wait_for_program_work(it->second.unit->device);  // cuMemFree's own wait, owed since the capture
      release_allocation(it);
    }
  }
}

void CUDA_CB Pager::graph_reached_free(void* note) {
  auto* free = static_cast<GraphFree*>(note);
  if (free->reached.exchange(true)) return;  // a later launch of the same graph
  MutexLock lock(free->pager->graph_frees_mutex_);
  free->pager->graph_frees_reached_.emplace_back(free->address, free->serial);
}

}  // namespace vgpumem::vmm
