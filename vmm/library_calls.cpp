// Library calls that overwrite what they name (vmm/library_call_scope.h): the
// bytes such a call writes before reading are not copied in when their unit
// comes back, and a call that fails has them restored from the host copy
// kept meanwhile.
#include <atomic>
#include <cstring>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/context_scope.h"
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"
#include "vmm/driver_error.h"

namespace vgpumem::vmm {

namespace {
std::atomic<std::uint64_t> g_library_calls{0};
}  // namespace

// The scope open on a thread is kept with the rest of what the launch path
// keeps per thread (LaunchThread): only the thread's own launches skip bytes.
bool Pager::begin_library_call(LibraryCallScope& scope) {
  LibraryCallScope*& open = launch_thread().library_call;
  if (open != nullptr || (scope.range_count == 0 && scope.op == LibraryOp::none)) return false;
  scope.kept_count = 0;
  scope.serial = g_library_calls.fetch_add(1, std::memory_order_relaxed) + 1;
  open = &scope;
  return true;
}

LibraryCallScope* library_call_on_this_thread() { return launch_thread().library_call; }

// The bytes of `unit` the call in `scope` overwrites, as offsets from the
// unit's start (empty: copy it all). A unit the program mapped elsewhere
// (its own handle) is named by other addresses than its range: copied whole.
LibraryCallScope::Range Pager::skipped_on_fetch(const Unit* unit, LibraryCallScope* scope) const {
  if (scope == nullptr || !scope->can_keep() || unit->program_handle != 0 || !unit->aliases.empty() ||
      unit->host == nullptr) {
    return {};
  }
  const LibraryCallScope::Range covered = scope->covered(unit->address, unit->bytes);
  if (covered.bytes == 0) return {};
  return LibraryCallScope::Range{covered.address - unit->address, covered.bytes};
}

void Pager::keep_skipped(LibraryCallScope& scope, Unit* unit, LibraryCallScope::Range skip, std::uint64_t read) {
  scope.kept[scope.kept_count++] = LibraryCallScope::Kept{unit, unit->host, unit->bytes, skip.address, skip.bytes, read};
  overwritten_fetches_.fetch_add(1, std::memory_order_relaxed);
  bytes_not_fetched_.fetch_add(skip.bytes, std::memory_order_relaxed);
}

void Pager::end_library_call(LibraryCallScope& scope, bool completed) {
  LibraryCallScope*& open = launch_thread().library_call;
  if (open != &scope) return;  // never opened: another scope was
  open = nullptr;
  if (scope.kept_count == 0) return;
  MutexLock lock(mutex_);
  for (std::size_t i = 0; i < scope.kept_count; ++i) {
    const LibraryCallScope::Kept& kept = scope.kept[i];
    if (!completed && !kept.unit->retired) restore_skipped(scope, kept);
    // The copy-in stream may still read the parts that were copied.
    host_.give_back(kept.host, kept.host_bytes, kept.unit->device, kept.read);
  }
  scope.kept_count = 0;
}

// A call that failed may have written some of what it was to overwrite, or
// nothing: the bytes it skipped go back to what they were, wherever the unit
// is now. Rare, so simply: everything waited for on the host.
void Pager::restore_skipped(const LibraryCallScope& scope, const LibraryCallScope::Kept& kept) {
  Unit* unit = kept.unit;
  DeviceState& state = device_state(unit->device);
  ContextScope in(driver_, state.context);
  driver_.stream_synchronize(canonical(scope.stream, scope.per_thread));  // the failed call's own work
  const auto* saved = static_cast<const unsigned char*>(kept.host) + kept.offset;
  CUresult result = CUDA_SUCCESS;
  if (unit->state.load() == Residency::resident) {
    result = driver_.copy_to_device_async(unit->address + kept.offset, saved, kept.bytes, state.to_device_stream);
    if (result == CUDA_SUCCESS) result = driver_.stream_synchronize(state.to_device_stream);
  } else if (unit->host != nullptr) {
    // Offloaded again since: its save wrote what the device held.
    result = unit->saved != nullptr ? driver_.event_synchronize(unit->saved) : driver_.stream_synchronize(state.copy_stream);
    if (result == CUDA_SUCCESS) std::memcpy(static_cast<unsigned char*>(unit->host) + kept.offset, saved, kept.bytes);
  }
  overwrites_restored_.fetch_add(1, std::memory_order_relaxed);
  if (result != CUDA_SUCCESS) {
    VGPUMEM_LOG_ERROR("a library call that was to overwrite {} at {:#x} failed, and restoring those bytes failed "
                      "too (error {}): the buffer's old contents are lost",
                      format_bytes(kept.bytes), unit->seen_at() + kept.offset, driver_error(result));
  } else {
    VGPUMEM_LOG_INFO("a library call that was to overwrite {} at {:#x} failed: those bytes were restored",
                     format_bytes(kept.bytes), unit->seen_at() + kept.offset);
  }
}

}  // namespace vgpumem::vmm
