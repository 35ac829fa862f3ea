// cublasLtMatmul and cublasLtMatmulAlgoGetHeuristic. Both check the problem
// the same way (plan_matmul); the heuristic offers the one simulated
// algorithm, which cublasLtMatmul also runs when given no algorithm.
#include <cstring>

#include "api_export.h"
#include "gemm_checks.h"
#include "lt_context.h"
#include "lt_descriptors.h"

namespace vgpusim_blas {
namespace {

// Marks the algorithm the heuristic hands out (its data[0]), for a reader of
// a serialised algo; cublasLtMatmul accepts any.
constexpr std::uint64_t kSimulatedAlgoId = 0x7367656d6d000001ull;

// The GEMM the descriptors describe, pointers left empty; or why not.
cublasStatus_t plan_matmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t operation_desc, cublasLtMatrixLayout_t a_desc,
                           cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc,
                           cublasLtMatrixLayout_t d_desc, GemmOperation& op) {
  if (!live_lt_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (operation_desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr || d_desc == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const MatmulDescriptor& desc = *descriptor(operation_desc);
  const MatrixLayout &a = *layout(a_desc), &b = *layout(b_desc), &c = *layout(c_desc), &d = *layout(d_desc);
  const bool transpose_a = is_transposed(static_cast<cublasOperation_t>(desc.transa));
  const bool transpose_b = is_transposed(static_cast<cublasOperation_t>(desc.transb));
  // D is m x n; op(A) m x k; op(B) k x n; C as D.
  const auto m = static_cast<std::int64_t>(d.rows), n = static_cast<std::int64_t>(d.cols);
  const auto k = static_cast<std::int64_t>(transpose_a ? a.rows : a.cols);
  const auto a_rows = static_cast<std::int64_t>(transpose_a ? a.cols : a.rows);
  const auto b_rows = static_cast<std::int64_t>(transpose_b ? b.cols : b.rows);
  const auto b_cols = static_cast<std::int64_t>(transpose_b ? b.rows : b.cols);
  if (m < 0 || n < 0 || k < 0 || a_rows != m || b_rows != k || b_cols != n || c.rows != d.rows || c.cols != d.cols) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const MatrixLayout* matrix : {&a, &b, &c, &d}) {
    if (!leading_dimension_holds(matrix->ld, static_cast<std::int64_t>(matrix->rows))) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  if (d.batch_count < 0 || a.batch_count != d.batch_count || b.batch_count != d.batch_count ||
      c.batch_count != d.batch_count) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!is_supported_compute(static_cast<cublasComputeType_t>(desc.compute_type)) || desc.scale_type != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (const cublasStatus_t types =
          check_types(static_cast<cudaDataType>(a.type), static_cast<cudaDataType>(b.type),
                      static_cast<cudaDataType>(c.type), static_cast<cudaDataType>(d.type));
      types != CUBLAS_STATUS_SUCCESS) {
    return types;
  }
  op.m = m;
  op.n = n;
  op.k = k;
  op.lda = a.ld;
  op.ldb = b.ld;
  op.ldc = c.ld;
  op.ldd = d.ld;
  op.stride_a = a.batch_stride;
  op.stride_b = b.batch_stride;
  op.stride_c = c.batch_stride;
  op.stride_d = d.batch_stride;
  op.batch = d.batch_count;
  op.transpose_a = transpose_a;
  op.transpose_b = transpose_b;
  op.type_a = static_cast<std::int32_t>(a.type);
  op.type_b = static_cast<std::int32_t>(b.type);
  op.type_c = static_cast<std::int32_t>(c.type);
  op.type_d = static_cast<std::int32_t>(d.type);
  op.compute_type = desc.compute_type;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace vgpusim_blas

using namespace vgpusim_blas;

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t operation_desc,
                                               const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                               const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                               const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t*,
                                               void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  GemmOperation op;
  if (const cublasStatus_t planned = plan_matmul(handle, operation_desc, Adesc, Bdesc, Cdesc, Ddesc, op);
      planned != CUBLAS_STATUS_SUCCESS) {
    return planned;
  }
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // In place (C == D) needs one layout for both, as cuBLASLt requires.
  if (C == D && (op.ldc != op.ldd || op.stride_c != op.stride_d || op.type_c != op.type_d)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (op.m == 0 || op.n == 0 || op.batch == 0) return CUBLAS_STATUS_SUCCESS;
  op.a = reinterpret_cast<CUdeviceptr>(A);
  op.b = reinterpret_cast<CUdeviceptr>(B);
  op.c = reinterpret_cast<CUdeviceptr>(C);
  op.d = reinterpret_cast<CUdeviceptr>(D);
  op.workspace = reinterpret_cast<CUdeviceptr>(workspace);
  op.workspace_bytes = workspace != nullptr ? workspace_bytes : 0;
  if (descriptor(operation_desc)->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE) {
    op.alpha_device = reinterpret_cast<CUdeviceptr>(alpha);
    op.beta_device = reinterpret_cast<CUdeviceptr>(beta);
  } else {
    op.alpha = *static_cast<const float*>(alpha);
    op.beta = *static_cast<const float*>(beta);
  }
  return lt_gemm_kernel().launch(op, stream);
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t operation_desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t, int requested_count, cublasLtMatmulHeuristicResult_t results[], int* returned_count) {
  if (requested_count <= 0 || results == nullptr || returned_count == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  GemmOperation op;
  if (const cublasStatus_t planned = plan_matmul(handle, operation_desc, Adesc, Bdesc, Cdesc, Ddesc, op);
      planned != CUBLAS_STATUS_SUCCESS) {
    *returned_count = 0;
    return planned;
  }
  cublasLtMatmulHeuristicResult_t& result = results[0];
  std::memset(&result, 0, sizeof result);
  result.algo.data[0] = kSimulatedAlgoId;
  result.workspaceSize = 0;  // needs none; uses scratch in one it is given
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returned_count = 1;
  return CUBLAS_STATUS_SUCCESS;
}
