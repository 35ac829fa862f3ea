// Hooks for the program's own virtual-memory-management calls (PyTorch's
// expandable segments, NCCL). Physical memory is what cuMemCreate makes, so
// that is what the cap charges; reserving address space and mapping cost none.
#include "interpose/hook_support.h"
#include "shim/log.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

extern "C" CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  Runtime::get().count(HookId::cuMemCreate);
  if (handle == nullptr || prop == nullptr || size == 0) return REAL(cuMemCreate)(handle, size, prop, flags);
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    // Host-located physical memory: tracked, never charged to a device.
    const CUresult result = REAL(cuMemCreate)(handle, size, prop, flags);
    if (result == CUDA_SUCCESS) Runtime::get().accounting().commit_host(*handle, size, api_name(HookId::cuMemCreate));
    return result;
  }
  return charged_allocation(
      HookId::cuMemCreate, AllocationKind::vmm_handle, prop->location.id, size,
      [&] { return REAL(cuMemCreate)(handle, size, prop, flags); }, [&] { return std::uint64_t{*handle}; },
      [&] { REAL(cuMemRelease)(*handle); });
}

extern "C" CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Runtime::get().count(HookId::cuMemRelease);
  const CUresult result = REAL(cuMemRelease)(handle);
  if (result == CUDA_SUCCESS) {
    vmm::Accounting& accounting = Runtime::get().accounting();
    if (!accounting.release(AllocationKind::vmm_handle, handle, api_name(HookId::cuMemRelease))) {
      accounting.forget(AllocationKind::host, handle, api_name(HookId::cuMemRelease));
    }
  }
  return result;
}

extern "C" CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  Runtime::get().count(HookId::cuMemRetainAllocationHandle);
  const CUresult result = REAL(cuMemRetainAllocationHandle)(handle, addr);
  // Each retain must be paired with a cuMemRelease; the bytes are refunded
  // when the last reference goes, not at the first release.
  if (result == CUDA_SUCCESS && handle != nullptr) {
    Runtime::get().accounting().retain(AllocationKind::vmm_handle, *handle);
  }
  return result;
}

VGPUMEM_FORWARDING_HOOK(cuMemAddressReserve,
                        (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),
                        (ptr, size, alignment, addr, flags))
VGPUMEM_FORWARDING_HOOK(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))
VGPUMEM_FORWARDING_HOOK(cuMemMap,
                        (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags),
                        (ptr, size, offset, handle, flags))
VGPUMEM_FORWARDING_HOOK(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))
VGPUMEM_FORWARDING_HOOK(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count),
                        (ptr, size, desc, count))
VGPUMEM_FORWARDING_HOOK(cuMemExportToShareableHandle,
                        (void* shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
                         unsigned long long flags),
                        (shareable, handle, type, flags))
// Imported memory belongs to the exporting process and is charged there.
VGPUMEM_FORWARDING_HOOK(cuMemImportFromShareableHandle,
                        (CUmemGenericAllocationHandle * handle, void* shareable, CUmemAllocationHandleType type),
                        (handle, shareable, type))
// Legacy IPC hands a cuMemAlloc allocation to another process, which then
// uses it unseen: paged memory is pinned resident first. But the driver
// refuses legacy IPC on virtual-memory allocations (research: cuda-facts §3),
// and every paged allocation is one: the program gets the driver's error,
// and the log says what to do about it.
extern "C" CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  Runtime::get().count(HookId::cuIpcGetMemHandle);
  vmm::Pager* pager = Runtime::get().pager();
  if (pager == nullptr || !pager->owns(dptr)) return REAL(cuIpcGetMemHandle)(handle, dptr);
  const std::uint64_t word = dptr;
  if (CUresult r = pager->pin_for_life(&word, 1, vmm::LifetimePin::exported)) return r;
  const CUresult result = REAL(cuIpcGetMemHandle)(handle, dptr);
  if (result != CUDA_SUCCESS) {
    pager->unpin_for_life(dptr, vmm::LifetimePin::exported);
    VGPUMEM_LOG_ERROR("cuIpcGetMemHandle({:#x}) failed with error {}: CUDA IPC cannot share paged memory (with "
                      "VGPUMEM_POLICY=lru every cuMemAlloc allocation is virtual memory). To share device memory "
                      "between processes, run with VGPUMEM_POLICY=off; the cap still applies",
                      dptr, static_cast<int>(result));
  }
  return result;
}
