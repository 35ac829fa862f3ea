// Texture objects: a kernel handed a CUtexObject reads the memory it
// describes, and its parameters hold only the object's number, which no
// scan can follow. Linear and pitched memory a texture describes is pinned
// resident from cuTexObjectCreate to cuTexObjectDestroy (arrays are never
// paged; surfaces accept only arrays).
#include <mutex>
#include <unordered_map>

#include "interpose/hook_support.h"

// Note [Texture objects]
// ~~~~~~~~~~~~~~~~~~~~~~
// A texture object over linear or pitched memory (`cuTexObjectCreate`) hands
// a kernel only the object's number: the unit it describes is pinned resident
// (`Pager::pin`) until `cuTexObjectDestroy` (`interpose/hooks_texture.cpp`).
// Surfaces take arrays only, which are never paged.

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// The address each live texture object pinned (only objects over paged memory).
struct PinnedTextures {
  std::mutex mutex;
  std::unordered_map<CUtexObject, std::uint64_t> address;
};

PinnedTextures& pinned_textures() {
  static PinnedTextures* textures = new PinnedTextures;  // hooks may run during exit
  return *textures;
}

// The device memory a resource describes; 0 for arrays.
std::uint64_t described_address(const CUDA_RESOURCE_DESC& resource) {
  switch (resource.resType) {
    case CU_RESOURCE_TYPE_LINEAR: return resource.res.linear.devPtr;
    case CU_RESOURCE_TYPE_PITCH2D: return resource.res.pitch2D.devPtr;
    default: return 0;
  }
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuTexObjectCreate,
                    (CUtexObject* object, const CUDA_RESOURCE_DESC* resource, const CUDA_TEXTURE_DESC* texture, const CUDA_RESOURCE_VIEW_DESC* view),
                    (object, resource, texture, view)) {
  vmm::Pager* pager = Runtime::get().pager();
  const std::uint64_t address = resource != nullptr ? described_address(*resource) : 0;
  CUresult pinned = CUDA_SUCCESS;
  const bool paged = pager != nullptr && address != 0 && object != nullptr && pager->pin(address, &pinned);
  if (pinned != CUDA_SUCCESS) return pinned;  // cannot be brought back: out of memory
  const CUresult result = REAL(cuTexObjectCreate)(object, resource, texture, view);
  if (!paged) return result;
  if (result != CUDA_SUCCESS) {
    pager->unpin(address);
    return result;
  }
  PinnedTextures& textures = pinned_textures();
  std::lock_guard lock(textures.mutex);
  textures.address[*object] = address;
  return result;
}

VGPUMEM_HOOK_DEFINE(cuTexObjectDestroy, (CUtexObject object), (object)) {
  const CUresult result = REAL(cuTexObjectDestroy)(object);
  if (result != CUDA_SUCCESS) return result;
  std::uint64_t address = 0;
  {
    PinnedTextures& textures = pinned_textures();
    std::lock_guard lock(textures.mutex);
    auto it = textures.address.find(object);
    if (it == textures.address.end()) return result;
    address = it->second;
    textures.address.erase(it);
  }
  if (vmm::Pager* pager = Runtime::get().pager()) pager->unpin(address);
  return result;
}
