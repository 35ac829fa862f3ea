// cuBLAS handle management: create, destroy, stream, pointer and math modes,
// workspace, version and status strings.
#include "cublas_context.h"
#include "declared_duration.h"
#include "status_names.h"

namespace vgpusim_blas {

LiveHandles<cublasContext>& live_cublas_handles() {
  static LiveHandles<cublasContext> handles;
  return handles;
}

GemmKernel& cublas_gemm_kernel() {
  static GemmKernel kernel("vgpusim_cublas_gemm");
  return kernel;
}

}  // namespace vgpusim_blas

using vgpusim_blas::live_cublas_handles;

VGPUSIM_BLAS_API cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // The real library resolves its driver entry points and loads its kernels
  // here; failing that it is NOT_INITIALIZED.
  if (!vgpusim_blas::cublas_gemm_kernel().prepare()) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* context = new cublasContext;
  live_cublas_handles().add(context);
  *handle = context;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (!live_cublas_handles().remove(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

// Kept and read back; the arithmetic is fp32 accumulation whatever the mode
// (every mode allows that).
VGPUSIM_BLAS_API cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

// The workspace is passed to every GEMM kernel the handle launches, which
// writes scratch into it, as real split-K kernels do.
VGPUSIM_BLAS_API cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && bytes != 0) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS answers the version without a handle too (handle NULL).
VGPUSIM_BLAS_API cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (handle != nullptr && !live_cublas_handles().contains(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API const char* cublasGetStatusName(cublasStatus_t status) { return vgpusim_blas::status_name(status); }
VGPUSIM_BLAS_API const char* cublasGetStatusString(cublasStatus_t status) {
  return vgpusim_blas::status_string(status);
}

// Not cuBLAS: the simulator's own (declared_duration.h). The next GEMM kernel
// this thread launches takes `ns` on the simulated clock instead of the model's.
VGPUSIM_BLAS_API void vgpusimCublasDeclareNextKernelNs(double ns) { vgpusim_libs::declare_next_kernel_ns(ns); }
