// What every hook file needs: the table, REAL(), the runtime, and the
// allocation protocol (reserve -> real call -> commit or abandon).
#pragma once

#include "interpose/hook_table.h"
#include "interpose/real_driver.h"
#include "shim/runtime.h"
#include "vmm/accounting.h"

namespace vgpumem::interpose {

using vmm::AllocationKind;

inline const char* api_name(HookId id) { return hook_entry(id).symbol; }

// Runs `allocate` (which calls the real driver and stores the new
// allocation's key) under the cap of `device`. When the device is unknown
// before the call (no current context, a pool of another device), the
// allocation is adopted afterwards from the pointer's own device, and undone
// with `undo` if that device's cap is exceeded.
template <typename Allocate, typename KeyOf, typename Undo>
CUresult charged_allocation(HookId api, AllocationKind kind, int device, std::uint64_t bytes, Allocate&& allocate,
                            KeyOf&& key_of, Undo&& undo) {
  vmm::Accounting& accounting = Runtime::get().accounting();
  if (device >= 0) {
    if (!accounting.reserve(device, bytes, api_name(api))) {
      // Paged memory holds the room: offload some of it and try once more.
      vmm::Pager* pager = Runtime::get().pager_for(device);
      if (pager == nullptr || !pager->make_room(device, bytes) || !accounting.reserve(device, bytes, api_name(api))) {
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    const CUresult result = allocate();
    if (result != CUDA_SUCCESS) {
      accounting.abandon(device, bytes);
      return result;
    }
    accounting.commit(kind, key_of(), device, bytes, api_name(api));
    return result;
  }
  const CUresult result = allocate();
  if (result != CUDA_SUCCESS) return result;
  const std::uint64_t key = key_of();
  const int actual = kind == AllocationKind::device ? device_of_pointer(key) : -1;
  if (actual < 0) return result;  // nothing to charge it to; it stays untracked
  if (!accounting.adopt(kind, key, actual, bytes, api_name(api))) {
    undo();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return result;
}

// Traces what the pager answered an allocation of `bytes` on `device`:
// the allocation (`key`: its address, or a handle's value), or the refusal.
inline CUresult traced_paged_allocation(vmm::Pager& pager, HookId api, int device, std::uint64_t bytes,
                                        CUresult result, std::uint64_t key) {
  if (result == CUDA_SUCCESS) {
    Runtime::get().recorder().record_alloc(device, key, bytes, api_name(api));
  } else {
    Runtime::get().recorder().record_oom(device, bytes, pager.resident_bytes(device),
                                         Runtime::get().accounting().usage(device).cap, api_name(api));
  }
  return result;
}

// A device allocation served by the pager (VGPUMEM_POLICY=lru on a capped
// device): beyond the cap it succeeds while host memory lasts.
inline CUresult paged_allocation(vmm::Pager& pager, HookId api, int device, std::uint64_t bytes, CUdeviceptr* out) {
  const CUresult result = pager.allocate(device, bytes, out);
  return traced_paged_allocation(pager, api, device, bytes, result, result == CUDA_SUCCESS ? *out : 0);
}

// Makes the device memory in [address, address + bytes) resident for work on
// `stream` (a copy or memset operand), held until `access` is released.
inline CUresult paged_operand(std::uint64_t address, std::uint64_t bytes, CUstream stream, bool per_thread,
                              vmm::Access& access) {
  vmm::Pager* pager = Runtime::get().pager();
  return pager == nullptr ? CUDA_SUCCESS : pager->prepare_range(address, bytes, stream, per_thread, access);
}

// Host bytes on their way to the device: pointers into paged memory among
// them pin their targets (a kernel may follow them, unseen by any hook).
inline CUresult pin_uploaded_pointers(const void* host, std::size_t bytes) {
  vmm::Pager* pager = Runtime::get().pager();
  return pager == nullptr ? CUDA_SUCCESS : pager->pin_uploaded_pointers(host, bytes);
}

// A free: forwards, and on success refunds what the allocation was charged.
template <typename Free>
CUresult charged_free(HookId api, AllocationKind kind, std::uint64_t key, Free&& free_it) {
  const CUresult result = free_it();
  if (result == CUDA_SUCCESS && key != 0) Runtime::get().accounting().forget(kind, key, api_name(api));
  return result;
}

}  // namespace vgpumem::interpose

// A hook with no policy yet: count the call and forward it.
#define VGPUMEM_FORWARDING_HOOK(name, params, args)                                 \
  extern "C" CUresult name params {                                                 \
    ::vgpumem::Runtime::get().count(::vgpumem::interpose::HookId::name);            \
    return REAL(name) args;                                                         \
  }
