// Device memory: allocations, the VMM calls, pools, arrays, host memory,
// queries. Device addresses are host addresses: a reservation is PROT_NONE
// address space; physical memory is a memfd mapped into it; access is
// granted by mprotect. Touching anything else faults, which kernels.cpp turns
// into CUDA_ERROR_ILLEGAL_ADDRESS.
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

void release_physical_if_unused(Simulator& sim, std::uint64_t handle) {
  auto it = sim.physical.find(handle);
  if (it == sim.physical.end() || it->second.handle_refs > 0 || it->second.mappings > 0) return;
  if (!it->second.host_location) sim.refund(it->second.device, it->second.size);
  ::close(it->second.fd);
  sim.physical.erase(it);
}

}  // namespace

CUresult allocate_device(CUdeviceptr* out, std::uint64_t bytes, Region::Kind kind, const char* fault_name) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (sim.inject_fault(fault_name)) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t charged = round_up(bytes, kAllocationUnit);
  if (!sim.charge(context->device, charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::uint64_t span = round_up(bytes, kGranularity);
  const std::uint64_t base = reserve_address_space(span, kGranularity);
  if (base == 0 || mmap(reinterpret_cast<void*>(base), round_up(bytes, 4096), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
    sim.refund(context->device, charged);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Region region;
  region.base = base;
  region.size = bytes;
  region.device = context->device;
  region.kind = kind;
  region.physical = charged;  // bytes charged, for the refund
  sim.regions[base] = region;
  *out = base;
  return CUDA_SUCCESS;
}

CUresult free_device(CUdeviceptr address) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (CUresult r = check_context(sim)) return r;
  if (address == 0) return CUDA_SUCCESS;
  auto it = sim.regions.find(address);
  if (it == sim.regions.end() || it->second.kind == Region::Kind::reservation) return CUDA_ERROR_INVALID_VALUE;
  // The range stays reserved and becomes inaccessible: a stale pointer faults.
  protect_none(it->second.base, round_up(it->second.size, 4096));
  sim.refund(it->second.device, it->second.physical);
  sim.regions.erase(it);
  return CUDA_SUCCESS;
}

}  // namespace vgpusim

using namespace vgpusim;

// ---- allocation APIs --------------------------------------------------------------
SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  Simulator::get().count("cuMemAlloc_v2");
  return allocate_device(p, bytes, Region::Kind::allocation, "cuMemAlloc");
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
  return allocate_device(p, *pitch * height, Region::Kind::allocation, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned flags) {
  Simulator::get().count("cuMemAllocManaged");
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return allocate_device(p, bytes, Region::Kind::managed, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  Simulator::get().count("cuMemFree_v2");
  return free_device(p);
}

// Stream-ordered allocation: the simulator runs streams in call order, so an
// allocation exists from the call and a free returns memory at once (the
// pool keeps nothing cached).
SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream) {
  Simulator::get().count("cuMemAllocAsync");
  return allocate_device(p, bytes, Region::Kind::pool, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* p, size_t bytes, CUstream) {
  Simulator::get().count("cuMemAllocAsync_ptsz");
  return allocate_device(p, bytes, Region::Kind::pool, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t bytes, CUmemoryPool pool, CUstream) {
  Simulator::get().count("cuMemAllocFromPoolAsync");
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return allocate_device(p, bytes, Region::Kind::pool, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* p, size_t bytes, CUmemoryPool pool, CUstream) {
  Simulator::get().count("cuMemAllocFromPoolAsync_ptsz");
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return allocate_device(p, bytes, Region::Kind::pool, "cuMemAlloc");
}
SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream) {
  Simulator::get().count("cuMemFreeAsync");
  return free_device(p);
}
SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream) {
  Simulator::get().count("cuMemFreeAsync_ptsz");
  return free_device(p);
}

namespace {
// One pool handle per device; pools are not simulated beyond allocation.
CUmemoryPool pool_handle(int device) { return reinterpret_cast<CUmemoryPool>(static_cast<std::uintptr_t>(0x9000 + device)); }
}  // namespace

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pool = pool_handle(device);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) { return cuDeviceGetDefaultMemPool(pool, device); }
SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; }
SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void* value) {
  if (value) std::memset(value, 0, sizeof(cuuint64_t));
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool, size_t) { return CUDA_SUCCESS; }

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
  const CUresult r = allocate_device(&p, w * std::max<std::uint64_t>(h, 1) * std::max<std::uint64_t>(d, 1) *
                                             element_bytes(f) * std::max(ch, 1u),
                                     Region::Kind::allocation, "cuMemAlloc");
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
SIM_EXPORT CUresult cuArrayDestroy(CUarray a) {
  Simulator::get().count("cuArrayDestroy");
  return a ? free_device(reinterpret_cast<CUdeviceptr>(a)) : CUDA_ERROR_INVALID_HANDLE;
}
SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) {
  Simulator::get().count("cuMipmappedArrayDestroy");
  return a ? free_device(reinterpret_cast<CUdeviceptr>(a)) : CUDA_ERROR_INVALID_HANDLE;
}

// ---- virtual memory management ---------------------------------------------------------
SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;  // MINIMUM and RECOMMENDED alike, as measured on the H100
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemCreate");
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 || size % kGranularity != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
  if (!host && (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
                prop->location.id >= static_cast<int>(sim.devices.size()))) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (sim.inject_fault("cuMemCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!host && !sim.charge(prop->location.id, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int fd = memfd_create("vgpusim-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) ::close(fd);
    if (!host) sim.refund(prop->location.id, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const std::uint64_t h = sim.next_handle++;
  sim.physical[h] = Physical{host ? -1 : prop->location.id, size, fd, 1, 0, host};
  *handle = h;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemRelease");
  auto it = sim.physical.find(handle);
  if (it == sim.physical.end() || it->second.handle_refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.handle_refs;
  release_physical_if_unused(sim, handle);  // memory goes when no handle and no mapping remain
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemAddressReserve");
  if (ptr == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 ||
      (alignment != 0 && (alignment & (alignment - 1)) != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  static_cast<void>(addr);  // a hint; the simulator does not honour fixed addresses
  const std::uint64_t base = reserve_address_space(size, alignment);
  if (base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  Region region;
  region.base = base;
  region.size = size;
  region.kind = Region::Kind::reservation;
  sim.regions[base] = region;
  *ptr = base;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemAddressFree");
  auto it = sim.regions.find(ptr);
  if (it == sim.regions.end() || it->second.kind != Region::Kind::reservation || it->second.size != size ||
      !it->second.mappings.empty()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  sim.regions.erase(it);  // the address space itself stays reserved (never reused)
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemMap");
  Region* region = sim.region_of(ptr, size);
  auto phys = sim.physical.find(handle);
  if (region == nullptr || region->kind != Region::Kind::reservation || phys == sim.physical.end() || flags != 0 ||
      offset != 0 || size == 0 || size % kGranularity != 0 || (ptr - region->base) % kGranularity != 0 ||
      size > phys->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::uint64_t at = ptr - region->base;
  for (const auto& [start, m] : region->mappings) {
    if (at < start + m.size && start < at + size) return CUDA_ERROR_INVALID_VALUE;  // overlaps a mapping
  }
  // Mapped but not yet accessible: cuMemSetAccess grants access, as on hardware.
  if (mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, phys->second.fd, 0) == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  region->mappings[at] = Region::Mapping{size, handle, false};
  ++phys->second.mappings;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemSetAccess");
  Region* region = sim.region_of(ptr, size);
  if (region == nullptr || desc == nullptr || count == 0 || region->kind != Region::Kind::reservation) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int prot = PROT_NONE;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  const std::uint64_t end = ptr - region->base + size;
  if (!region->covered_by_whole_mappings(ptr - region->base, size)) return CUDA_ERROR_INVALID_VALUE;
  for (std::uint64_t at = ptr - region->base; at < end;) {
    auto& m = region->mappings[at];
    mprotect(reinterpret_cast<void*>(region->base + at), m.size, prot);
    m.accessible = prot != PROT_NONE;
    at += m.size;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemUnmap");
  Region* region = sim.region_of(ptr, size);
  if (region == nullptr || region->kind != Region::Kind::reservation) return CUDA_ERROR_INVALID_VALUE;
  // Whole mappings only: a partial unmap is an error, as on hardware.
  const std::uint64_t end = ptr - region->base + size;
  if (!region->covered_by_whole_mappings(ptr - region->base, size)) return CUDA_ERROR_INVALID_VALUE;
  // Like the real driver, unmapping does not wait for work that still uses
  // the range (measured on the H100): a kernel touching it afterwards faults.
  for (std::uint64_t at = ptr - region->base; at < end;) {
    auto it = region->mappings.find(at);
    const std::uint64_t handle = it->second.handle, length = it->second.size;
    protect_none(region->base + at, length);
    region->mappings.erase(it);
    auto phys = sim.physical.find(handle);
    if (phys != sim.physical.end()) {
      --phys->second.mappings;
      release_physical_if_unused(sim, handle);
    }
    at += length;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemRetainAllocationHandle");
  const auto address = reinterpret_cast<std::uint64_t>(addr);
  Region* region = sim.region_of(address);
  if (handle == nullptr || region == nullptr || region->kind != Region::Kind::reservation) return CUDA_ERROR_INVALID_VALUE;
  auto it = region->mappings.upper_bound(address - region->base);
  if (it == region->mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (address - region->base >= it->first + it->second.size) return CUDA_ERROR_INVALID_VALUE;
  *handle = it->second.handle;
  ++sim.physical[it->second.handle].handle_refs;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle h) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  auto it = sim.physical.find(h);
  if (prop == nullptr || it == sim.physical.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = it->second.host_location ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = it->second.host_location ? 0 : it->second.device;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType type, unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemExportToShareableHandle");
  auto it = sim.physical.find(handle);
  if (shareable == nullptr || it == sim.physical.end() || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  *static_cast<int*>(shareable) = ::dup(it->second.fd);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* shareable,
                                                   CUmemAllocationHandleType type) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemImportFromShareableHandle");
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = ::dup(static_cast<int>(reinterpret_cast<std::intptr_t>(shareable)));
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
  // Imported memory belongs to the exporter: not charged here.
  const std::uint64_t h = sim.next_handle++;
  sim.physical[h] = Physical{0, static_cast<std::uint64_t>(st.st_size), fd, 1, 0, true};
  *handle = h;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle*, CUdeviceptr) {
  Simulator::get().count("cuIpcGetMemHandle");
  return CUDA_ERROR_NOT_SUPPORTED;  // legacy IPC is not simulated
}

// ---- host memory ------------------------------------------------------------------------
namespace {
// Pinned host bytes, keyed by pointer (registered ranges with the low bit set,
// so one pointer can be both allocated and registered). Caller holds the lock.
void track_pinned(Simulator& sim, std::uint64_t key, std::uint64_t bytes) {
  sim.host_allocations[key] = bytes;
  sim.stats.pinned_now += bytes;
  sim.stats.pinned_peak = std::max(sim.stats.pinned_peak, sim.stats.pinned_now);
}
CUresult untrack_pinned(Simulator& sim, std::uint64_t key, CUresult unknown) {
  auto it = sim.host_allocations.find(key);
  if (it == sim.host_allocations.end()) return unknown;
  sim.stats.pinned_now -= it->second;
  sim.host_allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult host_allocate(void** p, std::size_t bytes) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (sim.inject_fault("hostalloc")) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = std::aligned_alloc(4096, round_up(std::max<std::size_t>(bytes, 1), 4096));
  if (*p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  track_pinned(sim, reinterpret_cast<std::uint64_t>(*p), bytes);
  return CUDA_SUCCESS;
}
}  // namespace

SIM_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  Simulator::get().count("cuMemHostAlloc");
  return host_allocate(p, bytes);
}
SIM_EXPORT CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  Simulator::get().count("cuMemAllocHost_v2");
  return host_allocate(p, bytes);
}
SIM_EXPORT CUresult cuMemFreeHost(void* p) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemFreeHost");
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
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuMemHostUnregister(void* p) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemHostUnregister");
  return untrack_pinned(sim, reinterpret_cast<std::uint64_t>(p) | 1, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

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
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = sim.primary.at(static_cast<std::size_t>(region->device)); return CUDA_SUCCESS;
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
