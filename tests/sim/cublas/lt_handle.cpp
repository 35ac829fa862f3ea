// cublasLtCreate, cublasLtDestroy and the status strings.
#include "api_export.h"
#include "lt_context.h"
#include "status_names.h"

namespace vgpusim_blas {

LiveHandles<cublasLtContext>& live_lt_handles() {
  static LiveHandles<cublasLtContext> handles;
  return handles;
}

GemmKernel& lt_gemm_kernel() {
  static GemmKernel kernel("vgpusim_cublaslt_matmul");
  return kernel;
}

}  // namespace vgpusim_blas

VGPUSIM_BLAS_API cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (!vgpusim_blas::lt_gemm_kernel().prepare()) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto* context = new cublasLtContext;
  vgpusim_blas::live_lt_handles().add(context);
  *handle = context;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!vgpusim_blas::live_lt_handles().remove(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API const char* cublasLtGetStatusName(cublasStatus_t status) { return vgpusim_blas::status_name(status); }
VGPUSIM_BLAS_API const char* cublasLtGetStatusString(cublasStatus_t status) {
  return vgpusim_blas::status_string(status);
}
