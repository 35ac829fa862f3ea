// Legacy tensor descriptors: 4-d (NCHW, NHWC or explicit strides) and N-d.
#include "api_export.h"
#include "dnn_types.h"
#include "legacy_descriptors.h"

namespace {

// Dims and strides as cudnnSetTensorNdDescriptor takes them; BAD_PARAM for
// a count outside 3..8 (4-d calls pass 4), non-positive dims or strides.
cudnnStatus_t set_tensor(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int nb_dims, const std::int64_t* dims,
                         const std::int64_t* strides) {
  if (desc == nullptr || nb_dims < 3 || nb_dims > vgpusim_dnn::kMaxDims) return CUDNN_STATUS_BAD_PARAM;
  for (int d = 0; d < nb_dims; ++d)
    if (dims[d] <= 0 || strides[d] <= 0) return CUDNN_STATUS_BAD_PARAM;
  if (!vgpusim_dnn::is_supported_data_type(type)) return CUDNN_STATUS_NOT_SUPPORTED;
  vgpusim_dnn::TensorShape& shape = desc->shape;
  shape = {};
  shape.data_type = type;
  shape.nb_dims = nb_dims;
  for (int d = 0; d < nb_dims; ++d) {
    shape.dims[d] = dims[d];
    shape.strides[d] = strides[d];
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

VGPUSIM_CUDNN_API cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc) {
  if (desc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *desc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
  delete desc;  // NULL is allowed, as in cuDNN
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                                           cudnnDataType_t type, int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) {
    return format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
  }
  const std::int64_t dims[4] = {n, c, h, w};
  for (std::int64_t dim : dims)
    if (dim <= 0) return CUDNN_STATUS_BAD_PARAM;
  std::int64_t strides[4];
  vgpusim_dnn::packed_strides(4, dims, format == CUDNN_TENSOR_NHWC, strides);
  return set_tensor(desc, type, 4, dims, strides);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t desc, cudnnDataType_t type,
                                                             int n, int c, int h, int w, int n_stride, int c_stride,
                                                             int h_stride, int w_stride) {
  const std::int64_t dims[4] = {n, c, h, w}, strides[4] = {n_stride, c_stride, h_stride, w_stride};
  return set_tensor(desc, type, 4, dims, strides);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type,
                                                           int nb_dims, const int dim_a[], const int stride_a[]) {
  if (dim_a == nullptr || stride_a == nullptr || nb_dims < 3 || nb_dims > vgpusim_dnn::kMaxDims) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  std::int64_t dims[vgpusim_dnn::kMaxDims], strides[vgpusim_dnn::kMaxDims];
  for (int d = 0; d < nb_dims; ++d) {
    dims[d] = dim_a[d];
    strides[d] = stride_a[d];
  }
  return set_tensor(desc, type, nb_dims, dims, strides);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t desc, cudnnDataType_t* type,
                                                           int* n, int* c, int* h, int* w, int* n_stride,
                                                           int* c_stride, int* h_stride, int* w_stride) {
  if (desc == nullptr || desc->shape.nb_dims != 4) return CUDNN_STATUS_BAD_PARAM;
  if (type == nullptr || n == nullptr || c == nullptr || h == nullptr || w == nullptr || n_stride == nullptr ||
      c_stride == nullptr || h_stride == nullptr || w_stride == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const vgpusim_dnn::TensorShape& s = desc->shape;
  *type = static_cast<cudnnDataType_t>(s.data_type);
  int* dims[4] = {n, c, h, w};
  int* strides[4] = {n_stride, c_stride, h_stride, w_stride};
  for (int d = 0; d < 4; ++d) {
    *dims[d] = static_cast<int>(s.dims[d]);
    *strides[d] = static_cast<int>(s.strides[d]);
  }
  return CUDNN_STATUS_SUCCESS;
}

// As cuDNN: *nb_dims is the descriptor's count; min(requested, that) dims
// and strides are written.
VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t desc, int requested,
                                                           cudnnDataType_t* type, int* nb_dims, int dim_a[],
                                                           int stride_a[]) {
  if (desc == nullptr || desc->shape.nb_dims == 0 || requested < 0 || type == nullptr || nb_dims == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (requested > 0 && (dim_a == nullptr || stride_a == nullptr)) return CUDNN_STATUS_BAD_PARAM;
  const vgpusim_dnn::TensorShape& s = desc->shape;
  *type = static_cast<cudnnDataType_t>(s.data_type);
  *nb_dims = s.nb_dims;
  for (int d = 0; d < requested && d < s.nb_dims; ++d) {
    dim_a[d] = static_cast<int>(s.dims[d]);
    stride_a[d] = static_cast<int>(s.strides[d]);
  }
  return CUDNN_STATUS_SUCCESS;
}
