// The legacy convolution API: forward, backward data and backward filter,
// their workspace sizes and algorithm choice. One algorithm does everything
// (each algorithm enum value is accepted and runs the same arithmetic), and
// it needs kConvWorkspaceBytes of workspace, which it writes.
#include "dnn_context.h"
#include "dnn_kernels.h"
#include "legacy_descriptors.h"

namespace vgpusim_dnn {
namespace {

// One legacy convolution call, whatever its kind: x, w and y are the forward
// tensors (for backward data, x is dx and y is dy; for backward filter, w is dw).
struct LegacyCall {
  cudnnHandle_t handle;
  const void *alpha, *beta;
  cudnnTensorDescriptor_t x;
  const void* x_data;
  cudnnFilterDescriptor_t w;
  const void* w_data;
  cudnnConvolutionDescriptor_t conv;
  cudnnTensorDescriptor_t y;
  const void* y_data;
  int algo, algo_count;
  void* workspace;
  std::size_t workspace_bytes;
};

cudnnStatus_t describe(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                       cudnnTensorDescriptor_t y, ConvOperation* op) {
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr) return CUDNN_STATUS_BAD_PARAM;
  return describe_convolution(x->shape, filter_shape(*w), y->shape, conv->shape, op);
}

cudnnStatus_t convolve(ConvKind kind, const LegacyCall& call) {
  if (!is_live(call.handle)) return CUDNN_STATUS_BAD_PARAM;
  if (call.alpha == nullptr || call.beta == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (call.x_data == nullptr || call.w_data == nullptr || call.y_data == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (call.algo < 0 || call.algo >= call.algo_count) return CUDNN_STATUS_BAD_PARAM;
  ConvOperation op;
  if (const cudnnStatus_t status = describe(call.x, call.w, call.conv, call.y, &op); status != CUDNN_STATUS_SUCCESS) {
    return status;
  }
  // Less workspace than this algorithm asked for is BAD_PARAM, as in cuDNN.
  if (call.workspace_bytes < kConvWorkspaceBytes || call.workspace == nullptr) return CUDNN_STATUS_BAD_PARAM;
  op.x = reinterpret_cast<CUdeviceptr>(call.x_data);
  op.w = reinterpret_cast<CUdeviceptr>(call.w_data);
  op.y = reinterpret_cast<CUdeviceptr>(call.y_data);
  op.workspace = reinterpret_cast<CUdeviceptr>(call.workspace);
  op.workspace_bytes = kConvWorkspaceBytes;
  // Scaling factors are float for fp32, fp16 and bf16 data (double only for
  // double data, which is not simulated).
  op.alpha = *static_cast<const float*>(call.alpha);
  op.beta = *static_cast<const float*>(call.beta);
  return launch_convolution(kind, op, call.handle->stream);
}

cudnnStatus_t workspace_size(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                             cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo, int algo_count,
                             size_t* bytes) {
  if (!is_live(handle) || bytes == nullptr || algo < 0 || algo >= algo_count) return CUDNN_STATUS_BAD_PARAM;
  ConvOperation op;
  if (const cudnnStatus_t status = describe(x, w, conv, y, &op); status != CUDNN_STATUS_SUCCESS) return status;
  *bytes = kConvWorkspaceBytes;
  return CUDNN_STATUS_SUCCESS;
}

// The one answer of every heuristic and Find call: `algo`, deterministic,
// needing kConvWorkspaceBytes, its time the duration model's.
template <class Perf, class Algo>
cudnnStatus_t choose(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                     cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int requested, int* returned,
                     Perf* results, Algo algo) {
  if (!is_live(handle) || returned == nullptr || results == nullptr || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  ConvOperation op;
  if (const cudnnStatus_t status = describe(x, w, conv, y, &op); status != CUDNN_STATUS_SUCCESS) return status;
  Perf perf{};
  perf.algo = algo;
  perf.status = CUDNN_STATUS_SUCCESS;
  perf.time = 0.001f;  // ms; nothing is timed
  perf.memory = kConvWorkspaceBytes;
  perf.determinism = CUDNN_DETERMINISTIC;
  perf.mathType = static_cast<cudnnMathType_t>(conv->math_type);
  results[0] = perf;
  *returned = 1;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace
}  // namespace vgpusim_dnn

using vgpusim_dnn::ConvKind;

VGPUSIM_CUDNN_API cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                                        const cudnnTensorDescriptor_t x_desc, const void* x,
                                                        const cudnnFilterDescriptor_t w_desc, const void* w,
                                                        const cudnnConvolutionDescriptor_t conv_desc,
                                                        cudnnConvolutionFwdAlgo_t algo, void* workspace,
                                                        size_t workspace_bytes, const void* beta,
                                                        const cudnnTensorDescriptor_t y_desc, void* y) {
  return vgpusim_dnn::convolve(ConvKind::kForward, {handle, alpha, beta, x_desc, x, w_desc, w, conv_desc, y_desc, y,
                                                    algo, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, workspace,
                                                    workspace_bytes});
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                                             const cudnnFilterDescriptor_t w_desc, const void* w,
                                                             const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                                             const cudnnConvolutionDescriptor_t conv_desc,
                                                             cudnnConvolutionBwdDataAlgo_t algo, void* workspace,
                                                             size_t workspace_bytes, const void* beta,
                                                             const cudnnTensorDescriptor_t dx_desc, void* dx) {
  return vgpusim_dnn::convolve(ConvKind::kBackwardData,
                               {handle, alpha, beta, dx_desc, dx, w_desc, w, conv_desc, dy_desc, dy, algo,
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, workspace, workspace_bytes});
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                                               const cudnnTensorDescriptor_t x_desc, const void* x,
                                                               const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                                               const cudnnConvolutionDescriptor_t conv_desc,
                                                               cudnnConvolutionBwdFilterAlgo_t algo, void* workspace,
                                                               size_t workspace_bytes, const void* beta,
                                                               const cudnnFilterDescriptor_t dw_desc, void* dw) {
  return vgpusim_dnn::convolve(ConvKind::kBackwardFilter,
                               {handle, alpha, beta, x_desc, x, dw_desc, dw, conv_desc, dy_desc, dy, algo,
                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, workspace, workspace_bytes});
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
    size_t* bytes) {
  return vgpusim_dnn::workspace_size(handle, x, w, conv, y, algo, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, bytes);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t algo,
    size_t* bytes) {
  return vgpusim_dnn::workspace_size(handle, dx, w, conv, dy, algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, bytes);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t* bytes) {
  return vgpusim_dnn::workspace_size(handle, x, dw, conv, dy, algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, bytes);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int requested, int* returned,
    cudnnConvolutionFwdAlgoPerf_t* results) {
  return vgpusim_dnn::choose(handle, x, w, conv, y, requested, returned, results,
                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int requested, int* returned,
    cudnnConvolutionFwdAlgoPerf_t* results) {
  return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, requested, returned, results);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int requested, int* returned,
    cudnnConvolutionBwdDataAlgoPerf_t* results) {
  return vgpusim_dnn::choose(handle, dx, w, conv, dy, requested, returned, results, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int requested, int* returned,
    cudnnConvolutionBwdDataAlgoPerf_t* results) {
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, requested, returned, results);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int requested, int* returned,
    cudnnConvolutionBwdFilterAlgoPerf_t* results) {
  return vgpusim_dnn::choose(handle, x, dw, conv, dy, requested, returned, results,
                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int requested, int* returned,
    cudnnConvolutionBwdFilterAlgoPerf_t* results) {
  return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, dy, conv, dw, requested, returned, results);
}
