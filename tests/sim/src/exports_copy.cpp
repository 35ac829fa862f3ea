// The copy and memset entry points: linear, 2D and 3D copies, 8/16/32-bit and
// 2D memsets, each synchronous and asynchronous, legacy and per-thread
// (_ptds/_ptsz). They translate their arguments into copy()/fill() (copy.cpp).
#include "sim.h"

using namespace vgpusim;

namespace {

bool device_address(std::uint64_t address) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return is_device_address(sim, address);
}

// cuMemcpy/cuMemcpyAsync take unified addresses: the direction follows from them.
CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool per_thread, CopySync sync,
                 const char* api) {
  return copy_linear(dst, src, n, device_address(dst), device_address(src), s, per_thread, sync, api);
}

std::uint64_t address(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
std::uint64_t address(CUdeviceptr p) { return p; }

// One side of a 2D/3D descriptor: its first byte, whether it is device memory,
// its row pitch and slice pitch. An array is device memory with its own pitch.
struct Operand {
  std::uint64_t address = 0;
  bool device = false;
  std::uint64_t pitch = 0;
  bool valid = true;
};

Operand operand(CUmemorytype type, const void* host_pointer, CUdeviceptr device_pointer, CUarray array, std::uint64_t pitch,
                std::uint64_t x, std::uint64_t y, std::uint64_t z, std::uint64_t rows_per_slice) {
  Operand o;
  switch (type) {
    case CU_MEMORYTYPE_HOST: o.address = address(host_pointer); break;
    case CU_MEMORYTYPE_DEVICE: o.address = device_pointer; o.device = true; break;
    case CU_MEMORYTYPE_UNIFIED: o.address = device_pointer; o.device = device_address(device_pointer); break;
    case CU_MEMORYTYPE_ARRAY: {
      Simulator& sim = Simulator::get();
      std::lock_guard lock(sim.mutex);
      const Region* region = sim.region_of(reinterpret_cast<std::uint64_t>(array));
      if (region == nullptr || region->array_pitch == 0) {
        o.valid = false;
        return o;
      }
      o.address = region->base;
      o.device = true;
      pitch = region->array_pitch;
      break;
    }
    default: o.valid = false; return o;
  }
  o.pitch = pitch;
  o.address += z * pitch * rows_per_slice + y * pitch + x;
  return o;
}

CUresult copy_3d(const CUDA_MEMCPY3D* c, CUstream s, bool per_thread, CopySync sync, const char* api) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Operand src = operand(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch, c->srcXInBytes,
                              c->srcY, c->srcZ, c->srcHeight);
  const Operand dst = operand(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch, c->dstXInBytes,
                              c->dstY, c->dstZ, c->dstHeight);
  if (!src.valid || !dst.valid) return CUDA_ERROR_INVALID_VALUE;
  CopyShape shape;
  shape.dst = dst.address;
  shape.src = src.address;
  shape.width = c->WidthInBytes;
  shape.height = c->Height;
  shape.depth = c->Depth;
  shape.dst_pitch = dst.pitch ? dst.pitch : c->WidthInBytes;
  shape.src_pitch = src.pitch ? src.pitch : c->WidthInBytes;
  shape.dst_slice = shape.dst_pitch * (c->dstHeight ? c->dstHeight : c->Height);
  shape.src_slice = shape.src_pitch * (c->srcHeight ? c->srcHeight : c->Height);
  shape.dst_device = dst.device;
  shape.src_device = src.device;
  return copy(shape, s, per_thread, sync, api);
}

CUresult copy_2d(const CUDA_MEMCPY2D* c, CUstream s, bool per_thread, CopySync sync, const char* api) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D as_3d{};
  as_3d.srcXInBytes = c->srcXInBytes;
  as_3d.srcY = c->srcY;
  as_3d.srcMemoryType = c->srcMemoryType;
  as_3d.srcHost = c->srcHost;
  as_3d.srcDevice = c->srcDevice;
  as_3d.srcArray = c->srcArray;
  as_3d.srcPitch = c->srcPitch;
  as_3d.dstXInBytes = c->dstXInBytes;
  as_3d.dstY = c->dstY;
  as_3d.dstMemoryType = c->dstMemoryType;
  as_3d.dstHost = c->dstHost;
  as_3d.dstDevice = c->dstDevice;
  as_3d.dstArray = c->dstArray;
  as_3d.dstPitch = c->dstPitch;
  as_3d.WidthInBytes = c->WidthInBytes;
  as_3d.Height = c->Height;
  as_3d.Depth = 1;
  return copy_3d(&as_3d, s, per_thread, sync, api);
}

constexpr CUstream kDefault = nullptr;

}  // namespace

// ---- linear copies ---------------------------------------------------------------------
#define SIM_COPY(name, dst_type, src_type, to_device, from_device, per_thread, sync)                     \
  SIM_EXPORT CUresult name(dst_type d, src_type s, size_t n) {                                          \
    return copy_linear(address(d), address(s), n, to_device, from_device, kDefault, per_thread, sync, #name); \
  }
#define SIM_COPY_ASYNC(name, dst_type, src_type, to_device, from_device, per_thread)                     \
  SIM_EXPORT CUresult name(dst_type d, src_type s, size_t n, CUstream stream) {                         \
    return copy_linear(address(d), address(s), n, to_device, from_device, stream, per_thread, CopySync::async, #name); \
  }
SIM_COPY(cuMemcpyHtoD_v2, CUdeviceptr, const void*, true, false, false, CopySync::sync)
SIM_COPY(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void*, true, false, true, CopySync::sync)
SIM_COPY(cuMemcpyDtoH_v2, void*, CUdeviceptr, false, true, false, CopySync::sync)
SIM_COPY(cuMemcpyDtoH_v2_ptds, void*, CUdeviceptr, false, true, true, CopySync::sync)
SIM_COPY(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, true, true, false, CopySync::sync)
SIM_COPY(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr, true, true, true, CopySync::sync)
SIM_COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*, true, false, false)
SIM_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void*, true, false, true)
SIM_COPY_ASYNC(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr, false, true, false)
SIM_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, void*, CUdeviceptr, false, true, true)
SIM_COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, true, true, false)
SIM_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr, true, true, true)

SIM_EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return unified(d, s, n, kDefault, false, CopySync::sync, "cuMemcpy");
}
SIM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return unified(d, s, n, kDefault, true, CopySync::sync, "cuMemcpy_ptds");
}
SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
  return unified(d, s, n, stream, false, CopySync::async, "cuMemcpyAsync");
}
SIM_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream stream) {
  return unified(d, s, n, stream, true, CopySync::async, "cuMemcpyAsync_ptsz");
}

// ---- 2D and 3D copies ------------------------------------------------------------------
SIM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) { return copy_2d(c, kDefault, false, CopySync::sync, "cuMemcpy2D_v2"); }
SIM_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, kDefault, true, CopySync::sync, "cuMemcpy2D_v2_ptds");
}
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, kDefault, false, CopySync::sync, "cuMemcpy2DUnaligned_v2");
}
SIM_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, kDefault, true, CopySync::sync, "cuMemcpy2DUnaligned_v2_ptds");
}
SIM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s) {
  return copy_2d(c, s, false, CopySync::async, "cuMemcpy2DAsync_v2");
}
SIM_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream s) {
  return copy_2d(c, s, true, CopySync::async, "cuMemcpy2DAsync_v2_ptsz");
}
SIM_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) { return copy_3d(c, kDefault, false, CopySync::sync, "cuMemcpy3D_v2"); }
SIM_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) {
  return copy_3d(c, kDefault, true, CopySync::sync, "cuMemcpy3D_v2_ptds");
}
SIM_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream s) {
  return copy_3d(c, s, false, CopySync::async, "cuMemcpy3DAsync_v2");
}
SIM_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream s) {
  return copy_3d(c, s, true, CopySync::async, "cuMemcpy3DAsync_v2_ptsz");
}

// ---- memsets -------------------------------------------------------------------------------
#define SIM_FILL_1D(name, type, element, per_thread)                                                    \
  SIM_EXPORT CUresult name(CUdeviceptr d, type v, size_t n) {                                           \
    return fill(d, 0, v, element, n, 1, kDefault, per_thread, #name);                                   \
  }
#define SIM_FILL_1D_ASYNC(name, type, element, per_thread)                                              \
  SIM_EXPORT CUresult name(CUdeviceptr d, type v, size_t n, CUstream s) {                               \
    return fill(d, 0, v, element, n, 1, s, per_thread, #name);                                          \
  }
#define SIM_FILL_2D(name, type, element, per_thread)                                                    \
  SIM_EXPORT CUresult name(CUdeviceptr d, size_t pitch, type v, size_t w, size_t h) {                   \
    return fill(d, pitch, v, element, w, h, kDefault, per_thread, #name);                               \
  }
#define SIM_FILL_2D_ASYNC(name, type, element, per_thread)                                              \
  SIM_EXPORT CUresult name(CUdeviceptr d, size_t pitch, type v, size_t w, size_t h, CUstream s) {       \
    return fill(d, pitch, v, element, w, h, s, per_thread, #name);                                      \
  }
SIM_FILL_1D(cuMemsetD8_v2, unsigned char, 1, false)
SIM_FILL_1D(cuMemsetD8_v2_ptds, unsigned char, 1, true)
SIM_FILL_1D(cuMemsetD16_v2, unsigned short, 2, false)
SIM_FILL_1D(cuMemsetD16_v2_ptds, unsigned short, 2, true)
SIM_FILL_1D(cuMemsetD32_v2, unsigned, 4, false)
SIM_FILL_1D(cuMemsetD32_v2_ptds, unsigned, 4, true)
SIM_FILL_1D_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
SIM_FILL_1D_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
SIM_FILL_1D_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
SIM_FILL_1D_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
SIM_FILL_1D_ASYNC(cuMemsetD32Async, unsigned, 4, false)
SIM_FILL_1D_ASYNC(cuMemsetD32Async_ptsz, unsigned, 4, true)
SIM_FILL_2D(cuMemsetD2D8_v2, unsigned char, 1, false)
SIM_FILL_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
SIM_FILL_2D(cuMemsetD2D16_v2, unsigned short, 2, false)
SIM_FILL_2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
SIM_FILL_2D(cuMemsetD2D32_v2, unsigned, 4, false)
SIM_FILL_2D(cuMemsetD2D32_v2_ptds, unsigned, 4, true)
SIM_FILL_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
SIM_FILL_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
SIM_FILL_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
SIM_FILL_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
SIM_FILL_2D_ASYNC(cuMemsetD2D32Async, unsigned, 4, false)
SIM_FILL_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned, 4, true)

// ---- legacy 32-bit ABI -------------------------------------------------------------------
// A 32-bit device pointer cannot address simulated device memory; the
// symbols exist, as in the real driver, for cuGetProcAddress at version 2000.
SIM_EXPORT CUresult cuMemcpyHtoD(unsigned int, const void*, unsigned int) { return CUDA_ERROR_NOT_SUPPORTED; }
SIM_EXPORT CUresult cuMemcpyDtoH(void*, unsigned int, unsigned int) { return CUDA_ERROR_NOT_SUPPORTED; }

// ---- peer copies ---------------------------------------------------------------------
// Every device's memory is one address space here: a peer copy is a device
// to device copy, after the contexts it names are checked.
namespace {

bool live_contexts(CUcontext a, CUcontext b) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return a != nullptr && b != nullptr && sim.contexts.count(a) != 0 && sim.contexts.count(b) != 0;
}

CUresult peer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream stream, bool per_thread,
              CopySync sync, const char* api) {
  if (!live_contexts(dc, sc)) return CUDA_ERROR_INVALID_CONTEXT;
  return copy_linear(d, s, n, true, true, stream, per_thread, sync, api);
}

CUresult peer_3d(const CUDA_MEMCPY3D_PEER* c, CUstream stream, bool per_thread, CopySync sync, const char* api) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!live_contexts(c->dstContext, c->srcContext)) return CUDA_ERROR_INVALID_CONTEXT;
  CUDA_MEMCPY3D as_3d{};
  as_3d.srcXInBytes = c->srcXInBytes;
  as_3d.srcY = c->srcY;
  as_3d.srcZ = c->srcZ;
  as_3d.srcLOD = c->srcLOD;
  as_3d.srcMemoryType = c->srcMemoryType;
  as_3d.srcHost = c->srcHost;
  as_3d.srcDevice = c->srcDevice;
  as_3d.srcArray = c->srcArray;
  as_3d.srcPitch = c->srcPitch;
  as_3d.srcHeight = c->srcHeight;
  as_3d.dstXInBytes = c->dstXInBytes;
  as_3d.dstY = c->dstY;
  as_3d.dstZ = c->dstZ;
  as_3d.dstLOD = c->dstLOD;
  as_3d.dstMemoryType = c->dstMemoryType;
  as_3d.dstHost = c->dstHost;
  as_3d.dstDevice = c->dstDevice;
  as_3d.dstArray = c->dstArray;
  as_3d.dstPitch = c->dstPitch;
  as_3d.dstHeight = c->dstHeight;
  as_3d.WidthInBytes = c->WidthInBytes;
  as_3d.Height = c->Height;
  as_3d.Depth = c->Depth;
  return copy_3d(&as_3d, stream, per_thread, sync, api);
}

}  // namespace

SIM_EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return peer(d, dc, s, sc, n, kDefault, false, CopySync::sync, "cuMemcpyPeer");
}
SIM_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return peer(d, dc, s, sc, n, kDefault, true, CopySync::sync, "cuMemcpyPeer_ptds");
}
SIM_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                      CUstream stream) {
  return peer(d, dc, s, sc, n, stream, false, CopySync::async, "cuMemcpyPeerAsync");
}
SIM_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                           CUstream stream) {
  return peer(d, dc, s, sc, n, stream, true, CopySync::async, "cuMemcpyPeerAsync_ptsz");
}
SIM_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* c) {
  return peer_3d(c, kDefault, false, CopySync::sync, "cuMemcpy3DPeer");
}
SIM_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* c) {
  return peer_3d(c, kDefault, true, CopySync::sync, "cuMemcpy3DPeer_ptds");
}
SIM_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* c, CUstream stream) {
  return peer_3d(c, stream, false, CopySync::async, "cuMemcpy3DPeerAsync");
}
SIM_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* c, CUstream stream) {
  return peer_3d(c, stream, true, CopySync::async, "cuMemcpy3DPeerAsync_ptsz");
}

// ---- array <-> device copies ------------------------------------------------------------
// A CUarray is a region of device memory here: `offset` bytes into it.
namespace {

std::uint64_t array_bytes(CUarray array, std::uint64_t offset, std::uint64_t n) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  const auto base = reinterpret_cast<std::uint64_t>(array);
  const Region* region = sim.region_of(base);
  if (region == nullptr || region->array_pitch == 0 || region->base != base || offset + n > region->size) return 0;
  return base + offset;
}

CUresult device_to_array(CUarray dst, size_t offset, CUdeviceptr src, size_t n, bool per_thread, const char* api) {
  const std::uint64_t at = array_bytes(dst, offset, n);
  return at == 0 ? CUDA_ERROR_INVALID_VALUE : copy_linear(at, src, n, true, true, kDefault, per_thread, CopySync::sync, api);
}

CUresult array_to_device(CUdeviceptr dst, CUarray src, size_t offset, size_t n, bool per_thread, const char* api) {
  const std::uint64_t at = array_bytes(src, offset, n);
  return at == 0 ? CUDA_ERROR_INVALID_VALUE : copy_linear(dst, at, n, true, true, kDefault, per_thread, CopySync::sync, api);
}

}  // namespace

SIM_EXPORT CUresult cuMemcpyDtoA_v2(CUarray d, size_t o, CUdeviceptr s, size_t n) {
  return device_to_array(d, o, s, n, false, "cuMemcpyDtoA_v2");
}
SIM_EXPORT CUresult cuMemcpyDtoA_v2_ptds(CUarray d, size_t o, CUdeviceptr s, size_t n) {
  return device_to_array(d, o, s, n, true, "cuMemcpyDtoA_v2_ptds");
}
SIM_EXPORT CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray s, size_t o, size_t n) {
  return array_to_device(d, s, o, n, false, "cuMemcpyAtoD_v2");
}
SIM_EXPORT CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray s, size_t o, size_t n) {
  return array_to_device(d, s, o, n, true, "cuMemcpyAtoD_v2_ptds");
}

// ---- batches of linear copies (cuMemcpyBatchAsync) ------------------------------------
// Each copy of the batch is a unified copy on the stream, in order; the
// attributes (access order, location hints) change nothing here beyond
// being checked. The legacy NULL stream is refused, as the API says.
namespace {

CUresult batch_copies(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
                      size_t* attr_indices, size_t attr_count, size_t* fail_index, CUstream stream, bool per_thread,
                      const char* api) {
  if (fail_index != nullptr) *fail_index = SIZE_MAX;
  if (count == 0 || dsts == nullptr || srcs == nullptr || sizes == nullptr || attrs == nullptr ||
      attr_indices == nullptr || attr_count == 0 || attr_count > count || attr_indices[0] != 0 ||
      stream == nullptr || stream == CU_STREAM_LEGACY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t k = 1; k < attr_count; ++k) {
    if (attr_indices[k] <= attr_indices[k - 1] || attr_indices[k] >= count) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    const CUresult result = unified(dsts[i], srcs[i], sizes[i], stream, per_thread, CopySync::async, api);
    if (result != CUDA_SUCCESS) {
      if (fail_index != nullptr) *fail_index = i;
      return result;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count, CUmemcpyAttributes* a,
                                       size_t* ai, size_t na, size_t* fail, CUstream stream) {
  return batch_copies(d, s, n, count, a, ai, na, fail, stream, false, "cuMemcpyBatchAsync");
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                            CUmemcpyAttributes* a, size_t* ai, size_t na, size_t* fail, CUstream stream) {
  return batch_copies(d, s, n, count, a, ai, na, fail, stream, true, "cuMemcpyBatchAsync_ptsz");
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                          CUmemcpyAttributes* a, size_t* ai, size_t na, CUstream stream) {
  return batch_copies(d, s, n, count, a, ai, na, nullptr, stream, false, "cuMemcpyBatchAsync_v2");
}
SIM_EXPORT CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                               CUmemcpyAttributes* a, size_t* ai, size_t na, CUstream stream) {
  return batch_copies(d, s, n, count, a, ai, na, nullptr, stream, true, "cuMemcpyBatchAsync_v2_ptsz");
}

// ---- batches of 3D copies (cuMemcpy3DBatchAsync) --------------------------------------
// Extents are in elements: one byte between pointers, the array's element
// otherwise. Each copy becomes a 3D copy on the stream, in order.
namespace {

const Region* array_region(CUarray array) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  const auto base = reinterpret_cast<std::uint64_t>(array);
  const Region* region = sim.region_of(base);
  return region != nullptr && region->array_element != 0 && region->base == base ? region : nullptr;
}

// Fills one side of `c`; false for an operand that is not valid.
bool batch_side(const CUmemcpy3DOperand& operand, const CUextent3D& extent, std::uint64_t element, bool source,
                CUDA_MEMCPY3D& c) {
  CUmemorytype& type = source ? c.srcMemoryType : c.dstMemoryType;
  if (operand.type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
    const auto& p = operand.op.ptr;
    if ((p.rowLength != 0 && p.rowLength < extent.width) || (p.layerHeight != 0 && p.layerHeight < extent.height)) {
      return false;
    }
    type = CU_MEMORYTYPE_UNIFIED;
    (source ? c.srcDevice : c.dstDevice) = p.ptr;
    (source ? c.srcPitch : c.dstPitch) = (p.rowLength != 0 ? p.rowLength : extent.width) * element;
    (source ? c.srcHeight : c.dstHeight) = p.layerHeight != 0 ? p.layerHeight : extent.height;
    return true;
  }
  if (operand.type != CU_MEMCPY_OPERAND_TYPE_ARRAY) return false;
  const Region* region = array_region(operand.op.array.array);
  if (region == nullptr) return false;
  type = CU_MEMORYTYPE_ARRAY;
  (source ? c.srcArray : c.dstArray) = operand.op.array.array;
  (source ? c.srcXInBytes : c.dstXInBytes) = operand.op.array.offset.x * element;
  (source ? c.srcY : c.dstY) = operand.op.array.offset.y;
  (source ? c.srcZ : c.dstZ) = operand.op.array.offset.z;
  (source ? c.srcHeight : c.dstHeight) = region->array_height;
  return true;
}

CUresult batch_3d(size_t count, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail_index, unsigned long long flags,
                  CUstream stream, bool per_thread, const char* api) {
  if (fail_index != nullptr) *fail_index = SIZE_MAX;
  if (count == 0 || ops == nullptr || flags != 0 || stream == nullptr || stream == CU_STREAM_LEGACY) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    const CUDA_MEMCPY3D_BATCH_OP& op = ops[i];
    const Region* src_array =
        op.src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_region(op.src.op.array.array) : nullptr;
    const Region* dst_array =
        op.dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_region(op.dst.op.array.array) : nullptr;
    const std::uint64_t element = src_array   ? src_array->array_element
                                  : dst_array ? dst_array->array_element
                                              : 1;
    CUDA_MEMCPY3D c{};
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    const bool valid = op.extent.width != 0 && op.extent.height != 0 && op.extent.depth != 0 &&
                       op.srcAccessOrder >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
                       op.srcAccessOrder <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY &&
                       (src_array == nullptr || dst_array == nullptr ||
                        src_array->array_element == dst_array->array_element) &&
                       batch_side(op.src, op.extent, element, true, c) && batch_side(op.dst, op.extent, element, false, c);
    if (valid) {
      c.WidthInBytes = op.extent.width * element;
      c.Height = op.extent.height;
      c.Depth = op.extent.depth;
      result = copy_3d(&c, stream, per_thread, CopySync::async, api);
    }
    if (result != CUDA_SUCCESS) {
      if (fail_index != nullptr) *fail_index = i;
      return result;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail,
                                         unsigned long long flags, CUstream s) {
  return batch_3d(n, ops, fail, flags, s, false, "cuMemcpy3DBatchAsync");
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail,
                                              unsigned long long flags, CUstream s) {
  return batch_3d(n, ops, fail, flags, s, true, "cuMemcpy3DBatchAsync_ptsz");
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                                            CUstream s) {
  return batch_3d(n, ops, nullptr, flags, s, false, "cuMemcpy3DBatchAsync_v2");
}
SIM_EXPORT CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags,
                                                 CUstream s) {
  return batch_3d(n, ops, nullptr, flags, s, true, "cuMemcpy3DBatchAsync_v2_ptsz");
}
