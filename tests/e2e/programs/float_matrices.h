// What the library probes (gemm_probe, library_dlsym_probe) share: float
// buffers on the device with the values they must hold kept on the host, the
// fillers that push everything else to the host under a 16 MiB cap, and the
// host's reference GEMM. Small integers throughout, so every product is
// exact in float whatever the order of summation, and so is the reference.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "probe_support.h"

constexpr std::size_t kMiB = 1u << 20;
constexpr int kFillers = 5;  // 20 MiB that push everything else out of a 16 MiB cap

struct Buffer {
  CUdeviceptr device = 0;
  std::vector<float> host;  // what it must hold
  void* pointer() const { return reinterpret_cast<void*>(device); }
};

inline Buffer make(std::size_t floats, float (*value)(std::size_t)) {
  Buffer b;
  CHECK(cuMemAlloc(&b.device, floats * sizeof(float)));
  b.host.resize(floats);
  for (std::size_t i = 0; i < floats; ++i) b.host[i] = value(i);
  CHECK(cuMemcpyHtoD(b.device, b.host.data(), floats * sizeof(float)));
  return b;
}

inline float small_a(std::size_t i) { return static_cast<float>(i % 4); }
inline float small_b(std::size_t i) { return static_cast<float>((i * 7) % 3); }
inline float old_c(std::size_t i) { return static_cast<float>(100 + i % 17); }

struct Fillers {
  std::vector<CUdeviceptr> buffers = std::vector<CUdeviceptr>(kFillers);
  Fillers() {
    for (CUdeviceptr& f : buffers) CHECK(cuMemAlloc(&f, 4 * kMiB));
  }
  // Everything else goes to the host: fillers written in turn.
  void push_out() {
    for (CUdeviceptr f : buffers) CHECK(cuMemsetD32(f, 7, 4 * kMiB / 4));
  }
};

// C[i + j*ldc] (+)= sum_p A[i + p*lda] B[p + j*ldb], column-major.
inline void reference(std::vector<float>& c, std::size_t c_at, int ldc, const std::vector<float>& a, std::size_t a_at,
                      const std::vector<float>& b, std::size_t b_at, int m, int n, int k, float beta) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float sum = 0;
      for (int p = 0; p < k; ++p) {
        sum += a[a_at + i + static_cast<std::size_t>(p) * m] * b[b_at + p + static_cast<std::size_t>(j) * k];
      }
      float& out = c[c_at + i + static_cast<std::size_t>(j) * ldc];
      out = sum + beta * out;
    }
  }
}
