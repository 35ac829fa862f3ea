#include "gemm_checks.h"

#include "element_types.h"

namespace vgpusim_blas {

bool is_valid_operation(cublasOperation_t operation) {
  return operation == CUBLAS_OP_N || operation == CUBLAS_OP_T || operation == CUBLAS_OP_C;
}

bool is_supported_compute(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return true;
    default:
      return false;
  }
}

cublasStatus_t check_types(cudaDataType a, cudaDataType b, cudaDataType c, cudaDataType d) {
  if (!is_supported_element(a) || !is_supported_element(b) || !is_supported_element(c) || !is_supported_element(d)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (a != b || c != d || (c != a && c != CUDA_R_32F)) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace vgpusim_blas
