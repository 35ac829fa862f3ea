// Device memory: allocations and frees (plain, pitch, managed, arrays; the
// stream-ordered ones are in pools.cpp), host memory, queries. Device
// addresses are host addresses: an allocation is a fresh 2 MiB-aligned
// reservation with accessible memory in it; touching anything else faults,
// which kernels.cpp turns into CUDA_ERROR_ILLEGAL_ADDRESS.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sim.h"

namespace vgpusim {

namespace {

// cuMemAlloc & co. charge whole 512-byte units (their alignment); the real
// driver's packing of small allocations is not observable through the API.
constexpr std::uint64_t kAllocationUnit = 512;

}  // namespace

CUresult allocate_device(CUdeviceptr* out, std::uint64_t bytes, Region::Kind kind, const char* fault_name, Pool* pool) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_capture_allows(sim)) return r;
  if (sim.inject_fault(fault_name)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int device = pool ? pool->device : context->device;
  const std::uint64_t charged = round_up(bytes, kAllocationUnit);
  if (!sim.charge(device, charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t span = round_up(bytes, kGranularity);
  const std::uint64_t base = reserve_address_space(span, kGranularity);
  if (base == 0 || mmap(reinterpret_cast<void*>(base), round_up(bytes, 4096), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
    sim.refund(device, charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Region region;
  region.base = base;
  region.size = bytes;
  region.device = device;
  region.kind = kind;
  region.physical = charged;  // bytes charged, for the refund
  region.context = current_handle();
  region.pool = pool;
  if (pool != nullptr) {
    pool->used_now += charged;
    pool->used_high = std::max(pool->used_high, pool->used_now);
  }
  sim.regions[base] = region;
  *out = base;
  return CUDA_SUCCESS;
}

void release_region(Simulator& sim, std::uint64_t base) {
  auto it = sim.regions.find(base);
  if (it == sim.regions.end()) return;
  // The range stays reserved and becomes inaccessible: a stale pointer faults.
  protect_none(it->second.base, round_up(it->second.size, 4096));
  if (!it->second.freed) {
    sim.refund(it->second.device, it->second.physical);
    if (it->second.pool != nullptr) it->second.pool->used_now -= it->second.physical;
  }
  sim.regions.erase(it);
}

CUresult free_device(CUdeviceptr address) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (CUresult r = check_capture_allows(sim)) return r;
  if (address == 0) return CUDA_SUCCESS;
  auto it = sim.regions.find(address);
  if (it == sim.regions.end() || it->second.kind == Region::Kind::reservation || it->second.freed) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // cuMemFree synchronises: work already issued may still use the memory.
  if (CUresult r = wait_until(sim, context_tail(sim, *context), context)) return r;
  release_region(sim, address);
  return CUDA_SUCCESS;
}

CUresult free_device_async(CUdeviceptr address, CUstream stream_handle, bool per_thread_api) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (CUresult r = check_context(sim)) return r;
  auto it = sim.regions.find(address);
  if (address == 0 || it == sim.regions.end() || it->second.kind == Region::Kind::reservation || it->second.freed) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult error;
  Stream* stream = resolve_stream(sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  if (stream->capture != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // graph memory nodes are not simulated
  // The pool may hand the bytes out again at once (stream-ordered reuse);
  // the range itself stays mapped until the work ahead of the free is done.
  Region& region = it->second;
  sim.refund(region.device, region.physical);
  if (region.pool != nullptr) region.pool->used_now -= region.physical;
  region.freed = true;
  Operation operation;
  operation.what = "free";
  operation.run = [address] {
    release_region(Simulator::get(), address);
    return CUDA_SUCCESS;
  };
  return enqueue(sim, stream, std::move(operation));
}

}  // namespace vgpusim

using namespace vgpusim;

// ---- allocation APIs --------------------------------------------------------------
SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  Simulator::get().count("cuMemAlloc_v2");
  return allocate_device(p, bytes, Region::Kind::allocation, "cuMemAlloc", nullptr);
}
// The 32-bit ABI cannot address simulated device memory.
SIM_EXPORT CUresult cuMemAlloc(unsigned int*, unsigned int) { return CUDA_ERROR_NOT_SUPPORTED; }
SIM_EXPORT CUresult cuMemAllocPitch(unsigned int*, unsigned int*, unsigned int, unsigned int, unsigned int) {
  return CUDA_ERROR_NOT_SUPPORTED;
}
SIM_EXPORT CUresult cuMemFree(unsigned int) { return CUDA_ERROR_NOT_SUPPORTED; }

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* p, size_t* pitch, size_t width, size_t height, unsigned element) {
  Simulator::get().count("cuMemAllocPitch_v2");
  if (pitch == nullptr || width == 0 || height == 0 || (element != 4 && element != 8 && element != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pitch = round_up(width, 512);
  return allocate_device(p, *pitch * height, Region::Kind::allocation, "cuMemAlloc", nullptr);
}
SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned flags) {
  Simulator::get().count("cuMemAllocManaged");
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return allocate_device(p, bytes, Region::Kind::managed, "cuMemAlloc", nullptr);
}
SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  Simulator::get().count("cuMemFree_v2");
  return free_device(p);
}

// ---- arrays: plain device memory of the described size ------------------------------
namespace {
std::uint64_t element_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
  }
}
CUresult make_array(void** out, std::uint64_t w, std::uint64_t h, std::uint64_t d, CUarray_format f, unsigned ch) {
  if (out == nullptr || w == 0) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  const std::uint64_t element = element_bytes(f) * std::max(ch, 1u);
  const std::uint64_t row = w * element;
  const CUresult r = allocate_device(&p, row * std::max<std::uint64_t>(h, 1) * std::max<std::uint64_t>(d, 1),
                                     Region::Kind::allocation, "cuMemAlloc", nullptr);
  if (r == CUDA_SUCCESS) {
    Locked l;
    Region& region = l.sim.regions.at(p);
    region.array_pitch = row;
    region.array_element = element;
    region.array_height = std::max<std::uint64_t>(h, 1);
    region.array_depth = std::max<std::uint64_t>(d, 1);
    region.array_format = f;
    region.array_channels = std::max(ch, 1u);
  }
  *out = reinterpret_cast<void*>(p);
  return r;
}
}  // namespace

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray* a, const CUDA_ARRAY_DESCRIPTOR* d) {
  Simulator::get().count("cuArrayCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return make_array(reinterpret_cast<void**>(a), d->Width, d->Height, 1, d->Format, d->NumChannels);
}
SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  Simulator::get().count("cuArray3DCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return make_array(reinterpret_cast<void**>(a), d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}
SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* a, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  Simulator::get().count("cuMipmappedArrayCreate");
  if (d == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t total_w = 0, w = d->Width;
  for (unsigned l = 0; l < levels; ++l, w = std::max<std::uint64_t>(w / 2, 1)) total_w += w;
  return make_array(reinterpret_cast<void**>(a), total_w, d->Height, d->Depth, d->Format, d->NumChannels);
}
// The shape an array was made with (a height or depth of 0 reads back as 1).
SIM_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* d, CUarray a) {
  Locked l;
  l.sim.count("cuArray3DGetDescriptor_v2");
  const Region* region = l.sim.region_of(reinterpret_cast<std::uint64_t>(a));
  if (d == nullptr || region == nullptr || region->array_element == 0) return CUDA_ERROR_INVALID_HANDLE;
  *d = CUDA_ARRAY3D_DESCRIPTOR{};
  d->Width = region->array_pitch / region->array_element;
  d->Height = region->array_height;
  d->Depth = region->array_depth;
  d->Format = region->array_format;
  d->NumChannels = region->array_channels;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray a) {
  Simulator::get().count("cuArrayDestroy");
  return a ? free_device(reinterpret_cast<CUdeviceptr>(a)) : CUDA_ERROR_INVALID_HANDLE;
}
SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) {
  Simulator::get().count("cuMipmappedArrayDestroy");
  return a ? free_device(reinterpret_cast<CUdeviceptr>(a)) : CUDA_ERROR_INVALID_HANDLE;
}

// ---- host memory ------------------------------------------------------------------------
namespace {
// Pinned host bytes, keyed by pointer (registered ranges with the low bit set,
// so one pointer can be both allocated and registered). Caller holds the lock.
void track_pinned(Simulator& sim, std::uint64_t key, std::uint64_t bytes) {
  sim.host_allocations[key] = bytes;
  sim.pinned_ranges[key & ~std::uint64_t{1}] = bytes;
  sim.stats.pinned_now += bytes;
  sim.stats.pinned_peak = std::max(sim.stats.pinned_peak, sim.stats.pinned_now);
}
CUresult untrack_pinned(Simulator& sim, std::uint64_t key, CUresult unknown) {
  auto it = sim.host_allocations.find(key);
  if (it == sim.host_allocations.end()) return unknown;
  sim.stats.pinned_now -= it->second;
  sim.pinned_ranges.erase(key & ~std::uint64_t{1});
  sim.host_allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult host_allocate(void** p, std::size_t bytes) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_capture_allows(sim)) return r;
  if (sim.inject_fault("hostalloc")) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = std::aligned_alloc(4096, round_up(std::max<std::size_t>(bytes, 1), 4096));
  if (*p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  track_pinned(sim, reinterpret_cast<std::uint64_t>(*p), bytes);
  spend_pin_time(sim, bytes, /*registering=*/false);
  return CUDA_SUCCESS;
}
}  // namespace

SIM_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  stall_point("hostalloc");
  Simulator::get().count("cuMemHostAlloc");
  return host_allocate(p, bytes);
}
SIM_EXPORT CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  stall_point("hostalloc");
  Simulator::get().count("cuMemAllocHost_v2");
  return host_allocate(p, bytes);
}
SIM_EXPORT CUresult cuMemFreeHost(void* p) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemFreeHost");
  // Freeing pinned memory synchronises: a copy still queued may use it.
  if (Context* context = current_context(sim)) wait_until(sim, context_tail(sim, *context), nullptr);
  const CUresult result = untrack_pinned(sim, reinterpret_cast<std::uint64_t>(p), CUDA_ERROR_INVALID_VALUE);
  if (result == CUDA_SUCCESS) std::free(p);
  return result;
}
SIM_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemHostRegister_v2");
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (sim.inject_fault("hostalloc")) return CUDA_ERROR_OUT_OF_MEMORY;
  track_pinned(sim, reinterpret_cast<std::uint64_t>(p) | 1, bytes);  // registered, not owned
  spend_pin_time(sim, bytes, /*registering=*/true);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuMemHostUnregister(void* p) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemHostUnregister");
  if (Context* context = current_context(sim)) wait_until(sim, context_tail(sim, *context), nullptr);
  return untrack_pinned(sim, reinterpret_cast<std::uint64_t>(p) | 1, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

// The legacy 32-bit ABI cannot report simulated sizes.
SIM_EXPORT CUresult cuMemGetInfo(unsigned int*, unsigned int*) { return CUDA_ERROR_NOT_SUPPORTED; }

// ---- queries -----------------------------------------------------------------------------
SIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemGetInfo_v2");
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Device& d = sim.devices[static_cast<std::size_t>(context->device)];
  *free_bytes = d.memory_bytes - d.physical_now;
  *total_bytes = d.memory_bytes;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  Region* region = sim.region_of(ptr);
  if (region == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = region->base;
  if (size) *size = region->size;
  return CUDA_SUCCESS;
}

namespace {
CUresult pointer_attribute(Simulator& sim, void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Region* region = sim.region_of(ptr);
  if (region == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = region->device; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = CU_MEMORYTYPE_DEVICE; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = region->context ? region->context : sim.primary.at(static_cast<std::size_t>(region->device));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = region->base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = region->size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<int*>(data) = sim.accessible(ptr, 1) ? 1 : 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data) = region->kind == Region::Kind::managed; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
}  // namespace

SIM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return pointer_attribute(sim, data, attribute, ptr);
}

SIM_EXPORT CUresult cuPointerGetAttributes(unsigned count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    if (pointer_attribute(sim, data[i], attributes[i], ptr) != CUDA_SUCCESS && data[i] != nullptr) {
      std::memset(data[i], 0, sizeof(int));  // attributes of unknown memory read as zero
    }
  }
  return CUDA_SUCCESS;
}
