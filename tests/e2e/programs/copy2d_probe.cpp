// 2D and 3D copies and memsets on memory that paging has moved to the host:
// four pitched 4 MiB buffers (more than an 8 MiB cap holds) are written with
// cuMemcpy2D, partly overwritten with cuMemsetD2D32 and cuMemsetD16, copied
// one into another with cuMemcpy3D, and read back with cuMemcpy2DAsync. Every
// operand must be made resident by the copy's own hook.
//
// Prints "copy2d ok" and exits 0; "copy2d mismatch ..." exits 4; a CUDA error exits 3.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_support.h"

namespace {

constexpr std::size_t kWidth = 4000, kHeight = 1024, kBuffers = 4;  // 4000-byte rows, pitched: ~4 MiB each

std::uint8_t pattern(std::size_t buffer, std::size_t y, std::size_t x) {
  return static_cast<std::uint8_t>(buffer * 37 + y * 11 + x);
}

}  // namespace

int main() {
  use_primary_context();
  std::vector<CUdeviceptr> buffers(kBuffers);
  std::size_t pitch = 0;
  for (CUdeviceptr& b : buffers) CHECK(cuMemAllocPitch(&b, &pitch, kWidth, kHeight, 4));

  // Host images, and what each buffer must end up holding.
  std::vector<std::vector<std::uint8_t>> expected(kBuffers, std::vector<std::uint8_t>(kWidth * kHeight));
  for (std::size_t i = 0; i < kBuffers; ++i) {
    for (std::size_t y = 0; y < kHeight; ++y) {
      for (std::size_t x = 0; x < kWidth; ++x) expected[i][y * kWidth + x] = pattern(i, y, x);
    }
    CUDA_MEMCPY2D up{};
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = expected[i].data();
    up.srcPitch = kWidth;
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    up.dstDevice = buffers[i];
    up.dstPitch = pitch;
    up.WidthInBytes = kWidth;
    up.Height = kHeight;
    CHECK(cuMemcpy2D(&up));
  }
  // Buffer 0: rows 10..19, bytes 100..499 become 0x5A5A5A5A words.
  CHECK(cuMemsetD2D32(buffers[0] + 10 * pitch + 100, pitch, 0x5A5A5A5Au, 100, 10));
  for (std::size_t y = 10; y < 20; ++y) std::memset(&expected[0][y * kWidth + 100], 0x5A, 400);
  // Buffer 1: the first 2000 bytes of row 0 become 0xBEEF halves.
  CHECK(cuMemsetD16(buffers[1], 0xBEEF, 1000));
  for (std::size_t k = 0; k < 1000; ++k) {
    expected[1][2 * k] = 0xEF;
    expected[1][2 * k + 1] = 0xBE;
  }
  // Buffer 3 <- buffer 2, a 3D copy of a 2000 x 512 window at (1000, 256).
  CUDA_MEMCPY3D window{};
  window.srcMemoryType = window.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  window.srcDevice = buffers[2];
  window.dstDevice = buffers[3];
  window.srcPitch = window.dstPitch = pitch;
  window.srcHeight = window.dstHeight = kHeight;
  window.srcXInBytes = window.dstXInBytes = 1000;
  window.srcY = window.dstY = 256;
  window.WidthInBytes = 2000;
  window.Height = 512;
  window.Depth = 1;
  CHECK(cuMemcpy3D(&window));
  for (std::size_t y = 256; y < 768; ++y) {
    std::memcpy(&expected[3][y * kWidth + 1000], &expected[2][y * kWidth + 1000], 2000);
  }

  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (std::size_t i = 0; i < kBuffers; ++i) {
    std::vector<std::uint8_t> back(kWidth * kHeight);
    CUDA_MEMCPY2D down{};
    down.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    down.srcDevice = buffers[i];
    down.srcPitch = pitch;
    down.dstMemoryType = CU_MEMORYTYPE_HOST;
    down.dstHost = back.data();
    down.dstPitch = kWidth;
    down.WidthInBytes = kWidth;
    down.Height = kHeight;
    CHECK(cuCtxSynchronize());  // the stream is non-blocking: order it after the work above
    CHECK(cuMemcpy2DAsync(&down, stream));
    CHECK(cuStreamSynchronize(stream));
    for (std::size_t k = 0; k < back.size(); ++k) {
      if (back[k] != expected[i][k]) {
        std::printf("copy2d mismatch buffer %zu byte %zu: %u, expected %u\n", i, k, back[k], expected[i][k]);
        return 4;
      }
    }
  }
  for (CUdeviceptr b : buffers) CHECK(cuMemFree(b));
  std::printf("copy2d ok\n");
  return 0;
}
