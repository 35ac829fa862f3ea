// Texture and surface objects: handles for a resource description, kept as
// given. Kernels read through them with vgpusimTexObjectResource (from a
// kernel body, while the simulator's lock is held: the objects have a lock
// of their own). Filtering, addressing modes and texture caches are not
// simulated.
#include <map>
#include <mutex>

#include "sim.h"

using namespace vgpusim;

namespace {

struct Objects {
  std::mutex mutex;
  std::map<unsigned long long, CUDA_RESOURCE_DESC> resources;  // textures and surfaces share the numbering
  unsigned long long next = 1;
};

Objects& objects() {
  static Objects* all = new Objects;  // outlives every thread that may still destroy one
  return *all;
}

// The device memory a linear or pitched resource names must be mapped and
// accessible where the description says; arrays are checked for existence.
bool resource_valid(const CUDA_RESOURCE_DESC& r) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  switch (r.resType) {
    case CU_RESOURCE_TYPE_LINEAR:
      return r.res.linear.devPtr != 0 && r.res.linear.sizeInBytes != 0 &&
             sim.accessible(r.res.linear.devPtr, r.res.linear.sizeInBytes);
    case CU_RESOURCE_TYPE_PITCH2D:
      return r.res.pitch2D.devPtr != 0 && r.res.pitch2D.height != 0 &&
             r.res.pitch2D.pitchInBytes != 0 &&
             sim.accessible(r.res.pitch2D.devPtr, r.res.pitch2D.pitchInBytes * r.res.pitch2D.height);
    case CU_RESOURCE_TYPE_ARRAY:
      return sim.region_of(reinterpret_cast<std::uint64_t>(r.res.array.hArray)) != nullptr;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      return sim.region_of(reinterpret_cast<std::uint64_t>(r.res.mipmap.hMipmappedArray)) != nullptr;
    default: return false;
  }
}

CUresult create(unsigned long long* out, const CUDA_RESOURCE_DESC* resource, bool surface, const char* api) {
  Simulator::get().count(api);
  if (out == nullptr || resource == nullptr || !resource_valid(*resource)) return CUDA_ERROR_INVALID_VALUE;
  if (surface && resource->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
  Objects& all = objects();
  std::lock_guard lock(all.mutex);
  *out = all.next++;
  all.resources[*out] = *resource;
  return CUDA_SUCCESS;
}

CUresult destroy(unsigned long long object, const char* api) {
  Simulator::get().count(api);
  Objects& all = objects();
  std::lock_guard lock(all.mutex);
  return all.resources.erase(object) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult resource_of(unsigned long long object, CUDA_RESOURCE_DESC* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Objects& all = objects();
  std::lock_guard lock(all.mutex);
  auto it = all.resources.find(object);
  if (it == all.resources.end()) return CUDA_ERROR_INVALID_VALUE;
  *out = it->second;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuTexObjectCreate(CUtexObject* object, const CUDA_RESOURCE_DESC* resource,
                                      const CUDA_TEXTURE_DESC* texture, const CUDA_RESOURCE_VIEW_DESC*) {
  if (texture == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return create(object, resource, false, "cuTexObjectCreate");
}
SIM_EXPORT CUresult cuTexObjectDestroy(CUtexObject object) { return destroy(object, "cuTexObjectDestroy"); }
SIM_EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* out, CUtexObject object) {
  return resource_of(object, out);
}
SIM_EXPORT CUresult cuSurfObjectCreate(CUsurfObject* object, const CUDA_RESOURCE_DESC* resource) {
  return create(object, resource, true, "cuSurfObjectCreate");
}
SIM_EXPORT CUresult cuSurfObjectDestroy(CUsurfObject object) { return destroy(object, "cuSurfObjectDestroy"); }
SIM_EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* out, CUsurfObject object) {
  return resource_of(object, out);
}
SIM_EXPORT CUresult vgpusimTexObjectResource(CUtexObject object, CUDA_RESOURCE_DESC* resource) {
  return resource_of(object, resource);
}
