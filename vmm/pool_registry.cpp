#include "vmm/pool_registry.h"

namespace vgpumem::vmm {

void PoolRegistry::saw_device_pool(CUmemoryPool pool, int device) {
  std::lock_guard lock(mutex_);
  pools_.try_emplace(pool, Pool{device, true});  // a pool made and judged earlier keeps its verdict
}

void PoolRegistry::created(CUmemoryPool pool, const CUmemPoolProps& props) {
  const bool on_device = props.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  const bool pageable = on_device && props.allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
                        props.handleTypes == CU_MEM_HANDLE_TYPE_NONE && props.maxSize == 0 && props.usage == 0;
  std::lock_guard lock(mutex_);
  pools_[pool] = Pool{on_device ? props.location.id : -1, pageable};
}

void PoolRegistry::access_set(CUmemoryPool pool, const CUmemAccessDesc* descs, std::size_t count) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || descs == nullptr) return;
  for (std::size_t i = 0; i < count; ++i) {
    const bool other_device = descs[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                              descs[i].location.id != it->second.device;
    if (other_device && descs[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) it->second.pageable = false;
  }
}

void PoolRegistry::destroyed(CUmemoryPool pool) {
  std::lock_guard lock(mutex_);
  pools_.erase(pool);
}

std::optional<int> PoolRegistry::pageable_on(CUmemoryPool pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || !it->second.pageable) return std::nullopt;
  return it->second.device;
}

std::optional<int> PoolRegistry::device_of(CUmemoryPool pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || it->second.device < 0) return std::nullopt;
  return it->second.device;
}

bool PoolRegistry::on_host(CUmemoryPool pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  return it != pools_.end() && it->second.device < 0;
}

}  // namespace vgpumem::vmm
