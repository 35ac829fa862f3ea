// What cuBLASLt's descriptors hold in the simulator: the matmul descriptor,
// the matrix layout and the heuristic preference. Each is allocated by its
// Create function and handed out as the library's opaque pointer type.
#pragma once

#include <cublasLt.h>

#include <cstdint>

namespace vgpusim_blas {

struct MatmulDescriptor {
  std::int32_t compute_type = CUBLAS_COMPUTE_32F;
  std::int32_t scale_type = CUDA_R_32F;
  std::int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  std::int32_t transa = CUBLAS_OP_N;
  std::int32_t transb = CUBLAS_OP_N;
  std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

struct MatrixLayout {
  std::uint32_t type = CUDA_R_32F;
  std::int32_t order = CUBLASLT_ORDER_COL;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
  std::int32_t batch_count = 1;
  std::int64_t batch_stride = 0;  // elements between batch members
};

struct MatmulPreference {
  std::uint32_t search_mode = 0;
  std::uint64_t max_workspace_bytes = 0;
  std::uint32_t reduction_scheme_mask = 0;
  std::uint32_t min_alignment_bytes[4] = {0, 0, 0, 0};  // A, B, C, D
  float max_waves_count = 0.0f;
  std::uint64_t implementation_mask = 0;
};

inline MatmulDescriptor* descriptor(cublasLtMatmulDesc_t desc) { return reinterpret_cast<MatmulDescriptor*>(desc); }
inline MatrixLayout* layout(cublasLtMatrixLayout_t desc) { return reinterpret_cast<MatrixLayout*>(desc); }
inline MatmulPreference* preference(cublasLtMatmulPreference_t desc) {
  return reinterpret_cast<MatmulPreference*>(desc);
}

}  // namespace vgpusim_blas
