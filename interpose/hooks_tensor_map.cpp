// TMA tensor maps: cuBLASLt, cuDNN, CUTLASS and Triton pass an operand's
// address to a Hopper kernel only inside an opaque 128-byte CUtensorMap.
// With paging on, each map the driver encodes is remembered with the range
// it describes (vmm/tensor_maps.h), so a launch holding the map makes that
// range resident. The hooks forward first and remember only what the
// driver accepted.
#include "interpose/hook_support.h"
#include "vmm/tensor_maps.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// Paging on: the registry is consulted by launches.
vmm::TensorMaps* registry() {
  Runtime& runtime = Runtime::get();
  return runtime.pager() != nullptr ? &runtime.tensor_maps() : nullptr;
}

CUresult remember_encoded(CUresult result, const CUtensorMap* map, void* address, CUtensorMapDataType type,
                          cuuint32_t rank, const cuuint64_t* dims, const cuuint64_t* strides,
                          CUtensorMapInterleave interleave) {
  if (result != CUDA_SUCCESS || map == nullptr) return result;
  if (vmm::TensorMaps* maps = registry()) {
    maps->remember(map, {reinterpret_cast<std::uint64_t>(address),
                         vmm::tensor_map_extent(type, rank, dims, strides, interleave)});
  }
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuTensorMapEncodeTiled,
                    (CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob),
                    (map, type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob)) {
  const CUresult result = REAL(cuTensorMapEncodeTiled)(map, type, rank, address, dims, strides, box, element_strides,
                                                       interleave, swizzle, l2, oob);
  return remember_encoded(result, map, address, type, rank, dims, strides, interleave);
}

VGPUMEM_HOOK_DEFINE(cuTensorMapEncodeIm2col,
                    (CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims, const cuuint64_t* strides, const int* lower, const int* upper, cuuint32_t channels, cuuint32_t pixels, const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob),
                    (map, type, rank, address, dims, strides, lower, upper, channels, pixels, element_strides, interleave, swizzle, l2, oob)) {
  const CUresult result = REAL(cuTensorMapEncodeIm2col)(map, type, rank, address, dims, strides, lower, upper,
                                                        channels, pixels, element_strides, interleave, swizzle, l2, oob);
  return remember_encoded(result, map, address, type, rank, dims, strides, interleave);
}

VGPUMEM_HOOK_DEFINE(cuTensorMapEncodeIm2colWide,
                    (CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims, const cuuint64_t* strides, int lower, int upper, cuuint32_t channels, cuuint32_t pixels, const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob),
                    (map, type, rank, address, dims, strides, lower, upper, channels, pixels, element_strides, interleave, mode, swizzle, l2, oob)) {
  const CUresult result =
      REAL(cuTensorMapEncodeIm2colWide)(map, type, rank, address, dims, strides, lower, upper, channels, pixels,
                                        element_strides, interleave, mode, swizzle, l2, oob);
  return remember_encoded(result, map, address, type, rank, dims, strides, interleave);
}

// The map keeps its shape and now describes memory at `address`: the extent
// comes from the map as it was remembered. One the shim never saw encoded
// (made before paging was on) is remembered with one byte, which still
// makes the whole allocation at the address resident (a unit moves whole).
VGPUMEM_HOOK_DEFINE(cuTensorMapReplaceAddress, (CUtensorMap* map, void* address), (map, address)) {
  vmm::TensorMaps* maps = registry();
  vmm::TensorMapRange before;
  const bool known = maps != nullptr && map != nullptr && maps->find(map, &before);
  const CUresult result = REAL(cuTensorMapReplaceAddress)(map, address);
  if (result == CUDA_SUCCESS && maps != nullptr && map != nullptr) {
    maps->remember(map, {reinterpret_cast<std::uint64_t>(address), known ? before.bytes : 1});
  }
  return result;
}
