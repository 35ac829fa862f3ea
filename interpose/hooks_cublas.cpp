// cuBLAS and cuBLASLt matrix multiplies: the one thing these calls tell that
// their kernels' arguments do not is that the output is written whole before
// anything reads it (beta = 0, or a cuBLASLt result D that is not C). For the
// length of such a call the pager does not copy those bytes in when the
// output comes back from the host (vmm/library_call_scope.h); everything else
// about the call -- its arguments, its result, its status -- is the
// library's. The hooks forward to the next definition in the search order
// (the library itself), so the shim needs neither library to be present.
//
// Reached by symbol: a program or framework that links libcublas (NEEDED)
// finds our definitions first, as the shim is preloaded. A call a library
// makes into itself or into cuBLASLt while one of these runs forwards
// untouched (one scope a thread). cuBLASLt: hooks_cublaslt.cpp.
#include <optional>

#include <cublasLt.h>
#include <cublas_api.h>

#include "interpose/gemm_operands.h"
#include "interpose/library_call.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// The C entry points (cublas_api.h adds C++ overloads taking the old
// cudaDataType compute type, which call these).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long int,
                                                const void*, cudaDataType, int, long long int, const void*, void*,
                                                cudaDataType, int, long long int, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);

bool transposed(cublasOperation_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// The type alpha and beta have for a cublasGemmEx of `compute` into `output`.
cudaDataType scale_type(cublasComputeType_t compute, cudaDataType output) {
  const bool complex = output == CUDA_C_32F || output == CUDA_C_64F;
  switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return complex ? CUDA_C_16F : CUDA_R_16F;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
      return complex ? CUDA_C_32F : CUDA_R_32F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      return complex ? CUDA_C_64F : CUDA_R_64F;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      return CUDA_R_32I;
    default:
      return CUDA_R_8I;  // none that scalar_is_zero knows: beta counts as non-zero
  }
}

// Whether beta, as the handle's pointer mode says where it is, is zero. A
// beta in device memory is not read here (that would wait for the stream):
// it counts as non-zero.
bool beta_is_zero(cublasHandle_t handle, const void* beta, cudaDataType type) {
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_DEVICE;
  auto get_mode = NEXT(cublasGetPointerMode_v2);
  if (get_mode == nullptr || get_mode(handle, &mode) != CUBLAS_STATUS_SUCCESS) return false;
  return mode == CUBLAS_POINTER_MODE_HOST && scalar_is_zero(beta, type);
}

cudaStream_t stream_of(cublasHandle_t handle) {
  cudaStream_t stream = nullptr;
  if (auto get_stream = NEXT(cublasGetStream_v2)) get_stream(handle, &stream);
  return stream;
}

// A (strided batched) GEMM: C = alpha op(A) op(B) + beta C, op(A) m x k.
struct Gemm {
  cublasOperation_t transa, transb;
  std::int64_t m, n, k;
  const void* a; cudaDataType a_type; std::int64_t lda; long long stride_a;
  const void* b; cudaDataType b_type; std::int64_t ldb; long long stride_b;
  const void* beta;
  void* c; cudaDataType c_type; std::int64_t ldc; long long stride_c;
  std::int64_t batch;
  cudaDataType scale;
};

MatrixOperand operand(const void* address, bool is_transposed, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                      long long stride, std::int64_t batch, cudaDataType type) {
  MatrixOperand matrix{reinterpret_cast<std::uint64_t>(address), 0, 0, ld, batch, stride, element_bytes(type)};
  stored_shape(is_transposed, rows, cols, &matrix.rows, &matrix.cols);
  return matrix;
}

std::optional<ByteRange> gemm_overwrites(cublasHandle_t handle, const Gemm& g) {
  if (LibraryCall::inside_one()) return std::nullopt;
  const MatrixOperand a = operand(g.a, transposed(g.transa), g.m, g.k, g.lda, g.stride_a, g.batch, g.a_type);
  const MatrixOperand b = operand(g.b, transposed(g.transb), g.k, g.n, g.ldb, g.stride_b, g.batch, g.b_type);
  const MatrixOperand c = operand(g.c, false, g.m, g.n, g.ldc, g.stride_c, g.batch, g.c_type);
  return overwritten_whole(c, !beta_is_zero(handle, g.beta, g.scale), {a, b});
}

}  // namespace

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                                 cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                 const void* A, cudaDataType Atype, int lda, const void* B,
                                                 cudaDataType Btype, int ldb, const void* beta, void* C,
                                                 cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                                 cublasGemmAlgo_t algo) {
  return call_library(
      LIBRARY_HOOK(cublasGemmEx), NEXT_AS(cublasGemmEx, GemmEx), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] {
        return gemm_overwrites(handle, {transa, transb, m, n, k, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype,
                                        ldc, 0, 1, scale_type(computeType, Ctype)});
      },
      [&] { return stream_of(handle); }, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta,
      C, Ctype, ldc, computeType, algo);
}

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                                                    cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                                                    const void* alpha, const void* A, cudaDataType Atype, int64_t lda,
                                                    const void* B, cudaDataType Btype, int64_t ldb, const void* beta,
                                                    void* C, cudaDataType Ctype, int64_t ldc,
                                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call_library(
      LIBRARY_HOOK(cublasGemmEx_64), NEXT(cublasGemmEx_64), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] {
        return gemm_overwrites(handle, {transa, transb, m, n, k, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype,
                                        ldc, 0, 1, scale_type(computeType, Ctype)});
      },
      [&] { return stream_of(handle); }, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta,
      C, Ctype, ldc, computeType, algo);
}

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
    const void* A, cudaDataType Atype, int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
    long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long int strideC,
    int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call_library(
      LIBRARY_HOOK(cublasGemmStridedBatchedEx), NEXT_AS(cublasGemmStridedBatchedEx, GemmStridedBatchedEx), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] {
        return gemm_overwrites(handle, {transa, transb, m, n, k, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta,
                                        C, Ctype, ldc, strideC, batchCount, scale_type(computeType, Ctype)});
      },
      [&] { return stream_of(handle); }, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
      ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
    const void* alpha, const void* A, cudaDataType Atype, int64_t lda, long long int strideA, const void* B,
    cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta, void* C, cudaDataType Ctype,
    int64_t ldc, long long int strideC, int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return call_library(
      LIBRARY_HOOK(cublasGemmStridedBatchedEx_64), NEXT(cublasGemmStridedBatchedEx_64), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] {
        return gemm_overwrites(handle, {transa, transb, m, n, k, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta,
                                        C, Ctype, ldc, strideC, batchCount, scale_type(computeType, Ctype)});
      },
      [&] { return stream_of(handle); }, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
      ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                                   cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                                   const float* A, int lda, const float* B, int ldb,
                                                   const float* beta, float* C, int ldc) {
  return call_library(
      LIBRARY_HOOK(cublasSgemm_v2), NEXT(cublasSgemm_v2), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] {
        return gemm_overwrites(handle, {transa, transb, m, n, k, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C,
                                        CUDA_R_32F, ldc, 0, 1, CUDA_R_32F});
      },
      [&] { return stream_of(handle); }, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
