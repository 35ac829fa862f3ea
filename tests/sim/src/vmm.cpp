// The virtual memory management calls: physical handles (cuMemCreate,
// cuMemRelease, retain, export/import), address reservations, mapping and
// access. A reservation is PROT_NONE address space; physical memory is a
// memfd mapped into it without access; cuMemSetAccess grants access
// (mprotect). Like the H100's, cuMemUnmap does not wait for work that still
// uses the range (docs/gpu-facts.md §8.6c). Each call advances the host's
// clock by what it costs under the cost model in force (host_costs.cpp).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "sim.h"

using namespace vgpusim;

namespace {

void release_physical_if_unused(Simulator& sim, std::uint64_t handle) {
  auto it = sim.physical.find(handle);
  if (it == sim.physical.end() || it->second.handle_refs > 0 || it->second.mappings > 0) return;
  if (!it->second.host_location) {
    sim.refund(it->second.device, it->second.size, false);
    scrub_released(sim, it->second.device, it->second.size);
  }
  ::close(it->second.fd);
  sim.physical.erase(it);
}

}  // namespace

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;  // MINIMUM and RECOMMENDED alike, as measured on the H100
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  stall_point("cuMemCreate");
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
  if (!host && !sim.charge(prop->location.id, size, false)) return CUDA_ERROR_OUT_OF_MEMORY;
  const int fd = memfd_create("vgpusim-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) ::close(fd);
    if (!host) sim.refund(prop->location.id, size, false);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const std::uint64_t h = sim.next_handle++;
  sim.physical[h] = Physical{host ? -1 : prop->location.id, size, fd, 1, 0, host, prop->requestedHandleTypes};
  *handle = h;
  spend_vmm_time(sim, vmm_call_ns(sim, VmmCall::create, size), "cuMemCreate");
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemRelease");
  auto it = sim.physical.find(handle);
  if (it == sim.physical.end() || it->second.handle_refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.handle_refs;
  spend_vmm_time(sim, vmm_call_ns(sim, VmmCall::release, it->second.size), "cuMemRelease");
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
  spend_vmm_time(sim, vmm_call_ns(sim, VmmCall::reserve, size), "cuMemAddressReserve");
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
  spend_vmm_time(sim, vmm_call_ns(sim, VmmCall::address_free, size), "cuMemAddressFree");
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemMap");
  Region* region = sim.region_of(ptr, size);
  auto phys = sim.physical.find(handle);
  // "offset: currently must be zero" (cuda.h, CUDA 13.0): a handle maps from
  // its start only. Refused here as documented, so that no mapping the shim
  // relies on works here and not on a GPU (the probe owed will say whether
  // a driver accepts more).
  if (region == nullptr || region->kind != Region::Kind::reservation || phys == sim.physical.end() || flags != 0 ||
      offset != 0 || size == 0 || size % kGranularity != 0 || (ptr - region->base) % kGranularity != 0 ||
      offset + size > phys->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::uint64_t at = ptr - region->base;
  for (const auto& [start, m] : region->mappings) {
    if (at < start + m.size && start < at + size) return CUDA_ERROR_INVALID_VALUE;  // overlaps a mapping
  }
  // Mapped but not yet accessible: cuMemSetAccess grants access, as on hardware.
  if (mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, phys->second.fd,
           static_cast<off_t>(offset)) == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  region->mappings[at] = Region::Mapping{size, handle, false, {}, offset};
  if (++phys->second.mappings == 1 && !phys->second.host_location) {
    sim.mapping_changed(phys->second.device, phys->second.size, true);
  }
  spend_map_time(sim, phys->second.device, size);
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
  double cost = vmm_range_call_ns(sim, VmmCall::set_access, size);
  for (std::uint64_t at = ptr - region->base; at < end;) {
    auto& m = region->mappings[at];
    cost += vmm_handle_ns(sim, VmmCall::set_access, m.size);  // per mapping: each is a handle's
    mprotect(reinterpret_cast<void*>(region->base + at), m.size, prot);
    // The host's page tables for the whole mapping in one call rather than
    // one fault a page on first touch (the copies that follow a map touch it
    // all; under a VM each fault is an exit). Best effort: kernels before
    // 5.14 refuse the advice, and touching the pages later works the same.
    if (prot != PROT_NONE) {
      madvise(reinterpret_cast<void*>(region->base + at), m.size,
              (prot & PROT_WRITE) != 0 ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
    }
    m.accessible = prot != PROT_NONE;
    for (std::size_t i = 0; i < count; ++i) {
      if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE) m.access[desc[i].location.id] = desc[i].flags;
    }
    at += m.size;
  }
  spend_vmm_time(sim, cost, "cuMemSetAccess");
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
  double cost = vmm_range_call_ns(sim, VmmCall::unmap, size);
  for (std::uint64_t at = ptr - region->base; at < end;) {
    auto it = region->mappings.find(at);
    const std::uint64_t handle = it->second.handle, length = it->second.size;
    cost += vmm_handle_ns(sim, VmmCall::unmap, length);
    protect_none(region->base + at, length);
    region->mappings.erase(it);
    auto phys = sim.physical.find(handle);
    if (phys != sim.physical.end()) {
      if (--phys->second.mappings == 0 && !phys->second.host_location) {
        sim.mapping_changed(phys->second.device, phys->second.size, false);
      }
      release_physical_if_unused(sim, handle);
    }
    at += length;
  }
  spend_vmm_time(sim, cost, "cuMemUnmap");
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

// What cuMemSetAccess granted `location` on the mapping at `ptr`; an
// address with no mapping of a reservation (cuMemAlloc memory included) is
// CUDA_ERROR_INVALID_VALUE.
SIM_EXPORT CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemGetAccess");
  Region* region = sim.region_of(ptr);
  if (flags == nullptr || location == nullptr || region == nullptr || region->kind != Region::Kind::reservation) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto it = region->mappings.upper_bound(ptr - region->base);
  if (it == region->mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (ptr - region->base >= it->first + it->second.size) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
    *flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
  }
  const auto granted = it->second.access.find(location->id);
  *flags = granted == it->second.access.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE : granted->second;
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
  prop->requestedHandleTypes = it->second.handle_types;
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

// Legacy IPC: a handle for cuMemAlloc memory; nothing else is IPC capable
// (virtual-memory mappings and stream-ordered allocations get
// CUDA_ERROR_INVALID_VALUE, as the driver answers for pool memory; the code
// for a VMM mapping is still to be confirmed on hardware). No other process
// can open the handle: cuIpcOpenMemHandle is not simulated.
SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr address) {
  Locked l;
  l.sim.count("cuIpcGetMemHandle");
  if (CUresult r = check_context(l.sim)) return r;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Region* region = l.sim.region_of(address);
  if (region == nullptr || region->freed || region->kind != Region::Kind::allocation) return CUDA_ERROR_INVALID_VALUE;
  *handle = CUipcMemHandle{};
  std::memcpy(handle->reserved, &region->base, sizeof region->base);
  return CUDA_SUCCESS;
}

