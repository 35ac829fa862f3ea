// What a simulated cublasHandle_t holds, and the library's GEMM kernel.
#pragma once

#include <cublas_api.h>
#include <cuda.h>

#include <cstddef>

#include "api_export.h"
#include "gemm_kernel.h"
#include "live_handles.h"

// The handle type cublas_api.h declares and leaves incomplete.
struct cublasContext {
  CUstream stream = nullptr;  // cudaStream_t and CUstream are the same type
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

namespace vgpusim_blas {

LiveHandles<cublasContext>& live_cublas_handles();
GemmKernel& cublas_gemm_kernel();

}  // namespace vgpusim_blas
