// Hooks for device allocations and frees: plain, pitch, managed, stream-
// ordered and pool, arrays, and the legacy 32-bit variants. Each charges the
// bytes to the device's cap before the real call (vmm/accounting.h).
#include <algorithm>
#include <optional>

#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// Stream-ordered allocations are charged to the current device: pools and
// streams of other devices are adopted from the pointer afterwards.
int stream_device() { return current_device(); }

std::uint64_t array_bytes(std::size_t width, std::size_t height, std::size_t depth, CUarray_format format,
                          unsigned int channels) {
  std::uint64_t element = 4;
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      element = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      element = 2;
      break;
    default:
      element = 4;  // 32-bit formats; wider or packed formats are rare and over-counted at 4 per channel
      break;
  }
  return static_cast<std::uint64_t>(std::max<std::size_t>(width, 1)) * std::max<std::size_t>(height, 1) *
         std::max<std::size_t>(depth, 1) * element * std::max(channels, 1u);
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemAlloc_v2, (CUdeviceptr* dptr, size_t bytesize), (dptr, bytesize)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAlloc_v2)(dptr, bytesize);
  const int device = current_device();
  if (vmm::Pager* pager = Runtime::get().pager_for(device)) {
    return paged_allocation(*pager, HookId::cuMemAlloc_v2, device, bytesize, dptr);
  }
  return charged_allocation(
      HookId::cuMemAlloc_v2, AllocationKind::device, current_device(), bytesize,
      [&] { return REAL(cuMemAlloc_v2)(dptr, bytesize); }, [&] { return *dptr; },
      [&] { REAL(cuMemFree_v2)(*dptr); });
}

VGPUMEM_HOOK_DEFINE(cuMemAlloc, (unsigned int* dptr, unsigned int bytesize), (dptr, bytesize)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAlloc)(dptr, bytesize);
  return charged_allocation(
      HookId::cuMemAlloc, AllocationKind::device_v1, current_device(), bytesize,
      [&] { return REAL(cuMemAlloc)(dptr, bytesize); }, [&] { return std::uint64_t{*dptr}; },
      [&] { REAL(cuMemFree)(*dptr); });
}

VGPUMEM_HOOK_DEFINE(cuMemAllocPitch_v2,
                    (CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int element_size),
                    (dptr, pitch, width, height, element_size)) {
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size);
  }
  // The pitch is only known afterwards; charge the smallest pitch the driver
  // can choose (512-byte aligned rows) first, then the difference.
  const std::uint64_t estimate = ((width + 511) / 512) * 512 * static_cast<std::uint64_t>(height);
  const int device = current_device();
  if (vmm::Pager* pager = Runtime::get().pager_for(device)) {
    if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
    *pitch = ((width + 511) / 512) * 512;  // the alignment the driver gives rows
    return paged_allocation(*pager, HookId::cuMemAllocPitch_v2, device, estimate, dptr);
  }
  CUresult result = charged_allocation(
      HookId::cuMemAllocPitch_v2, AllocationKind::device, device, estimate,
      [&] { return REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, element_size); }, [&] { return *dptr; },
      [&] { REAL(cuMemFree_v2)(*dptr); });
  if (result != CUDA_SUCCESS || device < 0) return result;
  const std::uint64_t actual = static_cast<std::uint64_t>(*pitch) * height;
  if (actual > estimate &&
      !Runtime::get().accounting().grow(AllocationKind::device, *dptr, actual - estimate,
                                        api_name(HookId::cuMemAllocPitch_v2))) {
    Runtime::get().accounting().forget(AllocationKind::device, *dptr, api_name(HookId::cuMemAllocPitch_v2));
    REAL(cuMemFree_v2)(*dptr);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemAllocPitch,
                    (unsigned int* dptr, unsigned int* pitch, unsigned int width, unsigned int height, unsigned int element_size),
                    (dptr, pitch, width, height, element_size)) {
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return REAL(cuMemAllocPitch)(dptr, pitch, width, height, element_size);
  }
  // Charged at the widest pitch the 32-bit ABI can return for this width.
  const std::uint64_t bytes = ((std::uint64_t{width} + 511) / 512) * 512 * height;
  return charged_allocation(
      HookId::cuMemAllocPitch, AllocationKind::device_v1, current_device(), bytes,
      [&] { return REAL(cuMemAllocPitch)(dptr, pitch, width, height, element_size); },
      [&] { return std::uint64_t{*dptr}; }, [&] { REAL(cuMemFree)(*dptr); });
}

VGPUMEM_HOOK_DEFINE(cuMemAllocManaged,
                    (CUdeviceptr* dptr, size_t bytesize, unsigned int flags),
                    (dptr, bytesize, flags)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  // Managed memory can migrate anywhere, but it is device memory the process
  // can fill: it counts against the current device's cap.
  return charged_allocation(
      HookId::cuMemAllocManaged, AllocationKind::device, current_device(), bytesize,
      [&] { return REAL(cuMemAllocManaged)(dptr, bytesize, flags); }, [&] { return *dptr; },
      [&] { REAL(cuMemFree_v2)(*dptr); });
}

VGPUMEM_HOOK_DEFINE(cuMemFree_v2, (CUdeviceptr dptr), (dptr)) {
  if (vmm::Pager* pager = Runtime::get().pager()) {
    CUresult result = CUDA_SUCCESS;
    if (pager->free(dptr, &result)) {
      if (result == CUDA_SUCCESS) Runtime::get().recorder().record_free(-1, dptr, 0, api_name(HookId::cuMemFree_v2));
      return result;
    }
  }
  return charged_free(HookId::cuMemFree_v2, AllocationKind::device, dptr, [&] { return REAL(cuMemFree_v2)(dptr); });
}

VGPUMEM_HOOK_DEFINE(cuMemFree, (unsigned int dptr), (dptr)) {
  return charged_free(HookId::cuMemFree, AllocationKind::device_v1, dptr, [&] { return REAL(cuMemFree)(dptr); });
}

// Stream-ordered allocations are charged while they are live: from the
// enqueue of the allocation to the enqueue of its free. Memory a pool keeps
// cached after a free cannot be used without allocating it again, which is
// charged again. With paging on, allocations from the default pool are paged
// (usable at once, which stream order allows) unless the stream is being
// captured: there the driver makes graph memory nodes, which stay its own.
namespace {

vmm::Pager* pager_for_stream_ordered(int device, CUstream stream, bool per_thread) {
  vmm::Pager* pager = Runtime::get().pager_for(device);
  if (pager == nullptr || (pager->capture_open() && pager->stream_capturing(stream, per_thread))) return nullptr;
  return pager;
}

CUresult paged_free_async(HookId api, CUdeviceptr dptr, CUstream stream, bool per_thread, bool* handled) {
  CUresult result = CUDA_SUCCESS;
  vmm::Pager* pager = Runtime::get().pager();
  *handled = pager != nullptr && pager->free_async(dptr, stream, per_thread, &result);
  if (*handled && result == CUDA_SUCCESS) Runtime::get().recorder().record_free(-1, dptr, 0, api_name(api));
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemAllocAsync, (CUdeviceptr* dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAllocAsync)(dptr, bytesize, stream);
  if (vmm::Pager* pager = pager_for_stream_ordered(stream_device(), stream, false)) {
    return paged_allocation(*pager, HookId::cuMemAllocAsync, stream_device(), bytesize, dptr);
  }
  return charged_allocation(
      HookId::cuMemAllocAsync, AllocationKind::device, stream_device(), bytesize,
      [&] { return REAL(cuMemAllocAsync)(dptr, bytesize, stream); }, [&] { return *dptr; },
      [&] { REAL(cuMemFreeAsync)(*dptr, stream); });
}

VGPUMEM_HOOK_DEFINE(cuMemAllocAsync_ptsz,
                    (CUdeviceptr* dptr, size_t bytesize, CUstream stream),
                    (dptr, bytesize, stream)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, stream);
  if (vmm::Pager* pager = pager_for_stream_ordered(stream_device(), stream, true)) {
    return paged_allocation(*pager, HookId::cuMemAllocAsync_ptsz, stream_device(), bytesize, dptr);
  }
  return charged_allocation(
      HookId::cuMemAllocAsync_ptsz, AllocationKind::device, stream_device(), bytesize,
      [&] { return REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, stream); }, [&] { return *dptr; },
      [&] { REAL(cuMemFreeAsync_ptsz)(*dptr, stream); });
}

namespace {

// From a pool: paged when the pool allows it (vmm/pool_registry.h), charged
// to the pool's own device otherwise, and to none for a host-located pool.
template <typename Real, typename FreeAsync>
CUresult allocate_from_pool(HookId api, CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream,
                            bool per_thread, Real&& real, FreeAsync&& free_async) {
  const vmm::PoolRegistry& pools = Runtime::get().pools();
  if (const std::optional<int> device = pools.pageable_on(pool)) {
    if (vmm::Pager* pager = pager_for_stream_ordered(*device, stream, per_thread)) {
      return paged_allocation(*pager, api, *device, bytesize, dptr);
    }
  }
  if (pools.on_host(pool)) return real();  // host memory: no device's cap
  return charged_allocation(
      api, AllocationKind::device, pools.device_of(pool).value_or(stream_device()), bytesize, real,
      [&] { return *dptr; }, [&] { free_async(*dptr); });
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemAllocFromPoolAsync,
                    (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
                    (dptr, bytesize, pool, stream)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, stream);
  return allocate_from_pool(
      HookId::cuMemAllocFromPoolAsync, dptr, bytesize, pool, stream, false,
      [&] { return REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, stream); },
      [&](CUdeviceptr p) { REAL(cuMemFreeAsync)(p, stream); });
}

VGPUMEM_HOOK_DEFINE(cuMemAllocFromPoolAsync_ptsz,
                    (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
                    (dptr, bytesize, pool, stream)) {
  if (dptr == nullptr || bytesize == 0) return REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, stream);
  return allocate_from_pool(
      HookId::cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, stream, true,
      [&] { return REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, stream); },
      [&](CUdeviceptr p) { REAL(cuMemFreeAsync_ptsz)(p, stream); });
}

// The pools the program holds, so the pager knows which it may serve.
VGPUMEM_HOOK_DEFINE(cuMemPoolCreate, (CUmemoryPool* pool, const CUmemPoolProps* props), (pool, props)) {
  const CUresult result = REAL(cuMemPoolCreate)(pool, props);
  if (result == CUDA_SUCCESS && pool != nullptr && props != nullptr) Runtime::get().pools().created(*pool, *props);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemPoolDestroy, (CUmemoryPool pool), (pool)) {
  const CUresult result = REAL(cuMemPoolDestroy)(pool);
  if (result == CUDA_SUCCESS) Runtime::get().pools().destroyed(pool);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemPoolSetAccess,
                    (CUmemoryPool pool, const CUmemAccessDesc* map, size_t count),
                    (pool, map, count)) {
  const CUresult result = REAL(cuMemPoolSetAccess)(pool, map, count);
  if (result == CUDA_SUCCESS) Runtime::get().pools().access_set(pool, map, count);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuDeviceGetDefaultMemPool, (CUmemoryPool* pool, CUdevice device), (pool, device)) {
  const CUresult result = REAL(cuDeviceGetDefaultMemPool)(pool, device);
  if (result == CUDA_SUCCESS && pool != nullptr) Runtime::get().pools().saw_device_pool(*pool, device);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuDeviceGetMemPool, (CUmemoryPool* pool, CUdevice device), (pool, device)) {
  const CUresult result = REAL(cuDeviceGetMemPool)(pool, device);
  if (result == CUDA_SUCCESS && pool != nullptr) Runtime::get().pools().saw_device_pool(*pool, device);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemFreeAsync, (CUdeviceptr dptr, CUstream stream), (dptr, stream)) {
  bool handled = false;
  const CUresult paged = paged_free_async(HookId::cuMemFreeAsync, dptr, stream, false, &handled);
  if (handled) return paged;
  return charged_free(HookId::cuMemFreeAsync, AllocationKind::device, dptr,
                      [&] { return REAL(cuMemFreeAsync)(dptr, stream); });
}

VGPUMEM_HOOK_DEFINE(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream stream), (dptr, stream)) {
  bool handled = false;
  const CUresult paged = paged_free_async(HookId::cuMemFreeAsync_ptsz, dptr, stream, true, &handled);
  if (handled) return paged;
  return charged_free(HookId::cuMemFreeAsync_ptsz, AllocationKind::device, dptr,
                      [&] { return REAL(cuMemFreeAsync_ptsz)(dptr, stream); });
}

// Forwarded: hooked so the shim can read an array's element size through
// the real driver (cuMemcpy3DBatchAsync's extents are in the array's elements).
VGPUMEM_FORWARDING_HOOK(cuArray3DGetDescriptor_v2, (CUDA_ARRAY3D_DESCRIPTOR * shape, CUarray array), (shape, array))

VGPUMEM_HOOK_DEFINE(cuArrayCreate_v2, (CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc), (array, desc)) {
  if (array == nullptr || desc == nullptr) return REAL(cuArrayCreate_v2)(array, desc);
  const std::uint64_t bytes = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  return charged_allocation(
      HookId::cuArrayCreate_v2, AllocationKind::array, current_device(), bytes,
      [&] { return REAL(cuArrayCreate_v2)(array, desc); }, [&] { return reinterpret_cast<std::uint64_t>(*array); },
      [&] { REAL(cuArrayDestroy)(*array); });
}

VGPUMEM_HOOK_DEFINE(cuArray3DCreate_v2, (CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc), (array, desc)) {
  if (array == nullptr || desc == nullptr) return REAL(cuArray3DCreate_v2)(array, desc);
  const std::uint64_t bytes = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
  return charged_allocation(
      HookId::cuArray3DCreate_v2, AllocationKind::array, current_device(), bytes,
      [&] { return REAL(cuArray3DCreate_v2)(array, desc); },
      [&] { return reinterpret_cast<std::uint64_t>(*array); }, [&] { REAL(cuArrayDestroy)(*array); });
}

VGPUMEM_HOOK_DEFINE(cuMipmappedArrayCreate,
                    (CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels),
                    (array, desc, levels)) {
  if (array == nullptr || desc == nullptr) return REAL(cuMipmappedArrayCreate)(array, desc, levels);
  // Each level halves every dimension; sum them.
  std::uint64_t bytes = 0;
  std::size_t w = desc->Width, h = desc->Height, d = desc->Depth;
  for (unsigned int level = 0; level < std::max(levels, 1u); ++level) {
    bytes += array_bytes(w, h, d, desc->Format, desc->NumChannels);
    w = std::max<std::size_t>(w / 2, 1);
    h = h ? std::max<std::size_t>(h / 2, 1) : 0;
    d = d ? std::max<std::size_t>(d / 2, 1) : 0;
  }
  return charged_allocation(
      HookId::cuMipmappedArrayCreate, AllocationKind::array, current_device(), bytes,
      [&] { return REAL(cuMipmappedArrayCreate)(array, desc, levels); },
      [&] { return reinterpret_cast<std::uint64_t>(*array); }, [&] { REAL(cuMipmappedArrayDestroy)(*array); });
}

VGPUMEM_HOOK_DEFINE(cuArrayDestroy, (CUarray array), (array)) {
  return charged_free(HookId::cuArrayDestroy, AllocationKind::array, reinterpret_cast<std::uint64_t>(array),
                      [&] { return REAL(cuArrayDestroy)(array); });
}

VGPUMEM_HOOK_DEFINE(cuMipmappedArrayDestroy, (CUmipmappedArray array), (array)) {
  return charged_free(HookId::cuMipmappedArrayDestroy, AllocationKind::array, reinterpret_cast<std::uint64_t>(array),
                      [&] { return REAL(cuMipmappedArrayDestroy)(array); });
}
