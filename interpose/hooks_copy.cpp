// Copies and memsets (linear, 2D and 3D) name their device operands directly: with paging on,
// each operand is made resident (and held so) before the copy is enqueued, on
// the copy's own stream. Synchronous variants run on the default stream:
// legacy, or the caller's per-thread one for the _ptds forms.
#include "interpose/copy_operands.h"
#include "interpose/hook_support.h"

// Note [Copies and stream memory operations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Copies and memsets — linear, 2D and 3D, every variant — name their device
// operands; their hooks make each operand range resident (every unit it
// crosses) before the copy is enqueued. The same holds for every other entry
// point that moves device memory (`interpose/hooks_copy.cpp`,
// `interpose/hooks_stream_memory.cpp`): peer copies (`cuMemcpyPeer(Async)`,
// `cuMemcpy3DPeer(Async)`), copies between an array and a pointer
// (`cuMemcpyDtoA`, `cuMemcpyAtoD`; arrays themselves are never paged), batches
// of copies (`cuMemcpyBatchAsync` and `cuMemcpy3DBatchAsync`, v1 and `_v2`:
// all of a batch's operands held at once, since the driver may run them in any
// order; a 3D pointer operand covers its rows and layers in the array's
// elements, read with `cuArray3DGetDescriptor`), and the stream memory
// operations `cuStreamWriteValue32/64`, `cuStreamWaitValue32/64` and
// `cuStreamBatchMemOp` (a word the GPU reads or writes when the stream gets
// there, with no kernel the scanner would see — NCCL and DeepEP signal this
// way), each in its v1, `_v2` and per-thread forms. A unified copy
// (`cuMemcpy`, `cuMemcpyAsync`; `cudaMemcpyDefault` arrives this way) whose
// source the driver does not know as device memory is an upload from the host
// and is scanned for pointers like `cuMemcpyHtoD`'s.

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

constexpr bool kLegacy = false, kPerThread = true;

// Makes [a, a + a_bytes) and [b, b + b_bytes) resident (a
// range that is not paged is left alone), then runs the real copy.
template <typename Copy>
CUresult copy_with_operands(HookId id, std::uint64_t a, std::uint64_t a_bytes, std::uint64_t b, std::uint64_t b_bytes,
                            CUstream stream, bool per_thread, Copy&& copy) {
  vmm::Access access;
  if (CUresult r = paged_operand(a, a_bytes, stream, per_thread, access, api_name(id))) return r;
  if (CUresult r = paged_operand(b, b_bytes, stream, per_thread, access, api_name(id))) return r;
  return copy();
}

// A unified copy's source may be host memory: cudaMemcpy(Async) with
// cudaMemcpyDefault arrives as cuMemcpy(Async), NCCL's uploads among them.
// Bytes from the host are an upload that may be a pointer table; from the
// device, they overwrite what was at the destination. The driver tells
// which (a host pointer it never registered is an error to it, and host).
void register_unified_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
  vmm::Pager* pager = Runtime::get().pager();
  if (pager == nullptr || n == 0) return;
  if (!pager->in_arena(src)) {
    CUmemorytype type = CU_MEMORYTYPE_DEVICE;
    const CUresult known = REAL(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, src);
    if (known != CUDA_SUCCESS || type == CU_MEMORYTYPE_HOST) {
      register_upload(dst, reinterpret_cast<const void*>(src), n);
      return;
    }
  }
  register_overwrite(dst, n);
}

}  // namespace

// Unified copies: either side may be device memory, or host memory.
#define VGPUMEM_UNIFIED_COPY(name, per_thread)                                                                        \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n)) {                            \
    register_unified_copy(dst, src, n);                                                                               \
    return copy_with_operands(HookId::name, dst, n, src, n, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_UNIFIED_COPY_ASYNC(name, per_thread)                                                                  \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) {             \
    register_unified_copy(dst, src, n);                                                                               \
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

// Host to device: the destination is the device operand, and the upload may
// be a table of pointers a kernel will follow (register_upload).
#define VGPUMEM_TO_DEVICE(name, per_thread)                                                                           \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n)) {                            \
    register_upload(dst, src, n);                                                                                     \
    return copy_with_operands(HookId::name, dst, n, 0, 0, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_TO_DEVICE_ASYNC(name, per_thread)                                                                     \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, const void* src, size_t n, CUstream s), (dst, src, n, s)) {             \
    register_upload(dst, src, n);                                                                                     \
    return copy_with_operands(HookId::name, dst, n, 0, 0, s, per_thread, [&] { return REAL(name)(dst, src, n, s); }); \
  }
VGPUMEM_TO_DEVICE(cuMemcpyHtoD_v2, kLegacy)
VGPUMEM_TO_DEVICE(cuMemcpyHtoD_v2_ptds, kPerThread)
VGPUMEM_TO_DEVICE_ASYNC(cuMemcpyHtoDAsync_v2, kLegacy)
VGPUMEM_TO_DEVICE_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, kPerThread)

// Device to host: the source is the device operand.
#define VGPUMEM_TO_HOST(name, per_thread)                                                                             \
  VGPUMEM_HOOK_DEFINE(name, (void* dst, CUdeviceptr src, size_t n), (dst, src, n)) {                                  \
    return copy_with_operands(HookId::name, src, n, 0, 0, nullptr, per_thread, [&] { return REAL(name)(dst, src, n); }); \
  }
#define VGPUMEM_TO_HOST_ASYNC(name, per_thread)                                                                       \
  VGPUMEM_HOOK_DEFINE(name, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s)) {                   \
    return copy_with_operands(HookId::name, src, n, 0, 0, s, per_thread, [&] { return REAL(name)(dst, src, n, s); }); \
  }
VGPUMEM_TO_HOST(cuMemcpyDtoH_v2, kLegacy)
VGPUMEM_TO_HOST(cuMemcpyDtoH_v2_ptds, kPerThread)
VGPUMEM_TO_HOST_ASYNC(cuMemcpyDtoHAsync_v2, kLegacy)
VGPUMEM_TO_HOST_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, kPerThread)

// Memsets: `n` elements of `type`.
#define VGPUMEM_MEMSET(name, type, per_thread)                                                                        \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, type value, size_t n), (dst, value, n)) {                               \
    register_overwrite(dst, n * sizeof(type));                                                                        \
    return copy_with_operands(HookId::name, dst, n * sizeof(type), 0, 0, nullptr, per_thread,                         \
                              [&] { return REAL(name)(dst, value, n); });                                             \
  }
#define VGPUMEM_MEMSET_ASYNC(name, type, per_thread)                                                                  \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, type value, size_t n, CUstream s), (dst, value, n, s)) {                \
    register_overwrite(dst, n * sizeof(type));                                                                        \
    return copy_with_operands(HookId::name, dst, n * sizeof(type), 0, 0, s, per_thread,                               \
                              [&] { return REAL(name)(dst, value, n, s); });                                          \
  }
VGPUMEM_MEMSET(cuMemsetD8_v2, unsigned char, kLegacy)
VGPUMEM_MEMSET(cuMemsetD8_v2_ptds, unsigned char, kPerThread)
VGPUMEM_MEMSET(cuMemsetD32_v2, unsigned int, kLegacy)
VGPUMEM_MEMSET(cuMemsetD32_v2_ptds, unsigned int, kPerThread)
VGPUMEM_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, kLegacy)
VGPUMEM_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, kPerThread)
VGPUMEM_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, kLegacy)
VGPUMEM_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, kPerThread)

// ---- 2D and 3D copies and memsets ----------------------------------------------------------
namespace {

template <typename Copy>
CUresult copy_3d(HookId id, const CUDA_MEMCPY3D* c, CUstream stream, bool per_thread, Copy&& copy) {
  if (c == nullptr) return copy();
  const Span dst = destination_of(*c), src = source_of(*c);
  return copy_with_operands(id, dst.first, dst.bytes, src.first, src.bytes, stream, per_thread, copy);
}

template <typename Copy>
CUresult copy_2d(HookId id, const CUDA_MEMCPY2D* c, CUstream stream, bool per_thread, Copy&& copy) {
  if (c == nullptr) return copy();
  const Span dst = span(c->dstMemoryType, c->dstDevice, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0, c->WidthInBytes,
                        c->Height, 1);
  const Span src = span(c->srcMemoryType, c->srcDevice, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0, c->WidthInBytes,
                        c->Height, 1);
  return copy_with_operands(id, dst.first, dst.bytes, src.first, src.bytes, stream, per_thread, copy);
}

}  // namespace

#define VGPUMEM_COPY_2D(name, per_thread)                                                                             \
  VGPUMEM_HOOK_DEFINE(name, (const CUDA_MEMCPY2D* c), (c)) {                                                          \
    return copy_2d(HookId::name, c, nullptr, per_thread, [&] { return REAL(name)(c); });                              \
  }
#define VGPUMEM_COPY_2D_ASYNC(name, per_thread)                                                                       \
  VGPUMEM_HOOK_DEFINE(name, (const CUDA_MEMCPY2D* c, CUstream s), (c, s)) {                                           \
    return copy_2d(HookId::name, c, s, per_thread, [&] { return REAL(name)(c, s); });                                 \
  }
#define VGPUMEM_COPY_3D(name, per_thread)                                                                             \
  VGPUMEM_HOOK_DEFINE(name, (const CUDA_MEMCPY3D* c), (c)) {                                                          \
    return copy_3d(HookId::name, c, nullptr, per_thread, [&] { return REAL(name)(c); });                              \
  }
#define VGPUMEM_COPY_3D_ASYNC(name, per_thread)                                                                       \
  VGPUMEM_HOOK_DEFINE(name, (const CUDA_MEMCPY3D* c, CUstream s), (c, s)) {                                           \
    return copy_3d(HookId::name, c, s, per_thread, [&] { return REAL(name)(c, s); });                                 \
  }
VGPUMEM_COPY_2D(cuMemcpy2D_v2, kLegacy)
VGPUMEM_COPY_2D(cuMemcpy2D_v2_ptds, kPerThread)
VGPUMEM_COPY_2D(cuMemcpy2DUnaligned_v2, kLegacy)
VGPUMEM_COPY_2D(cuMemcpy2DUnaligned_v2_ptds, kPerThread)
VGPUMEM_COPY_2D_ASYNC(cuMemcpy2DAsync_v2, kLegacy)
VGPUMEM_COPY_2D_ASYNC(cuMemcpy2DAsync_v2_ptsz, kPerThread)
VGPUMEM_COPY_3D(cuMemcpy3D_v2, kLegacy)
VGPUMEM_COPY_3D(cuMemcpy3D_v2_ptds, kPerThread)
VGPUMEM_COPY_3D_ASYNC(cuMemcpy3DAsync_v2, kLegacy)
VGPUMEM_COPY_3D_ASYNC(cuMemcpy3DAsync_v2_ptsz, kPerThread)

VGPUMEM_MEMSET(cuMemsetD16_v2, unsigned short, kLegacy)
VGPUMEM_MEMSET(cuMemsetD16_v2_ptds, unsigned short, kPerThread)
VGPUMEM_MEMSET_ASYNC(cuMemsetD16Async, unsigned short, kLegacy)
VGPUMEM_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, kPerThread)

#define VGPUMEM_MEMSET_2D(name, type, per_thread)                                                                     \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, size_t pitch, type value, size_t width, size_t height), (dst, pitch, value, width, height)) { \
    return copy_with_operands(HookId::name, dst, rows_bytes(pitch, width, height, sizeof(type)), 0, 0, nullptr,       \
                              per_thread, [&] { return REAL(name)(dst, pitch, value, width, height); });              \
  }
#define VGPUMEM_MEMSET_2D_ASYNC(name, type, per_thread)                                                               \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, size_t pitch, type value, size_t width, size_t height, CUstream s), (dst, pitch, value, width, height, s)) { \
    return copy_with_operands(HookId::name, dst, rows_bytes(pitch, width, height, sizeof(type)), 0, 0, s,             \
                              per_thread, [&] { return REAL(name)(dst, pitch, value, width, height, s); });           \
  }
VGPUMEM_MEMSET_2D(cuMemsetD2D8_v2, unsigned char, kLegacy)
VGPUMEM_MEMSET_2D(cuMemsetD2D8_v2_ptds, unsigned char, kPerThread)
VGPUMEM_MEMSET_2D(cuMemsetD2D16_v2, unsigned short, kLegacy)
VGPUMEM_MEMSET_2D(cuMemsetD2D16_v2_ptds, unsigned short, kPerThread)
VGPUMEM_MEMSET_2D(cuMemsetD2D32_v2, unsigned int, kLegacy)
VGPUMEM_MEMSET_2D(cuMemsetD2D32_v2_ptds, unsigned int, kPerThread)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, kLegacy)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, kPerThread)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, kLegacy)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, kPerThread)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, kLegacy)
VGPUMEM_MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, kPerThread)

// ---- peer copies ---------------------------------------------------------------------------
// Both sides are device memory, each of its own context's device; the pager
// finds each operand's device from the unit that holds it.
#define VGPUMEM_PEER_COPY(name, per_thread)                                                                           \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),                \
                      (dst, dc, src, sc, n)) {                                                                        \
    register_overwrite(dst, n);                                                                                       \
    return copy_with_operands(HookId::name, dst, n, src, n, nullptr, per_thread,                                      \
                              [&] { return REAL(name)(dst, dc, src, sc, n); });                                       \
  }
#define VGPUMEM_PEER_COPY_ASYNC(name, per_thread)                                                                     \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),    \
                      (dst, dc, src, sc, n, s)) {                                                                     \
    register_overwrite(dst, n);                                                                                       \
    return copy_with_operands(HookId::name, dst, n, src, n, s, per_thread,                                            \
                              [&] { return REAL(name)(dst, dc, src, sc, n, s); });                                    \
  }
VGPUMEM_PEER_COPY(cuMemcpyPeer, kLegacy)
VGPUMEM_PEER_COPY(cuMemcpyPeer_ptds, kPerThread)
VGPUMEM_PEER_COPY_ASYNC(cuMemcpyPeerAsync, kLegacy)
VGPUMEM_PEER_COPY_ASYNC(cuMemcpyPeerAsync_ptsz, kPerThread)

namespace {

template <typename Copy>
CUresult copy_3d_peer(HookId id, const CUDA_MEMCPY3D_PEER* c, CUstream stream, bool per_thread, Copy&& copy) {
  if (c == nullptr) return copy();
  const Span dst = span(c->dstMemoryType, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight,
                        c->WidthInBytes, c->Height, c->Depth);
  const Span src = span(c->srcMemoryType, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight,
                        c->WidthInBytes, c->Height, c->Depth);
  return copy_with_operands(id, dst.first, dst.bytes, src.first, src.bytes, stream, per_thread, copy);
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER* c), (c)) {
  return copy_3d_peer(HookId::cuMemcpy3DPeer, c, nullptr, kLegacy, [&] { return REAL(cuMemcpy3DPeer)(c); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER* c), (c)) {
  return copy_3d_peer(HookId::cuMemcpy3DPeer_ptds, c, nullptr, kPerThread, [&] { return REAL(cuMemcpy3DPeer_ptds)(c); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER* c, CUstream s), (c, s)) {
  return copy_3d_peer(HookId::cuMemcpy3DPeerAsync, c, s, kLegacy, [&] { return REAL(cuMemcpy3DPeerAsync)(c, s); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER* c, CUstream s), (c, s)) {
  return copy_3d_peer(HookId::cuMemcpy3DPeerAsync_ptsz, c, s, kPerThread,
                      [&] { return REAL(cuMemcpy3DPeerAsync_ptsz)(c, s); });
}

// ---- array <-> device copies ---------------------------------------------------------------
// Arrays are never paged; the linear side is the device operand.
#define VGPUMEM_DEVICE_TO_ARRAY(name, per_thread)                                                                     \
  VGPUMEM_HOOK_DEFINE(name, (CUarray dst, size_t offset, CUdeviceptr src, size_t n), (dst, offset, src, n)) {         \
    return copy_with_operands(HookId::name, src, n, 0, 0, nullptr, per_thread,                                        \
                              [&] { return REAL(name)(dst, offset, src, n); });                                       \
  }
#define VGPUMEM_ARRAY_TO_DEVICE(name, per_thread)                                                                     \
  VGPUMEM_HOOK_DEFINE(name, (CUdeviceptr dst, CUarray src, size_t offset, size_t n), (dst, src, offset, n)) {         \
    register_overwrite(dst, n);                                                                                       \
    return copy_with_operands(HookId::name, dst, n, 0, 0, nullptr, per_thread,                                        \
                              [&] { return REAL(name)(dst, src, offset, n); });                                       \
  }
VGPUMEM_DEVICE_TO_ARRAY(cuMemcpyDtoA_v2, kLegacy)
VGPUMEM_DEVICE_TO_ARRAY(cuMemcpyDtoA_v2_ptds, kPerThread)
VGPUMEM_ARRAY_TO_DEVICE(cuMemcpyAtoD_v2, kLegacy)
VGPUMEM_ARRAY_TO_DEVICE(cuMemcpyAtoD_v2_ptds, kPerThread)

// ---- batches of linear copies (cuMemcpyBatchAsync) -----------------------------------------
// Every copy of the batch is a unified copy: each side is made resident, all
// of the batch's at once (the driver may run them in any order), and a
// source in host memory is scanned as an upload.
namespace {

template <typename Copy>
CUresult copy_batch(HookId id, const CUdeviceptr* dsts, const CUdeviceptr* srcs, const size_t* sizes, size_t count,
                    CUstream stream, bool per_thread, Copy&& copy) {
  if (dsts == nullptr || srcs == nullptr || sizes == nullptr) return copy();
  vmm::Access access;
  for (size_t i = 0; i < count; ++i) {
    register_unified_copy(dsts[i], srcs[i], sizes[i]);
    if (CUresult r = paged_operand(dsts[i], sizes[i], stream, per_thread, access, api_name(id))) return r;
    if (CUresult r = paged_operand(srcs[i], sizes[i], stream, per_thread, access, api_name(id))) return r;
  }
  return copy();
}

}  // namespace

#define VGPUMEM_COPY_BATCH_V1(name, per_thread)                                                                       \
  VGPUMEM_HOOK_DEFINE(name,                                                                                           \
                      (CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count, CUmemcpyAttributes* a, size_t* ai,    \
                       size_t na, size_t* fail, CUstream stream),                                                     \
                      (d, s, n, count, a, ai, na, fail, stream)) {                                                    \
    return copy_batch(HookId::name, d, s, n, count, stream, per_thread,                                               \
                      [&] { return REAL(name)(d, s, n, count, a, ai, na, fail, stream); });                           \
  }
#define VGPUMEM_COPY_BATCH(name, per_thread)                                                                          \
  VGPUMEM_HOOK_DEFINE(name,                                                                                           \
                      (CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count, CUmemcpyAttributes* a, size_t* ai,    \
                       size_t na, CUstream stream),                                                                   \
                      (d, s, n, count, a, ai, na, stream)) {                                                          \
    return copy_batch(HookId::name, d, s, n, count, stream, per_thread,                                               \
                      [&] { return REAL(name)(d, s, n, count, a, ai, na, stream); });                                 \
  }
VGPUMEM_COPY_BATCH_V1(cuMemcpyBatchAsync, kLegacy)
VGPUMEM_COPY_BATCH_V1(cuMemcpyBatchAsync_ptsz, kPerThread)
VGPUMEM_COPY_BATCH(cuMemcpyBatchAsync_v2, kLegacy)
VGPUMEM_COPY_BATCH(cuMemcpyBatchAsync_v2_ptsz, kPerThread)

// ---- batches of 3D copies (cuMemcpy3DBatchAsync) -------------------------------------------
// Extents are in elements: a byte between two pointers, the array's element
// when the other side is an array. A pointer operand covers whole rows of
// rowLength elements and layers of layerHeight rows (packed when zero).
namespace {

constexpr std::uint64_t kWidestElement = 16;  // four 32-bit channels: no format is wider

std::uint64_t format_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;  // packed, planar and compressed formats: sized as the widest
  }
}

// The bytes one element of `array` holds; the widest any array has when the
// driver cannot say (more memory held for the copy, never less).
std::uint64_t array_element_bytes(CUarray array) {
  CUDA_ARRAY3D_DESCRIPTOR shape{};
  if (REAL(cuArray3DGetDescriptor_v2)(&shape, array) != CUDA_SUCCESS) return kWidestElement;
  const std::uint64_t bytes = format_bytes(shape.Format) * std::max(shape.NumChannels, 1u);
  return bytes != 0 ? bytes : kWidestElement;
}

Span pointer_extent(const CUmemcpy3DOperand& operand, const CUextent3D& extent, std::uint64_t element) {
  if (operand.type != CU_MEMCPY_OPERAND_TYPE_POINTER || extent.width == 0 || extent.height == 0 || extent.depth == 0) {
    return {};
  }
  const auto& p = operand.op.ptr;
  const std::uint64_t row = (p.rowLength != 0 ? p.rowLength : extent.width) * element;
  const std::uint64_t layer = row * (p.layerHeight != 0 ? p.layerHeight : extent.height);
  return {p.ptr, (extent.depth - 1) * layer + (extent.height - 1) * row + extent.width * element};
}

template <typename Copy>
CUresult copy_3d_batch(HookId id, size_t count, const CUDA_MEMCPY3D_BATCH_OP* ops, CUstream stream, bool per_thread,
                       Copy&& copy) {
  if (ops == nullptr) return copy();
  vmm::Access access;
  for (size_t i = 0; i < count; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    const std::uint64_t element = op.src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_element_bytes(op.src.op.array.array)
                                  : op.dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_element_bytes(op.dst.op.array.array)
                                                                               : 1;
    const Span src = pointer_extent(op.src, op.extent, element), dst = pointer_extent(op.dst, op.extent, element);
    register_overwrite(dst.first, dst.bytes);
    if (CUresult r = paged_operand(dst.first, dst.bytes, stream, per_thread, access, api_name(id))) return r;
    if (CUresult r = paged_operand(src.first, src.bytes, stream, per_thread, access, api_name(id))) return r;
  }
  return copy();
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemcpy3DBatchAsync,
                    (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail, unsigned long long flags, CUstream s),
                    (n, ops, fail, flags, s)) {
  return copy_3d_batch(HookId::cuMemcpy3DBatchAsync, n, ops, s, kLegacy,
                       [&] { return REAL(cuMemcpy3DBatchAsync)(n, ops, fail, flags, s); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DBatchAsync_ptsz,
                    (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail, unsigned long long flags, CUstream s),
                    (n, ops, fail, flags, s)) {
  return copy_3d_batch(HookId::cuMemcpy3DBatchAsync_ptsz, n, ops, s, kPerThread,
                       [&] { return REAL(cuMemcpy3DBatchAsync_ptsz)(n, ops, fail, flags, s); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DBatchAsync_v2, (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream s),
                    (n, ops, flags, s)) {
  return copy_3d_batch(HookId::cuMemcpy3DBatchAsync_v2, n, ops, s, kLegacy,
                       [&] { return REAL(cuMemcpy3DBatchAsync_v2)(n, ops, flags, s); });
}
VGPUMEM_HOOK_DEFINE(cuMemcpy3DBatchAsync_v2_ptsz,
                    (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream s),
                    (n, ops, flags, s)) {
  return copy_3d_batch(HookId::cuMemcpy3DBatchAsync_v2_ptsz, n, ops, s, kPerThread,
                       [&] { return REAL(cuMemcpy3DBatchAsync_v2_ptsz)(n, ops, flags, s); });
}
