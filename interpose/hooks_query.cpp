// Memory queries see the cap as the device: frameworks size their caches and
// batch heuristics from these numbers.
#include <algorithm>

#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

// total = the cap (or the device, if smaller); free = what the cap still
// allows, never more than the device really has free. Clamped, never an
// error, and either output may be NULL.
VGPUMEM_HOOK_DEFINE(cuMemGetInfo_v2, (size_t* free_bytes, size_t* total_bytes), (free_bytes, total_bytes)) {
  Runtime& runtime = Runtime::get();
  std::size_t real_free = 0;
  std::size_t real_total = 0;
  const CUresult result = REAL(cuMemGetInfo_v2)(&real_free, &real_total);
  if (result != CUDA_SUCCESS) return result;
  const int device = current_device();
  if (device >= 0) {
    const vmm::DeviceUsage usage = runtime.accounting().usage(device);
    if (usage.cap != vmm::kUncapped) {
      // Chunks the pager holds idle are room, not use.
      const vmm::Pager* pager = runtime.pager_for(device);
      const std::uint64_t used = pager != nullptr ? pager->charged_in_use(device) : usage.counted;
      const std::uint64_t total = std::min<std::uint64_t>(usage.cap, real_total);
      const std::uint64_t allowed = used >= total ? 0 : total - used;
      real_total = static_cast<std::size_t>(total);
      real_free = static_cast<std::size_t>(std::min<std::uint64_t>(allowed, real_free));
    }
  }
  if (free_bytes != nullptr) *free_bytes = real_free;
  if (total_bytes != nullptr) *total_bytes = real_total;
  return result;
}

VGPUMEM_HOOK_DEFINE(cuDeviceTotalMem_v2, (size_t* bytes, CUdevice device), (bytes, device)) {
  Runtime& runtime = Runtime::get();
  const CUresult result = REAL(cuDeviceTotalMem_v2)(bytes, device);
  if (result != CUDA_SUCCESS || bytes == nullptr) return result;
  const std::uint64_t cap = runtime.accounting().usage(device).cap;
  if (cap != vmm::kUncapped) *bytes = static_cast<std::size_t>(std::min<std::uint64_t>(cap, *bytes));
  return result;
}
