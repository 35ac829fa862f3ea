// cudnnAddTensor (a bias added to a feature map) and
// cudnnConvolutionBackwardBias (a feature map's gradient summed per channel).
#include "dnn_context.h"
#include "dnn_kernels.h"
#include "dnn_types.h"
#include "legacy_descriptors.h"

namespace vgpusim_dnn {
namespace {

// Copies a descriptor's dims and strides into the kernel's 5 slots (dims
// beyond the descriptor's are 1). False for more than 5 dims.
bool fill(const TensorShape& shape, std::int64_t (&dims)[kMaxTensorOpDims], std::int64_t (&strides)[kMaxTensorOpDims]) {
  if (shape.nb_dims < 1 || shape.nb_dims > kMaxTensorOpDims) return false;
  for (int d = 0; d < kMaxTensorOpDims; ++d) {
    dims[d] = d < shape.nb_dims ? shape.dims[d] : 1;
    strides[d] = d < shape.nb_dims ? shape.strides[d] : 1;
  }
  return true;
}

cudnnStatus_t tensor_call(TensorKind kind, cudnnHandle_t handle, const void* alpha, cudnnTensorDescriptor_t a_desc,
                          const void* a, const void* beta, cudnnTensorDescriptor_t c_desc, void* c) {
  if (!is_live(handle) || alpha == nullptr || beta == nullptr || a_desc == nullptr || c_desc == nullptr ||
      a == nullptr || c == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  TensorOperation op;
  if (a_desc->shape.nb_dims != c_desc->shape.nb_dims) return CUDNN_STATUS_BAD_PARAM;
  if (!fill(a_desc->shape, op.a_dims, op.a_strides) || !fill(c_desc->shape, op.c_dims, op.c_strides)) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  // Add: a is the smaller (broadcast) one; reduce: c is.
  for (int d = 0; d < kMaxTensorOpDims; ++d) {
    const bool fits = kind == TensorKind::kAdd ? (op.a_dims[d] == 1 || op.a_dims[d] == op.c_dims[d])
                                               : (op.c_dims[d] == 1 || op.c_dims[d] == op.a_dims[d]);
    if (!fits) return CUDNN_STATUS_BAD_PARAM;
  }
  if (!is_supported_data_type(a_desc->shape.data_type) || !is_supported_data_type(c_desc->shape.data_type)) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  op.a = reinterpret_cast<CUdeviceptr>(a);
  op.c = reinterpret_cast<CUdeviceptr>(c);
  op.a_type = to_cuda_type(a_desc->shape.data_type);
  op.c_type = to_cuda_type(c_desc->shape.data_type);
  op.alpha = *static_cast<const float*>(alpha);
  op.beta = *static_cast<const float*>(beta);
  return launch_tensor_operation(kind, op, handle->stream);
}

}  // namespace
}  // namespace vgpusim_dnn

VGPUSIM_CUDNN_API cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha,
                                               const cudnnTensorDescriptor_t a_desc, const void* a, const void* beta,
                                               const cudnnTensorDescriptor_t c_desc, void* c) {
  return vgpusim_dnn::tensor_call(vgpusim_dnn::TensorKind::kAdd, handle, alpha, a_desc, a, beta, c_desc, c);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void* alpha,
                                                             const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                                             const void* beta, const cudnnTensorDescriptor_t db_desc,
                                                             void* db) {
  return vgpusim_dnn::tensor_call(vgpusim_dnn::TensorKind::kReduce, handle, alpha, dy_desc, dy, beta, db_desc, db);
}
