// Legacy filter descriptors: K, C/groups, then the spatial dims, packed in
// NCHW (K C R S) or NHWC (K R S C) order.
#include "api_export.h"
#include "dnn_types.h"
#include "legacy_descriptors.h"

VGPUSIM_CUDNN_API cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc) {
  if (desc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *desc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                                           cudnnTensorFormat_t format, int nb_dims,
                                                           const int filter_dim_a[]) {
  if (desc == nullptr || filter_dim_a == nullptr || nb_dims < 3 || nb_dims > vgpusim_dnn::kMaxDims) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) {
    return format == CUDNN_TENSOR_NCHW_VECT_C ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
  }
  for (int d = 0; d < nb_dims; ++d)
    if (filter_dim_a[d] <= 0) return CUDNN_STATUS_BAD_PARAM;
  if (!vgpusim_dnn::is_supported_data_type(type)) return CUDNN_STATUS_NOT_SUPPORTED;
  desc->data_type = type;
  desc->format = format;
  desc->nb_dims = nb_dims;
  for (int d = 0; d < nb_dims; ++d) desc->dims[d] = filter_dim_a[d];
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                                           cudnnTensorFormat_t format, int k, int c, int h, int w) {
  const int dims[4] = {k, c, h, w};
  return cudnnSetFilterNdDescriptor(desc, type, format, 4, dims);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t desc, cudnnDataType_t* type,
                                                           cudnnTensorFormat_t* format, int* k, int* c, int* h,
                                                           int* w) {
  if (desc == nullptr || desc->nb_dims != 4 || type == nullptr || format == nullptr || k == nullptr || c == nullptr ||
      h == nullptr || w == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  *type = static_cast<cudnnDataType_t>(desc->data_type);
  *format = static_cast<cudnnTensorFormat_t>(desc->format);
  *k = static_cast<int>(desc->dims[0]);
  *c = static_cast<int>(desc->dims[1]);
  *h = static_cast<int>(desc->dims[2]);
  *w = static_cast<int>(desc->dims[3]);
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t desc, int requested,
                                                           cudnnDataType_t* type, cudnnTensorFormat_t* format,
                                                           int* nb_dims, int filter_dim_a[]) {
  if (desc == nullptr || desc->nb_dims == 0 || requested < 0 || type == nullptr || format == nullptr ||
      nb_dims == nullptr || (requested > 0 && filter_dim_a == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  *type = static_cast<cudnnDataType_t>(desc->data_type);
  *format = static_cast<cudnnTensorFormat_t>(desc->format);
  *nb_dims = desc->nb_dims;
  for (int d = 0; d < requested && d < desc->nb_dims; ++d) filter_dim_a[d] = static_cast<int>(desc->dims[d]);
  return CUDNN_STATUS_SUCCESS;
}
