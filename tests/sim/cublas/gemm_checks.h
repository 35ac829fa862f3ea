// The argument checks both libraries make the way cuBLAS documents them:
// shapes are INVALID_VALUE, types and compute modes this simulator does not
// implement are NOT_SUPPORTED.
#pragma once

#include <cublas_api.h>

#include <cstdint>

namespace vgpusim_blas {

// N, T and C (C is T for real types); anything else is INVALID_VALUE.
bool is_valid_operation(cublasOperation_t operation);
inline bool is_transposed(cublasOperation_t operation) { return operation != CUBLAS_OP_N; }

// fp32 accumulation only: CUBLAS_COMPUTE_32F, its _PEDANTIC and _FAST_16F/
// _FAST_16BF/_FAST_TF32 forms.
bool is_supported_compute(cublasComputeType_t compute);

// A and B of one type; C and D of one type, either A's or fp32; all of
// fp32/fp16/bf16. Otherwise NOT_SUPPORTED.
cublasStatus_t check_types(cudaDataType a, cudaDataType b, cudaDataType c, cudaDataType d);

// A matrix of `rows` rows stored with leading dimension `ld`: ld >= max(1, rows).
inline bool leading_dimension_holds(std::int64_t ld, std::int64_t rows) { return ld >= (rows > 1 ? rows : 1); }

}  // namespace vgpusim_blas
