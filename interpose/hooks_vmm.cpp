// Hooks for the program's own virtual-memory-management calls (PyTorch's
// expandable segments, NCCL). Physical memory is what cuMemCreate makes, so
// that is what the cap charges; reserving address space and mapping cost none.
// With paging on, a handle the program creates on a capped device is a
// virtual one the pager pages (vmm/program_handles.cpp): every call that
// names such a handle, or a range of a reservation the pager covers, goes
// to the pager, which passes what is not its own on to the driver.
#include <optional>

#include "interpose/hook_support.h"
#include "shim/log.h"
#include "vmm/driver_error.h"

// Note [Memory other devices reach]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A range exported as a dma-buf (`cuMemGetHandleForAddressRange`, how NCCL
// registers buffers for GPUDirect RDMA) hands a NIC or another device the
// physical pages mapped there now; the driver expects a new handle whenever
// they change, which a program does not know to ask for. The units it crosses
// are pinned resident for life first (`LifetimePin::dma_buf`).
//
// Multicast objects (NVLink SHARP: NCCL's NVLS and PyTorch's symmetric
// memory) have the other GPUs of the team write the memory bound to them. A
// handle of the program's bound with `cuMulticastBindMem` is one the driver
// has never seen (a virtual one): it becomes one real allocation pinned for
// life first, as for an export. Memory bound by address
// (`cuMulticastBindAddr`) is pinned for life where it is.

using namespace vgpumem;
using namespace vgpumem::interpose;

VGPUMEM_HOOK_DEFINE(cuMemCreate,
                    (CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop, unsigned long long flags),
                    (handle, size, prop, flags)) {
  if (handle == nullptr || prop == nullptr || size == 0) return REAL(cuMemCreate)(handle, size, prop, flags);
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    // Host-located physical memory: tracked, never charged to a device.
    const CUresult result = REAL(cuMemCreate)(handle, size, prop, flags);
    if (result == CUDA_SUCCESS) Runtime::get().accounting().commit_host(*handle, size, api_name(HookId::cuMemCreate));
    return result;
  }
  const int device = prop->location.id;
  vmm::Pager* pager = Runtime::get().pager_for(device);
  if (pager != nullptr && vmm::Pager::pageable_handle(size, *prop, flags)) {
    // A virtual handle: paged like any allocation (vmm/program_handles.cpp).
    const CUresult result = pager->create_handle(device, size, *prop, handle);
    return traced_paged_allocation(*pager, HookId::cuMemCreate, device, size, result,
                                   result == CUDA_SUCCESS ? *handle : 0);
  }
  return charged_allocation(
      HookId::cuMemCreate, AllocationKind::vmm_handle, device, size,
      [&] { return REAL(cuMemCreate)(handle, size, prop, flags); }, [&] { return std::uint64_t{*handle}; },
      [&] { REAL(cuMemRelease)(*handle); });
}

namespace {

// The pager when `handle` is one of its virtual handles, else nullptr.
vmm::Pager* pager_of_handle(CUmemGenericAllocationHandle handle) {
  return vmm::Pager::is_virtual(handle) ? Runtime::get().pager() : nullptr;
}

// The pager when `address` lies in a reservation of the program's it covers.
vmm::Pager* pager_of_reservation(CUdeviceptr address) {
  vmm::Pager* pager = Runtime::get().pager();
  return pager != nullptr && pager->in_program_reservation(address) ? pager : nullptr;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle)) {
  if (vmm::Pager* pager = pager_of_handle(handle)) {
    const CUresult result = pager->release_handle(handle);
    if (result == CUDA_SUCCESS) Runtime::get().recorder().record_free(-1, handle, 0, api_name(HookId::cuMemRelease));
    return result;
  }
  const CUresult result = REAL(cuMemRelease)(handle);
  if (result == CUDA_SUCCESS) {
    vmm::Accounting& accounting = Runtime::get().accounting();
    if (!accounting.release(AllocationKind::vmm_handle, handle, api_name(HookId::cuMemRelease))) {
      accounting.forget(AllocationKind::host, handle, api_name(HookId::cuMemRelease));
    }
  }
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle* handle, void* addr), (handle, addr)) {
  const auto address = reinterpret_cast<CUdeviceptr>(addr);
  if (vmm::Pager* pager = pager_of_reservation(address)) {
    if (handle != nullptr && pager->retain_handle(address, handle)) return CUDA_SUCCESS;
  }
  // A paged allocation is cuMemAlloc memory to the program: never hand out
  // one of the pager's chunks, which it may give to another unit at any time.
  if (vmm::Pager* pager = Runtime::get().pager(); pager != nullptr && pager->in_arena(address)) {
    return vmm::Pager::kAllocatedMemoryQueryAnswer;
  }
  const CUresult result = REAL(cuMemRetainAllocationHandle)(handle, addr);
  // Each retain must be paired with a cuMemRelease; the bytes are refunded
  // when the last reference goes, not at the first release.
  if (result == CUDA_SUCCESS && handle != nullptr) {
    Runtime::get().accounting().retain(AllocationKind::vmm_handle, *handle);
  }
  return result;
}

// The access the program reads back is the access it set on its own view:
// an offloaded mapping answers what was granted, and a paged allocation what
// the driver answers for cuMemAlloc memory.
VGPUMEM_HOOK_DEFINE(cuMemGetAccess, (unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr),
                    (flags, location, ptr)) {
  if (vmm::Pager* pager = Runtime::get().pager(); pager != nullptr && flags != nullptr && location != nullptr) {
    if (pager->in_arena(ptr)) return vmm::Pager::kAllocatedMemoryQueryAnswer;
    if (const std::optional<unsigned long long> access = pager->program_access(ptr, *location)) {
      *flags = *access;
      return CUDA_SUCCESS;
    }
  }
  return REAL(cuMemGetAccess)(flags, location, ptr);
}

// A dma-buf of a range (NCCL registers buffers this way for GPUDirect RDMA)
// gives a NIC or another device the physical pages mapped there now, and
// the driver asks for a new one whenever they change: paged memory is
// pinned resident for life first, so they never do.
VGPUMEM_HOOK_DEFINE(cuMemGetHandleForAddressRange,
                    (void* handle, CUdeviceptr ptr, size_t size, CUmemRangeHandleType type, unsigned long long flags),
                    (handle, ptr, size, type, flags)) {
  vmm::Pager* pager = Runtime::get().pager();
  if (pager != nullptr && handle != nullptr && size != 0) {
    if (const CUresult pinned = pager->pin_range_for_life(ptr, size, vmm::LifetimePin::dma_buf)) return pinned;
  }
  const CUresult result = REAL(cuMemGetHandleForAddressRange)(handle, ptr, size, type, flags);
  if (result != CUDA_SUCCESS && pager != nullptr) pager->unpin_for_life(ptr, vmm::LifetimePin::dma_buf);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemGetAllocationPropertiesFromHandle,
                    (CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle),
                    (prop, handle)) {
  if (vmm::Pager* pager = pager_of_handle(handle)) return pager->handle_properties(handle, prop);
  return REAL(cuMemGetAllocationPropertiesFromHandle)(prop, handle);
}

// Reserving address space costs no memory. The pager covers the program's
// reservations, so handles mapped in them are paged.
VGPUMEM_HOOK_DEFINE(cuMemAddressReserve,
                    (CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),
                    (ptr, size, alignment, addr, flags)) {
  const CUresult result = REAL(cuMemAddressReserve)(ptr, size, alignment, addr, flags);
  if (result != CUDA_SUCCESS || ptr == nullptr) return result;
  if (vmm::Pager* pager = Runtime::get().pager()) pager->program_reserved(*ptr, size);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size)) {
  if (vmm::Pager* pager = pager_of_reservation(ptr)) return pager->free_program_reservation(ptr, size);
  return REAL(cuMemAddressFree)(ptr, size);
}

VGPUMEM_HOOK_DEFINE(cuMemMap,
                    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags),
                    (ptr, size, offset, handle, flags)) {
  if (vmm::Pager* pager = pager_of_handle(handle)) return pager->map_handle(ptr, size, offset, handle, flags);
  vmm::Pager* pager = pager_of_reservation(ptr);
  // Over one of the pager's mappings, offloaded or not: refused, as the
  // driver refuses a mapping over a mapping.
  if (pager != nullptr && pager->holds_any(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = REAL(cuMemMap)(ptr, size, offset, handle, flags);
  // A real handle next to paged mappings pins them (a buffer may span both).
  if (result == CUDA_SUCCESS && pager != nullptr) pager->note_foreign_mapping(ptr, size);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size)) {
  if (vmm::Pager* pager = pager_of_reservation(ptr)) return pager->unmap_program_range(ptr, size);
  return REAL(cuMemUnmap)(ptr, size);
}

VGPUMEM_HOOK_DEFINE(cuMemSetAccess,
                    (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count),
                    (ptr, size, desc, count)) {
  if (vmm::Pager* pager = pager_of_reservation(ptr)) return pager->set_program_access(ptr, size, desc, count);
  return REAL(cuMemSetAccess)(ptr, size, desc, count);
}

// An export needs the driver's own handle: a virtual one becomes one real
// allocation first, pinned resident for good (another process uses it unseen).
VGPUMEM_HOOK_DEFINE(cuMemExportToShareableHandle,
                    (void* shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type, unsigned long long flags),
                    (shareable, handle, type, flags)) {
  if (vmm::Pager* pager = pager_of_handle(handle)) {
    CUmemGenericAllocationHandle real = 0;
    if (const CUresult result = pager->real_handle(handle, &real); result != CUDA_SUCCESS) return result;
    handle = real;
  }
  return REAL(cuMemExportToShareableHandle)(shareable, handle, type, flags);
}

// Multicast (NVLS: NCCL's and PyTorch's symmetric memory): the other GPUs of
// the team write the memory bound to the object, unseen. A handle of the
// program's the pager holds becomes one real allocation, pinned for life, as
// for an export (the driver has never heard of the virtual one); memory bound
// by address is pinned for life where it is.
VGPUMEM_HOOK_DEFINE(cuMulticastBindMem,
                    (CUmemGenericAllocationHandle object, size_t offset, CUmemGenericAllocationHandle memory, size_t memory_offset, size_t size, unsigned long long flags),
                    (object, offset, memory, memory_offset, size, flags)) {
  if (vmm::Pager* pager = pager_of_handle(memory)) {
    CUmemGenericAllocationHandle real = 0;
    if (const CUresult result = pager->real_handle(memory, &real); result != CUDA_SUCCESS) return result;
    memory = real;
  }
  return REAL(cuMulticastBindMem)(object, offset, memory, memory_offset, size, flags);
}

VGPUMEM_HOOK_DEFINE(cuMulticastBindAddr,
                    (CUmemGenericAllocationHandle object, size_t offset, CUdeviceptr memory, size_t size, unsigned long long flags),
                    (object, offset, memory, size, flags)) {
  if (vmm::Pager* pager = Runtime::get().pager(); pager != nullptr && size != 0) {
    if (const CUresult pinned = pager->pin_range_for_life(memory, size, vmm::LifetimePin::shared)) return pinned;
  }
  return REAL(cuMulticastBindAddr)(object, offset, memory, size, flags);
}

// Imported memory belongs to the exporting process and is charged there.
VGPUMEM_FORWARDING_HOOK(cuMemImportFromShareableHandle,
                        (CUmemGenericAllocationHandle * handle, void* shareable, CUmemAllocationHandleType type),
                        (handle, shareable, type))
// Legacy IPC hands a cuMemAlloc allocation to another process, which then
// uses it unseen: paged memory is pinned resident first. But the driver
// refuses legacy IPC on virtual-memory allocations (research: cuda-facts §3),
// and every paged allocation is one: the program gets the driver's error,
// and the log says what to do about it.
VGPUMEM_HOOK_DEFINE(cuIpcGetMemHandle, (CUipcMemHandle* handle, CUdeviceptr dptr), (handle, dptr)) {
  vmm::Pager* pager = Runtime::get().pager();
  if (pager == nullptr || !pager->owns(dptr)) return REAL(cuIpcGetMemHandle)(handle, dptr);
  const std::uint64_t word = dptr;
  if (CUresult r = pager->pin_for_life(&word, 1, vmm::LifetimePin::ipc)) return r;
  const CUresult result = REAL(cuIpcGetMemHandle)(handle, dptr);
  if (result != CUDA_SUCCESS) {
    pager->unpin_for_life(dptr, vmm::LifetimePin::ipc);
    VGPUMEM_LOG_ERROR("cuIpcGetMemHandle({:#x}) failed with error {}: CUDA IPC cannot share paged memory (with "
                      "VGPUMEM_POLICY=lru every cuMemAlloc allocation is virtual memory). To share device memory "
                      "between processes, run with VGPUMEM_POLICY=off; the cap still applies",
                      dptr, vmm::driver_error(result));
  }
  return result;
}
