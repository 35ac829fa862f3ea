// Copies and memsets name their device operands directly: with paging on,
// each operand is made resident (and held so) before the copy is enqueued, on
// the copy's own stream. Synchronous variants run on the default stream:
// legacy, or the caller's per-thread one for the _ptds forms.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

constexpr bool kLegacy = false, kPerThread = true;

// Counts the call, makes [a, a + a_bytes) and [b, b + b_bytes) resident (a
// range that is not paged is left alone), then runs the real copy.
template <typename Copy>
CUresult copy_with_operands(HookId id, std::uint64_t a, std::uint64_t a_bytes, std::uint64_t b, std::uint64_t b_bytes,
                            CUstream stream, bool per_thread, Copy&& copy) {
  Runtime::get().count(id);
  vmm::Access access;
  if (CUresult r = paged_operand(a, a_bytes, stream, per_thread, access)) return r;
  if (CUresult r = paged_operand(b, b_bytes, stream, per_thread, access)) return r;
  return copy();
}

}  // namespace

// Unified copies: either side may be device memory.
#define VGPUMEM_UNIFIED_COPY(name, per_thread)                                                                 \
  extern "C" CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t n) {                                       \
    return copy_with_operands(HookId::name, dst, n, src, n, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_UNIFIED_COPY_ASYNC(name, per_thread)                                                           \
  extern "C" CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {                           \
    return copy_with_operands(HookId::name, dst, n, src, n, s, per_thread, [&] { return REAL(name)(dst, src, n, s); }); \
  }
VGPUMEM_UNIFIED_COPY(cuMemcpy, kLegacy)
VGPUMEM_UNIFIED_COPY(cuMemcpy_ptds, kPerThread)
VGPUMEM_UNIFIED_COPY_ASYNC(cuMemcpyAsync, kLegacy)
VGPUMEM_UNIFIED_COPY_ASYNC(cuMemcpyAsync_ptsz, kPerThread)
VGPUMEM_UNIFIED_COPY(cuMemcpyDtoD_v2, kLegacy)
VGPUMEM_UNIFIED_COPY(cuMemcpyDtoD_v2_ptds, kPerThread)
VGPUMEM_UNIFIED_COPY_ASYNC(cuMemcpyDtoDAsync_v2, kLegacy)
VGPUMEM_UNIFIED_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, kPerThread)

// Host to device: the destination is the device operand.
#define VGPUMEM_TO_DEVICE(name, per_thread)                                                                    \
  extern "C" CUresult name(CUdeviceptr dst, const void* src, size_t n) {                                       \
    return copy_with_operands(HookId::name, dst, n, 0, 0, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_TO_DEVICE_ASYNC(name, per_thread)                                                              \
  extern "C" CUresult name(CUdeviceptr dst, const void* src, size_t n, CUstream s) {                           \
    return copy_with_operands(HookId::name, dst, n, 0, 0, s, per_thread, [&] { return REAL(name)(dst, src, n, s); }); \
  }
VGPUMEM_TO_DEVICE(cuMemcpyHtoD_v2, kLegacy)
VGPUMEM_TO_DEVICE(cuMemcpyHtoD_v2_ptds, kPerThread)
VGPUMEM_TO_DEVICE_ASYNC(cuMemcpyHtoDAsync_v2, kLegacy)
VGPUMEM_TO_DEVICE_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, kPerThread)

// Device to host: the source is the device operand.
#define VGPUMEM_TO_HOST(name, per_thread)                                                                      \
  extern "C" CUresult name(void* dst, CUdeviceptr src, size_t n) {                                             \
    return copy_with_operands(HookId::name, src, n, 0, 0, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_TO_HOST_ASYNC(name, per_thread)                                                                \
  extern "C" CUresult name(void* dst, CUdeviceptr src, size_t n, CUstream s) {                                 \
    return copy_with_operands(HookId::name, src, n, 0, 0, s, per_thread, [&] { return REAL(name)(dst, src, n, s); }); \
  }
VGPUMEM_TO_HOST(cuMemcpyDtoH_v2, kLegacy)
VGPUMEM_TO_HOST(cuMemcpyDtoH_v2_ptds, kPerThread)
VGPUMEM_TO_HOST_ASYNC(cuMemcpyDtoHAsync_v2, kLegacy)
VGPUMEM_TO_HOST_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, kPerThread)

// Memsets: `n` elements of `type`.
#define VGPUMEM_MEMSET(name, type, per_thread)                                                                 \
  extern "C" CUresult name(CUdeviceptr dst, type value, size_t n) {                                            \
    return copy_with_operands(HookId::name, dst, n * sizeof(type), 0, 0, nullptr, per_thread,                  \
                              [&] { return REAL(name)(dst, value, n); });                                      \
  }
#define VGPUMEM_MEMSET_ASYNC(name, type, per_thread)                                                           \
  extern "C" CUresult name(CUdeviceptr dst, type value, size_t n, CUstream s) {                                \
    return copy_with_operands(HookId::name, dst, n * sizeof(type), 0, 0, s, per_thread,                        \
                              [&] { return REAL(name)(dst, value, n, s); });                                   \
  }
VGPUMEM_MEMSET(cuMemsetD8_v2, unsigned char, kLegacy)
VGPUMEM_MEMSET(cuMemsetD8_v2_ptds, unsigned char, kPerThread)
VGPUMEM_MEMSET(cuMemsetD32_v2, unsigned int, kLegacy)
VGPUMEM_MEMSET(cuMemsetD32_v2_ptds, unsigned int, kPerThread)
VGPUMEM_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, kLegacy)
VGPUMEM_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, kPerThread)
VGPUMEM_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, kLegacy)
VGPUMEM_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, kPerThread)
