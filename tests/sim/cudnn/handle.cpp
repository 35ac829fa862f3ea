// Handles, streams, the version and the status strings.
#include "declared_duration.h"
#include "dnn_context.h"
#include "dnn_kernels.h"

namespace vgpusim_dnn {

vgpusim_blas::LiveHandles<cudnnContext>& live_handles() {
  static vgpusim_blas::LiveHandles<cudnnContext> handles;
  return handles;
}

}  // namespace vgpusim_dnn

using vgpusim_dnn::is_live;

VGPUSIM_CUDNN_API cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  // The real library loads its kernels and resolves the driver here; failing
  // that it is NOT_INITIALIZED.
  if (!vgpusim_dnn::prepare_kernels()) return CUDNN_STATUS_NOT_INITIALIZED;
  auto* context = new cudnnContext;
  vgpusim_dnn::live_handles().add(context);
  *handle = context;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (!vgpusim_dnn::live_handles().remove(handle)) return CUDNN_STATUS_BAD_PARAM;
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!is_live(handle)) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  if (!is_live(handle) || stream == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *stream = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

VGPUSIM_CUDNN_API const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (static_cast<int>(status)) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case 2001: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER: return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}

// Not cuDNN: the simulator's own (declared_duration.h). The next convolution
// kernel this thread launches takes `ns` on the simulated clock instead of the
// model's.
VGPUSIM_CUDNN_API void vgpusimCudnnDeclareNextKernelNs(double ns) { vgpusim_libs::declare_next_kernel_ns(ns); }
