// cublasSgemm_v2, cublasGemmEx, cublasGemmStridedBatchedEx and their _64
// forms: one checked path that builds a GemmOperation (D == C) and launches
// the library's kernel on the handle's stream.
#include <cstdint>

#include "cublas_context.h"
#include "gemm_checks.h"

namespace vgpusim_blas {
namespace {

struct GemmArguments {
  cublasOperation_t transa, transb;
  std::int64_t m, n, k;
  const void* alpha;
  const void* a;
  cudaDataType type_a;
  std::int64_t lda;
  long long stride_a;
  const void* b;
  cudaDataType type_b;
  std::int64_t ldb;
  long long stride_b;
  const void* beta;
  void* c;
  cudaDataType type_c;
  std::int64_t ldc;
  long long stride_c;
  std::int64_t batch;
  cublasComputeType_t compute;
};

// The compute argument as given: a cublasComputeType_t, or the legacy
// cudaDataType that CUDA 10 took (C callers may still pass CUDA_R_32F, which
// cublas_api.h's C++ wrapper would have migrated).
cublasComputeType_t migrate_legacy_compute(cublasHandle_t handle, int compute) {
  if (compute == CUDA_R_32F) {
    return (handle->math_mode & 0xF) == CUBLAS_PEDANTIC_MATH ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  }
  return static_cast<cublasComputeType_t>(compute);
}

cublasStatus_t gemm(cublasHandle_t handle, const GemmArguments& args) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_valid_operation(args.transa) || !is_valid_operation(args.transb)) return CUBLAS_STATUS_INVALID_VALUE;
  if (args.m < 0 || args.n < 0 || args.k < 0 || args.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const std::int64_t rows_a = is_transposed(args.transa) ? args.k : args.m;
  const std::int64_t rows_b = is_transposed(args.transb) ? args.n : args.k;
  if (!leading_dimension_holds(args.lda, rows_a) || !leading_dimension_holds(args.ldb, rows_b) ||
      !leading_dimension_holds(args.ldc, args.m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (args.alpha == nullptr || args.beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasComputeType_t compute = migrate_legacy_compute(handle, static_cast<int>(args.compute));
  if (!is_supported_compute(compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (const cublasStatus_t types = check_types(args.type_a, args.type_b, args.type_c, args.type_c);
      types != CUBLAS_STATUS_SUCCESS) {
    return types;
  }
  // Nothing to compute: success without a launch (k == 0 is not this case:
  // C = beta * C still runs).
  if (args.m == 0 || args.n == 0 || args.batch == 0) return CUBLAS_STATUS_SUCCESS;

  GemmOperation op;
  op.a = reinterpret_cast<CUdeviceptr>(args.a);
  op.b = reinterpret_cast<CUdeviceptr>(args.b);
  op.c = op.d = reinterpret_cast<CUdeviceptr>(args.c);
  op.workspace = reinterpret_cast<CUdeviceptr>(handle->workspace);
  op.workspace_bytes = handle->workspace_bytes;
  op.m = args.m;
  op.n = args.n;
  op.k = args.k;
  op.lda = args.lda;
  op.ldb = args.ldb;
  op.ldc = op.ldd = args.ldc;
  op.stride_a = args.stride_a;
  op.stride_b = args.stride_b;
  op.stride_c = op.stride_d = args.stride_c;
  op.batch = args.batch;
  op.transpose_a = is_transposed(args.transa);
  op.transpose_b = is_transposed(args.transb);
  op.type_a = args.type_a;
  op.type_b = args.type_b;
  op.type_c = op.type_d = args.type_c;
  op.compute_type = compute;
  if (handle->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
    op.alpha_device = reinterpret_cast<CUdeviceptr>(args.alpha);
    op.beta_device = reinterpret_cast<CUdeviceptr>(args.beta);
  } else {
    op.alpha = *static_cast<const float*>(args.alpha);
    op.beta = *static_cast<const float*>(args.beta);
  }
  return cublas_gemm_kernel().launch(op, handle->stream);
}

cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, std::int64_t m,
                     std::int64_t n, std::int64_t k, const float* alpha, const float* a, std::int64_t lda,
                     const float* b, std::int64_t ldb, const float* beta, float* c, std::int64_t ldc) {
  return gemm(handle, {transa, transb, m, n, k, alpha, a, CUDA_R_32F, lda, 0, b, CUDA_R_32F, ldb, 0, beta, c,
                       CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F});
}

}  // namespace
}  // namespace vgpusim_blas

using vgpusim_blas::gemm;

VGPUSIM_BLAS_API cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                               const float* A, int lda, const float* B, int ldb, const float* beta,
                                               float* C, int ldc) {
  return vgpusim_blas::sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

VGPUSIM_BLAS_API cublasStatus_t cublasSgemm_v2_64(cublasHandle_t handle, cublasOperation_t transa,
                                                  cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                                  const float* alpha, const float* A, int64_t lda, const float* B,
                                                  int64_t ldb, const float* beta, float* C, int64_t ldc) {
  return vgpusim_blas::sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

VGPUSIM_BLAS_API cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                             cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                             const void* A, cudaDataType Atype, int lda, const void* B,
                                             cudaDataType Btype, int ldb, const void* beta, void* C,
                                             cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                             cublasGemmAlgo_t) {
  return gemm(handle, {transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1,
                       computeType});
}

VGPUSIM_BLAS_API cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                                const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                                                const void* B, cudaDataType Btype, int64_t ldb, const void* beta,
                                                void* C, cudaDataType Ctype, int64_t ldc,
                                                cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm(handle, {transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1,
                       computeType});
}

VGPUSIM_BLAS_API cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
    const void* A, cudaDataType Atype, int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
    long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long int strideC,
    int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm(handle, {transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype,
                       ldc, strideC, batchCount, computeType});
}

VGPUSIM_BLAS_API cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
    const void* alpha, const void* A, cudaDataType Atype, int64_t lda, long long int strideA, const void* B,
    cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta, void* C, cudaDataType Ctype,
    int64_t ldc, long long int strideC, int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm(handle, {transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype,
                       ldc, strideC, batchCount, computeType});
}
