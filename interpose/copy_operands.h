// The device bytes a copy or memset descriptor names, for the hooks that
// make them resident (hooks_copy.cpp) or pin them for a graph's life
// (hooks_graph.cpp).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace vgpumem::interpose {

// The device bytes one side of a 2D/3D copy covers, as [first, first + bytes);
// nothing for host memory and arrays (never paged). A unified operand is
// looked up like a device one: host addresses are simply not found.
struct Span {
  std::uint64_t first = 0, bytes = 0;
};

inline Span span(CUmemorytype type, CUdeviceptr device, std::size_t x, std::size_t y, std::size_t z,
                 std::size_t pitch, std::size_t slice_height, std::size_t width, std::size_t height,
                 std::size_t depth) {
  if ((type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) || width == 0 || height == 0 || depth == 0) {
    return {};
  }
  const std::uint64_t row = pitch != 0 ? pitch : width;
  const std::uint64_t slice = row * (slice_height != 0 ? slice_height : height);
  return {device + z * slice + y * row + x, (depth - 1) * slice + (height - 1) * row + width};
}

// The destination and source of a 3D copy descriptor.
inline Span destination_of(const CUDA_MEMCPY3D& c) {
  return span(c.dstMemoryType, c.dstDevice, c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight, c.WidthInBytes,
              c.Height, c.Depth);
}
inline Span source_of(const CUDA_MEMCPY3D& c) {
  return span(c.srcMemoryType, c.srcDevice, c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight, c.WidthInBytes,
              c.Height, c.Depth);
}

// The bytes a 2D memset of `width` elements of `element` bytes in `height`
// rows `pitch` apart covers.
inline std::uint64_t rows_bytes(std::size_t pitch, std::size_t width, std::size_t height, std::size_t element) {
  return width == 0 || height == 0 ? 0 : (height - 1) * std::uint64_t{pitch} + width * element;
}

}  // namespace vgpumem::interpose
