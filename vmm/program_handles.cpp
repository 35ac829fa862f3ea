// The program's own virtual memory, paged: handles it makes with cuMemCreate
// and maps with cuMemMap into reservations of its own (PyTorch's expandable
// segments, and any allocator built the same way).
//
// Each such handle is a virtual one the driver never sees: a unit with a home
// range in the arena, moved to the host and back like any paged allocation.
// Wherever the program maps the handle (an Alias), the unit's chunks are
// mapped too while it is resident, with the access the program granted its
// own device replayed at each remap; the granule index covers the program's
// reservations, so launches and copies that name an alias address make the
// unit resident first. What cannot be paged is pinned: a mapping another
// device was given access to (LifetimePin::shared), and a handle the program
// exports, which becomes one real driver allocation (materialize()).
#include <algorithm>
#include <thread>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/pager.h"
#include "vmm/context_scope.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"
#include "vmm/driver_error.h"

// Note [The program's own virtual memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The program's own virtual memory (`vmm/program_handles.cpp`): an
// allocator built on `cuMemCreate`/`cuMemMap` — PyTorch's expandable segments,
// or any that maps handles into reservations of its own — is paged too. A
// handle the program creates on a capped device (plain device memory, whole
// 2 MiB granules) is *virtual*: a tagged value (`0xF1A0…`) the driver never
// sees, standing for a unit like any other, with a home range in the arena
// where the pager maps its chunks and copies from. Each `cuMemMap` of it is an
// *alias*: while the unit is resident its chunks are mapped there too (a
// physical allocation may be mapped at several addresses), with the access the
// program granted its own device replayed at each remap; when it is offloaded
// the aliases are unmapped with the home range, after the copy. The granule
// index covers each reservation of the program's (`cuMemAddressReserve`, up
// to 64 of them, each up to 2 TiB) as well as the arena, so a launch, copy or
// upload that names an alias address finds the unit exactly as it would a
// `cuMemAlloc` pointer; a lookup that misses the arena tests the program's
// reservations in turn. `cuMemUnmap` and `cuMemSetAccess` over a reservation
// are split: the pager's aliases are its own to unmap or grant (a partial
// unmap of one is `CUDA_ERROR_INVALID_VALUE`, as the driver says), and the
// stretches between them go to the driver unchanged. A handle lives while the
// program holds a reference (`cuMemCreate`, `cuMemRetainAllocationHandle`) or
// a mapping, as the driver's does. The queries answer for the program's view:
// `cuMemGetAccess` on an offloaded alias returns the access the program
// granted (replayed at each remap), and on a paged `cuMemAlloc` address both
// it and `cuMemRetainAllocationHandle` answer what the driver answers for
// `cuMemAlloc` memory (`Pager::kAllocatedMemoryQueryAnswer`), since a handle
// of the pager's chunks would name memory the next offload hands to another
// unit.
//
// Three things the scanner cannot follow pin such memory. *Neighbours*: a
// mapping right next to another (back to back in one reservation) may hold
// one buffer spanning both, and a kernel handed a pointer into the first
// reaches into the second; both stay resident while they touch, and page
// again once apart. *Other devices*: a `cuMemSetAccess` that grants another
// device access pins the unit for life. *Export*: `cuMemExportToShareableHandle`
// needs the driver's own handle with the program's requested handle types, so
// the unit is *materialised*: its bytes go to the host, its chunks back to the
// pool and out of the cap, one real allocation of the program's properties is
// charged and mapped at home and at every alias, and the bytes come back; it
// is pinned for life (a handle mapped where the index does not reach is
// materialised the same way). PyTorch grows its segments handle by handle,
// back to back, so under expandable segments its memory is capped and backed
// by the pager's chunks but mostly pinned: the runtime says so at start.

namespace vgpumem::vmm {
namespace {

CUmemAccessDesc own_device_access(int device, CUmemAccess_flags flags) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = flags;
  return access;
}

bool chunk_aligned(std::uint64_t value) { return value % kChunkBytes == 0; }

}  // namespace

bool Pager::pageable_handle(std::uint64_t bytes, const CUmemAllocationProp& prop, unsigned long long flags) {
  return flags == 0 && bytes > 0 && chunk_aligned(bytes) && prop.type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop.win32HandleMetaData == nullptr &&
         prop.allocFlags.compressionType == 0 && prop.allocFlags.gpuDirectRDMACapable == 0 &&
         prop.allocFlags.usage == 0;
}

Pager::ProgramHandle* Pager::program_handle(CUmemGenericAllocationHandle handle) {
  auto it = handles_.find(handle);
  return it == handles_.end() ? nullptr : &it->second;
}

CUresult Pager::create_handle(int device, std::uint64_t bytes, const CUmemAllocationProp& prop,
                              CUmemGenericAllocationHandle* out) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  if (const CUresult result = ready_device(device); result != CUDA_SUCCESS) return result;
  ContextScope in(driver_, device_state(device).context);
  reap_saved_units(false);
  // In 2 MiB blocks: the program may map it from any of its chunks (a block
  // maps only from its start).
  Unit* unit = new_unit(device, bytes, false, 1);
  if (unit == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUmemGenericAllocationHandle handle = kVirtualHandleTag | next_handle_++;
  unit->program_handle = handle;
  handles_.emplace(handle, ProgramHandle{unit, prop, 1});
  *out = handle;
  return CUDA_SUCCESS;
}

// A handle's memory lives while the program holds a reference or a mapping
// (as the driver's does).
void Pager::release_handle_if_unused(CUmemGenericAllocationHandle handle) {
  auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.references > 0 || !it->second.unit->aliases.empty()) return;
  Unit* unit = it->second.unit;
  handles_.erase(it);
  release_unit(unit);
}

CUresult Pager::release_handle(CUmemGenericAllocationHandle handle) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  ProgramHandle* program = program_handle(handle);
  if (program == nullptr || program->references == 0) return CUDA_ERROR_INVALID_VALUE;
  --program->references;
  release_handle_if_unused(handle);
  return CUDA_SUCCESS;
}

bool Pager::retain_handle(std::uint64_t address, CUmemGenericAllocationHandle* out) {
  if (!index_.in_extra_range(address) || index_.lookup(address) == nullptr) return false;
  MutexLock lock(mutex_);
  const Unit* unit = index_.lookup(address);
  ProgramHandle* program = unit == nullptr ? nullptr : program_handle(unit->program_handle);
  if (program == nullptr) return false;
  ++program->references;
  *out = unit->program_handle;
  return true;
}

CUresult Pager::handle_properties(CUmemGenericAllocationHandle handle, CUmemAllocationProp* prop) const {
  MutexLock lock(mutex_);
  auto it = handles_.find(handle);
  if (it == handles_.end() || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  return CUDA_SUCCESS;
}

std::optional<unsigned long long> Pager::program_access(std::uint64_t address, const CUmemLocation& location) const {
  if (!index_.in_extra_range(address)) return std::nullopt;
  MutexLock lock(mutex_);
  const Unit* unit = index_.lookup(address);
  if (unit == nullptr) return std::nullopt;
  for (const Alias& alias : unit->aliases) {
    if (address - alias.address >= alias.bytes) continue;
    if (alias.mapped) return std::nullopt;
    // Only the program's own device can have been granted access to an
    // offloaded alias: a grant to another pins the unit resident for good.
    const bool own = location.type == CU_MEM_LOCATION_TYPE_DEVICE && location.id == unit->device;
    return own ? alias.access : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
  return std::nullopt;
}

void Pager::program_reserved(std::uint64_t base, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  if (!index_.cover_more(base, bytes)) {
    VGPUMEM_LOG_INFO("the reservation of {} at {:#x} is not paged (the index covers {} reservations of up to {}): "
                     "handles mapped there become real allocations, pinned resident",
                     format_bytes(bytes), base, GranuleIndex::kMaxExtraRanges,
                     format_bytes(GranuleIndex::kMaxExtraBytes));
  }
}

CUresult Pager::free_program_reservation(std::uint64_t base, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  // The driver refuses to free a reservation with mappings in it; an alias of
  // a unit on the host is not mapped there, so the pager checks for it.
  if (holds_any(base, bytes)) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = driver_.address_free(base, bytes);
  if (result == CUDA_SUCCESS) index_.uncover(base);
  return result;
}

// ---- mapping -------------------------------------------------------------------------------

CUresult Pager::map_alias(const Unit* unit, Alias& alias) {
  const std::size_t first = alias.offset / kChunkBytes, count = alias.bytes / kChunkBytes;
  alias.runs.clear();
  if (const CUresult result = map_runs(unit->device, alias.address, unit->chunks.data() + first, count, &alias.runs);
      result != CUDA_SUCCESS) {
    unmap_runs(unit->device, alias.address, &alias.runs);
    return result;
  }
  alias.mapped = true;
  if (alias.access == CU_MEM_ACCESS_FLAGS_PROT_NONE) return CUDA_SUCCESS;  // not granted yet: as the program left it
  const CUmemAccessDesc access = own_device_access(unit->device, alias.access);
  return counted_call(&host_path_, DriverWork::vmm,
                      [&] { return driver_.set_access(alias.address, alias.bytes, &access, 1); });
}

CUresult Pager::map_aliases(Unit* unit) {
  for (Alias& alias : unit->aliases) {
    if (alias.mapped) continue;
    if (const CUresult result = map_alias(unit, alias); result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}

bool Pager::unmap_alias(const Unit* unit, Alias& alias) {
  if (!alias.mapped) return true;
  const bool unmapped = unit->real != 0 ? driver_.unmap(alias.address, alias.bytes) == CUDA_SUCCESS  // the real handle
                                        : unmap_runs(unit->device, alias.address, &alias.runs);
  alias.mapped = !unmapped;
  return unmapped;
}

bool Pager::unmap_aliases(Unit* unit) {
  bool unmapped = true;
  for (Alias& alias : unit->aliases) unmapped = unmap_alias(unit, alias) && unmapped;
  return unmapped;
}

bool Pager::holds_any(std::uint64_t address, std::uint64_t bytes) const {
  for (std::uint64_t at = address & ~(kChunkBytes - 1); at < address + bytes; at += kChunkBytes) {
    if (index_.lookup(at) != nullptr) return true;
  }
  return false;
}

CUresult Pager::map_handle(std::uint64_t address, std::uint64_t bytes, std::uint64_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags) {
  UniqueMutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  ProgramHandle* program = program_handle(handle);
  if (program == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Unit* unit = program->unit;
  if (bytes == 0 || offset > unit->bytes || bytes > unit->bytes - offset) return CUDA_ERROR_INVALID_VALUE;
  if (holds_any(address, bytes)) return CUDA_ERROR_INVALID_VALUE;  // over a mapping, as the driver says
  const bool indexed = index_.in_extra_range(address) && index_.in_extra_range(address + bytes - 1);
  const bool pageable = flags == 0 && chunk_aligned(address) && chunk_aligned(bytes) && chunk_aligned(offset) && indexed;
  if (!pageable && unit->real == 0) {
    // Mapped where the pager cannot follow it: one real allocation from now on.
    if (const CUresult result = materialize(unit, program->prop, lock); result != CUDA_SUCCESS) return result;
    // The lock was let go while launches holding the unit finished.
    if (program_handle(handle) != program || holds_any(address, bytes)) return CUDA_ERROR_INVALID_VALUE;
  }
  Alias alias{address, bytes, offset, CU_MEM_ACCESS_FLAGS_PROT_NONE, false, {}};
  // Next to another mapping: both stay resident while they touch (the
  // header says why), brought in first so they are mapped now.
  Unit* left = alias_ending_at(address);
  Unit* right = alias_starting_at(address + bytes);
  const std::uint32_t neighbours = (left != nullptr) + (right != nullptr) + foreign_ends_at(address) +
                                   foreign_starts_at(address + bytes);
  // Each is pinned as soon as it is resident, so that bringing the next one
  // in cannot push it out again.
  if (neighbours > 0 && unit->real == 0) {
    if (const CUresult result = make_resident_now(unit); result != CUDA_SUCCESS) return result;
  }
  unit->pins += neighbours;
  adjacent_pinned_ += neighbours;
  if (left != nullptr) {
    if (const CUresult result = pin_as_neighbour(left); result != CUDA_SUCCESS) {
      drop_neighbour_pins(unit, neighbours);
      return result;
    }
  }
  if (right != nullptr) {
    if (const CUresult result = pin_as_neighbour(right); result != CUDA_SUCCESS) {
      drop_neighbour_pins(unit, neighbours);
      if (left != nullptr) drop_neighbour_pins(left, 1);
      return result;
    }
  }
  if (unit->real != 0) {
    const CUresult result = driver_.map(address, bytes, offset, unit->real, flags);
    if (result != CUDA_SUCCESS) {
      unpin_neighbours(unit, alias);
      return result;
    }
    alias.mapped = true;
    if (!indexed) return CUDA_SUCCESS;  // the program unmaps it with the driver, unseen: not an alias
  } else if (unit->state.load() == Residency::resident) {
    if (const CUresult result = map_alias(unit, alias); result != CUDA_SUCCESS) {
      unpin_neighbours(unit, alias);
      return result;
    }
  }
  unit->aliases.push_back(alias);
  index_.assign(address, bytes, unit);
  return CUDA_SUCCESS;
}

// ---- neighbours ----------------------------------------------------------------------------

Unit* Pager::alias_ending_at(std::uint64_t address) const {
  Unit* unit = index_.lookup(address - 1);
  if (unit == nullptr || unit->program_handle == 0) return nullptr;
  for (const Alias& alias : unit->aliases) {
    if (alias.address + alias.bytes == address) return unit;
  }
  return nullptr;
}

Unit* Pager::alias_starting_at(std::uint64_t address) const {
  Unit* unit = index_.lookup(address);
  if (unit == nullptr || unit->program_handle == 0) return nullptr;
  for (const Alias& alias : unit->aliases) {
    if (alias.address == address) return unit;
  }
  return nullptr;
}

bool Pager::foreign_starts_at(std::uint64_t address) const { return foreign_mappings_.count(address) != 0; }

bool Pager::foreign_ends_at(std::uint64_t address) const {
  auto it = foreign_mappings_.lower_bound(address);
  if (it == foreign_mappings_.begin()) return false;
  --it;
  return it->first + it->second == address;
}

CUresult Pager::pin_as_neighbour(Unit* unit) {
  if (unit->real == 0) {
    if (const CUresult result = make_resident_now(unit); result != CUDA_SUCCESS) return result;
  }
  ++unit->pins;
  ++adjacent_pinned_;
  return CUDA_SUCCESS;
}

void Pager::drop_neighbour_pins(Unit* unit, std::uint32_t count) {
  unit->pins -= std::min(unit->pins, count);
  adjacent_pinned_ -= count;
}

// `alias` of `unit` goes (or never came): the pins it and its neighbours
// took for touching each other go with it.
void Pager::unpin_neighbours(Unit* unit, const Alias& alias) {
  std::uint32_t neighbours = foreign_ends_at(alias.address) + foreign_starts_at(alias.address + alias.bytes);
  for (Unit* neighbour : {alias_ending_at(alias.address), alias_starting_at(alias.address + alias.bytes)}) {
    if (neighbour == nullptr) continue;
    drop_neighbour_pins(neighbour, 1);
    ++neighbours;
  }
  drop_neighbour_pins(unit, neighbours);
}

void Pager::note_foreign_mapping(std::uint64_t address, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  for (Unit* neighbour : {alias_ending_at(address), alias_starting_at(address + bytes)}) {
    if (neighbour != nullptr) pin_as_neighbour(neighbour);
  }
  foreign_mappings_[address] = bytes;
}

// Forgets the foreign mappings in a range the program unmapped, and the
// pins they gave their neighbours.
void Pager::forget_foreign_mappings(std::uint64_t start, std::uint64_t bytes) {
  for (auto it = foreign_mappings_.lower_bound(start); it != foreign_mappings_.end() && it->first < start + bytes;) {
    for (Unit* neighbour : {alias_ending_at(it->first), alias_starting_at(it->first + it->second)}) {
      if (neighbour != nullptr) drop_neighbour_pins(neighbour, 1);
    }
    it = foreign_mappings_.erase(it);
  }
}

namespace {

// Walks [address, address + bytes) of a program reservation: `alias(unit,
// index)` for each of the pager's mappings met, `gap(start, length)` for each
// stretch between them. Either returns a CUresult; the walk stops at the
// first error. A mapping only partly inside the range is an error, as the
// driver says for a partial unmap.
template <typename OnAlias, typename OnGap>
CUresult walk_program_range(const GranuleIndex& index, std::uint64_t address, std::uint64_t bytes, OnAlias&& alias,
                            OnGap&& gap) {
  const std::uint64_t end = address + bytes;
  std::uint64_t gap_start = address;
  for (std::uint64_t at = address; at < end;) {
    Unit* unit = index.lookup(at);
    if (unit == nullptr) {
      at += GranuleIndex::kGranule;
      continue;
    }
    auto it = std::find_if(unit->aliases.begin(), unit->aliases.end(),
                           [at](const Alias& a) { return a.address <= at && at < a.address + a.bytes; });
    if (it == unit->aliases.end() || it->address != at || it->address + it->bytes > end) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (gap_start < at) {
      if (const CUresult result = gap(gap_start, at - gap_start); result != CUDA_SUCCESS) return result;
    }
    const std::uint64_t next = it->address + it->bytes;
    if (const CUresult result = alias(unit, static_cast<std::size_t>(it - unit->aliases.begin()));
        result != CUDA_SUCCESS) {
      return result;
    }
    at = gap_start = next;
  }
  return gap_start < end ? gap(gap_start, end - gap_start) : CUDA_SUCCESS;
}

}  // namespace

CUresult Pager::unmap_program_range(std::uint64_t address, std::uint64_t bytes) {
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  // Checked whole first, so a partial unmap of one of the pager's mappings changes nothing.
  const auto nothing = [](auto, auto) { return CUDA_SUCCESS; };
  if (const CUresult result = walk_program_range(index_, address, bytes, nothing, nothing); result != CUDA_SUCCESS) {
    return result;
  }
  std::vector<CUmemGenericAllocationHandle> unmapped;
  const CUresult result = walk_program_range(
      index_, address, bytes,
      [&](Unit* unit, std::size_t i) {
        lock_is_held();
        // Like the driver's, this unmap does not wait for work still using the range.
        unmap_alias(unit, unit->aliases[i]);
        unpin_neighbours(unit, unit->aliases[i]);
        index_.assign(unit->aliases[i].address, unit->aliases[i].bytes, nullptr);
        unit->aliases.erase(unit->aliases.begin() + static_cast<std::ptrdiff_t>(i));
        unmapped.push_back(unit->program_handle);
        return CUDA_SUCCESS;
      },
      [&](std::uint64_t start, std::uint64_t length) {
        lock_is_held();
        const CUresult unmapped_gap = driver_.unmap(start, length);
        if (unmapped_gap == CUDA_SUCCESS) forget_foreign_mappings(start, length);
        return unmapped_gap;
      });
  for (CUmemGenericAllocationHandle handle : unmapped) release_handle_if_unused(handle);
  return result;
}

CUresult Pager::set_program_access(std::uint64_t address, std::uint64_t bytes, const CUmemAccessDesc* desc,
                                   std::size_t count) {
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  return walk_program_range(
      index_, address, bytes,
      [&](Unit* unit, std::size_t i) {
        lock_is_held();
        bool other_device = false;
        for (std::size_t d = 0; d < count; ++d) {
          const bool own = desc[d].location.type == CU_MEM_LOCATION_TYPE_DEVICE && desc[d].location.id == unit->device;
          if (own) unit->aliases[i].access = desc[d].flags;
          other_device = other_device || (!own && desc[d].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE);
        }
        // Another device reaches the memory unseen by any hook: it stays.
        if (other_device && unit->real == 0) {
          if (const CUresult result = pin_unit_for_life(unit, LifetimePin::shared); result != CUDA_SUCCESS) {
            return result;
          }
        }
        const Alias& alias = unit->aliases[i];
        return alias.mapped ? driver_.set_access(alias.address, alias.bytes, desc, count) : CUDA_SUCCESS;
      },
      [&](std::uint64_t start, std::uint64_t length) { return driver_.set_access(start, length, desc, count); });
}

// ---- export ------------------------------------------------------------------------------

CUresult Pager::real_handle(CUmemGenericAllocationHandle handle, CUmemGenericAllocationHandle* out) {
  UniqueMutexLock lock(mutex_);
  RelaxedCaptureMode relaxed(driver_, capture_open());
  ProgramHandle* program = program_handle(handle);
  if (program == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (program->unit->real == 0) {
    if (const CUresult result = materialize(program->unit, program->prop, lock); result != CUDA_SUCCESS) return result;
    if ((program = program_handle(handle)) == nullptr) return CUDA_ERROR_INVALID_VALUE;  // released meanwhile
  }
  *out = program->unit->real;
  return CUDA_SUCCESS;
}

// The unit becomes one real allocation with the program's properties (an
// export needs the driver's handle, requested handle types and all): its
// bytes go to a host buffer, its chunks back to the pool and out of the cap,
// the real allocation is charged in their place and mapped at home and at
// every alias, and the bytes come back. It never moves again. Synchronous:
// an export, or a mapping the pager cannot follow, is rare and not on any
// launch path.
CUresult Pager::materialize(Unit* unit, const CUmemAllocationProp& prop, UniqueMutexLock& lock) {
  if (capture_open()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // it synchronises the context
  DeviceState& state = device_state(unit->device);
  if (const CUresult result = make_resident_now(unit); result != CUDA_SUCCESS) return result;
  // No offload may take it from here on. Operations that hold it are let
  // through to their enqueue first, with the lock let go: one may need the
  // lock for another unit it names, while holding this one. Their work is
  // done before the bytes are read (the context is synchronised below).
  unit->state.store(Residency::moving_out);
  while (unit->launching.load(std::memory_order_seq_cst) != 0) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  if (unit->retired) return CUDA_ERROR_INVALID_VALUE;  // released meanwhile
  if (unit->real != 0) return CUDA_SUCCESS;             // made real meanwhile, by another caller
  const auto resident_again = [unit] { unit->state.store(Residency::resident); };
  ContextScope in(driver_, state.context);
  CUresult result = synchronize_device(unit->device);  // nothing of the program's still uses the chunks
  void* host = result == CUDA_SUCCESS ? host_.take(unit->bytes, unit->device, &result) : nullptr;
  if (host == nullptr) {
    resident_again();
    return result == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : result;
  }
  if ((result = driver_.copy_to_host_async(host, unit->address, unit->bytes, state.copy_stream)) != CUDA_SUCCESS ||
      (result = driver_.stream_synchronize(state.copy_stream)) != CUDA_SUCCESS) {
    host_.give_back(host, unit->bytes);
    resident_again();
    return result;
  }
  unmap_home(unit);
  unmap_aliases(unit);
  const std::size_t chunks = unit->chunks.size();
  return_chunks(state, &unit->chunks);
  reap_saved_units(true);  // a chunk still mapped where an offload saves from is not released by the driver
  state.pool.release_free(unit->bytes);
  CUmemGenericAllocationHandle real = 0;
  bool charged = ledger_.charge(unit->device, unit->bytes);
  while (!charged && offload_victim(state, unit)) {
    reap_saved_units(true);
    state.pool.release_free(unit->bytes);
    charged = ledger_.charge(unit->device, unit->bytes);
  }
  result = charged ? driver_.create(&real, unit->bytes, &prop, 0) : CUDA_ERROR_OUT_OF_MEMORY;
  if (result == CUDA_SUCCESS && (result = driver_.map(unit->address, unit->bytes, 0, real, 0)) != CUDA_SUCCESS) {
    driver_.release(real);
  }
  if (result != CUDA_SUCCESS) {
    // Back on chunks, as it was; or, if even that fails, on the host, where
    // its bytes are: a later operation brings it back like any offloaded unit.
    if (charged) ledger_.refund(unit->device, unit->bytes);
    CUresult restored = take_chunks(state, chunks, unit, &unit->chunks);
    const bool mapped = restored == CUDA_SUCCESS && (restored = map_chunks(unit)) == CUDA_SUCCESS;
    if (mapped) {
      restored = driver_.copy_to_device_async(unit->address, host, unit->bytes, state.copy_stream);
      drain_copy_stream(state);
    }
    if (restored == CUDA_SUCCESS) {
      resident_again();
      host_.give_back(host, unit->bytes);
    } else {
      if (mapped) {
        unmap_home(unit);
        unmap_aliases(unit);
      }
      return_chunks(state, &unit->chunks);
      unit->host = host;  // the only copy of its bytes
      state.resident_bytes -= unit->bytes;
      unit->state.store(Residency::on_host);
    }
    VGPUMEM_LOG_ERROR("cannot make the program's handle of {} one real allocation: error {}{}",
                      format_bytes(unit->bytes), driver_error(result),
                      restored == CUDA_SUCCESS ? "" : "; it waits on the host until it can come back");
    return result;
  }
  unit->real = real;
  const CUmemAccessDesc access = own_device_access(unit->device, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  result = driver_.set_access(unit->address, unit->bytes, &access, 1);
  if (result == CUDA_SUCCESS) {
    result = driver_.copy_to_device_async(unit->address, host, unit->bytes, state.copy_stream);
  }
  if (result == CUDA_SUCCESS) result = driver_.stream_synchronize(state.copy_stream);
  host_.give_back(host, unit->bytes);
  for (Alias& alias : unit->aliases) {
    if (result != CUDA_SUCCESS) break;
    result = driver_.map(alias.address, alias.bytes, alias.offset, real, 0);
    if (result != CUDA_SUCCESS) break;
    alias.mapped = true;
    if (alias.access != CU_MEM_ACCESS_FLAGS_PROT_NONE) {
      const CUmemAccessDesc granted = own_device_access(unit->device, alias.access);
      result = driver_.set_access(alias.address, alias.bytes, &granted, 1);
    }
  }
  resident_again();
  if (result == CUDA_SUCCESS) result = pin_unit_for_life(unit, LifetimePin::exported);
  ++handles_materialized_;
  VGPUMEM_LOG_INFO("the program's handle of {} is one real allocation from now on, pinned resident",
                   format_bytes(unit->bytes));
  return result;
}

}  // namespace vgpumem::vmm
