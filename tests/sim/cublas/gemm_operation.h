// One batched GEMM as the simulated kernel receives it:
//   D[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],   b = 0 .. batch-1,
// column-major, every matrix at its own leading dimension and batch stride
// (in elements). cublasGemmEx is the case D == C.
#pragma once

#include <cuda.h>
#include <library_types.h>

#include <cstdint>

namespace vgpusim_blas {

struct GemmOperation {
  // Device memory the kernel touches. alpha_device and beta_device are 0 in
  // host pointer mode, when `alpha` and `beta` hold the values.
  CUdeviceptr a = 0, b = 0, c = 0, d = 0, workspace = 0, alpha_device = 0, beta_device = 0;
  std::uint64_t workspace_bytes = 0;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  std::int64_t batch = 1;
  std::int32_t transpose_a = 0, transpose_b = 0;  // 0: as stored; else transposed (real types: T == C)
  std::int32_t type_a = CUDA_R_32F, type_b = CUDA_R_32F, type_c = CUDA_R_32F, type_d = CUDA_R_32F;
  std::int32_t compute_type = 0;  // a cublasComputeType_t, for the duration model
  float alpha = 1.0f, beta = 0.0f;
  double declared_ns = 0.0;  // the caller's declared kernel time (declared_duration.h); 0: the model's
};

// The kernel's parameters, in launch order: each field is one parameter of its
// own size, so an interposer sees every device pointer as a separate
// pointer-sized argument, as in a real cuBLAS kernel. One list, used to
// register, pack and unpack, so the three cannot drift apart.
#define VGPUSIM_GEMM_PARAMETERS(X)                                                                             \
  X(a) X(b) X(c) X(d) X(workspace) X(alpha_device) X(beta_device) X(workspace_bytes) X(m) X(n) X(k) X(lda)   \
  X(ldb) X(ldc) X(ldd) X(stride_a) X(stride_b) X(stride_c) X(stride_d) X(batch) X(transpose_a) X(transpose_b) \
  X(type_a) X(type_b) X(type_c) X(type_d) X(compute_type) X(alpha) X(beta) X(declared_ns)

// Bytes the kernel writes into a workspace it is given (at most): real
// kernels keep split-K partial sums there, so an interposer must treat the
// workspace as written.
constexpr std::uint64_t kWorkspaceScratchBytes = 4096;
constexpr unsigned char kWorkspaceScratchByte = 0xA5;

// Runs the operation on the host; device pointers are host addresses in the
// simulator. alpha and beta are the values to use (read by the caller from
// device memory in device pointer mode). When beta == 0, C is not read.
void run_gemm(const GemmOperation& operation, float alpha, float beta);

}  // namespace vgpusim_blas
