// Stream-ordered allocation and memory pools: cuMemAllocAsync,
// cuMemAllocFromPoolAsync, cuMemFreeAsync (each also _ptsz), the default and
// explicit pools and their attributes. The simulator's pools cache nothing:
// freed bytes return to the device at once, so a pool's reserved memory is its
// used memory and trimming has nothing to do.
#include <cstring>

#include "sim.h"

using namespace vgpusim;

namespace {

Pool* pool_of(Simulator& sim, CUmemoryPool handle) {
  auto* pool = reinterpret_cast<Pool*>(handle);
  return sim.pools.count(pool) ? pool : nullptr;
}

CUresult allocate_async(CUdeviceptr* p, size_t bytes, CUmemoryPool pool_handle, CUstream stream_handle,
                        bool per_thread_api) {
  Pool* pool = nullptr;
  {
    Locked l;
    if (CUresult r = check_context(l.sim)) return r;
    CUresult error;
    Stream* stream = resolve_stream(l.sim, stream_handle, per_thread_api, &error);
    if (stream == nullptr) return error;
    if (stream->capture != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // graph memory nodes are not simulated
    pool = pool_handle ? pool_of(l.sim, pool_handle)
                       : l.sim.default_pools.at(static_cast<std::size_t>(l.sim.contexts.at(current_handle()).device));
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  }
  // Memory from a pool exists for the stream from this point of its work; the
  // simulator makes it exist at once, which is indistinguishable in order.
  return allocate_device(p, bytes, Region::Kind::pool, "cuMemAlloc", pool);
}

}  // namespace

// Called by cuInit: one default pool per device.
namespace vgpusim {
void create_default_pools(Simulator& sim) {
  for (std::size_t d = 0; d < sim.devices.size(); ++d) {
    auto* pool = new Pool;
    pool->device = static_cast<int>(d);
    sim.pools.insert(pool);
    sim.default_pools.push_back(pool);
  }
}
}  // namespace vgpusim

#define SIM_ALLOC_ASYNC(name, per_thread)                                               \
  SIM_EXPORT CUresult name(CUdeviceptr* p, size_t bytes, CUstream s) {                  \
    Simulator::get().count(#name);                                                      \
    return allocate_async(p, bytes, nullptr, s, per_thread);                            \
  }
#define SIM_ALLOC_FROM_POOL(name, per_thread)                                                         \
  SIM_EXPORT CUresult name(CUdeviceptr* p, size_t bytes, CUmemoryPool pool, CUstream s) {             \
    Simulator::get().count(#name);                                                                    \
    return pool ? allocate_async(p, bytes, pool, s, per_thread) : CUDA_ERROR_INVALID_VALUE;           \
  }
#define SIM_FREE_ASYNC(name, per_thread)                 \
  SIM_EXPORT CUresult name(CUdeviceptr p, CUstream s) {  \
    Simulator::get().count(#name);                       \
    return free_device_async(p, s, per_thread);          \
  }
SIM_ALLOC_ASYNC(cuMemAllocAsync, false)
SIM_ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)
SIM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, false)
SIM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, true)
SIM_FREE_ASYNC(cuMemFreeAsync, false)
SIM_FREE_ASYNC(cuMemFreeAsync_ptsz, true)

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  Locked l;
  if (!l.sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= static_cast<int>(l.sim.default_pools.size())) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(l.sim.default_pools[static_cast<std::size_t>(device)]);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice device) { return cuDeviceGetDefaultMemPool(pool, device); }

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  Locked l;
  l.sim.count("cuMemPoolCreate");
  if (!l.sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (out == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (props->location.id < 0 || props->location.id >= static_cast<int>(l.sim.devices.size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  auto* pool = new Pool;
  pool->device = props->location.id;
  pool->is_default = false;
  l.sim.pools.insert(pool);
  *out = reinterpret_cast<CUmemoryPool>(pool);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool handle) {
  Locked l;
  l.sim.count("cuMemPoolDestroy");
  Pool* pool = pool_of(l.sim, handle);
  if (pool == nullptr || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  // Memory still allocated from it stays valid until freed, as with the real
  // driver; the pool object goes when the last of it does (leaked here: rare).
  l.sim.pools.erase(pool);
  if (pool->used_now == 0) delete pool;
  return CUDA_SUCCESS;
}

// Access for other devices to the pool's memory (the pool's own device
// always has it). Recorded, not enforced: the simulator has no peer kernels.
SIM_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool handle, const CUmemAccessDesc* map, size_t count) {
  Locked l;
  l.sim.count("cuMemPoolSetAccess");
  Pool* pool = pool_of(l.sim, handle);
  if (pool == nullptr || (map == nullptr && count != 0)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    const int device = map[i].location.id;
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || device < 0 ||
        device >= static_cast<int>(l.sim.devices.size())) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (device == pool->device) continue;
    const std::uint64_t bit = std::uint64_t{1} << device;
    pool->peer_access = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? pool->peer_access & ~bit : pool->peer_access | bit;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool handle, CUmemPool_attribute attribute, void* value) {
  Locked l;
  Pool* pool = pool_of(l.sim, handle);
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: std::memcpy(&pool->release_threshold, value, sizeof(cuuint64_t)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: std::memcpy(&pool->reuse_follow_event, value, sizeof(int)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: std::memcpy(&pool->reuse_opportunistic, value, sizeof(int)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: std::memcpy(&pool->reuse_internal, value, sizeof(int)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
      // Only resetting (to zero) is allowed: the high-water mark restarts from now.
      cuuint64_t v = 0;
      std::memcpy(&v, value, sizeof v);
      if (v != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used_now;
      return CUDA_SUCCESS;
    }
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool handle, CUmemPool_attribute attribute, void* value) {
  Locked l;
  Pool* pool = pool_of(l.sim, handle);
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t bytes = 0;
  switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: bytes = pool->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: bytes = pool->used_now; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: bytes = pool->used_high; break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: std::memcpy(value, &pool->reuse_follow_event, sizeof(int)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: std::memcpy(value, &pool->reuse_opportunistic, sizeof(int)); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: std::memcpy(value, &pool->reuse_internal, sizeof(int)); return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  std::memcpy(value, &bytes, sizeof bytes);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool handle, size_t) {
  Locked l;
  return pool_of(l.sim, handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
