#include "conv_geometry.h"

#include "dnn_types.h"

namespace vgpusim_dnn {
namespace {

bool all_positive(int count, const std::int64_t* values) {
  for (int i = 0; i < count; ++i)
    if (values[i] <= 0) return false;
  return true;
}

}  // namespace

void packed_strides(int nb_dims, const std::int64_t* dims, bool channels_last, std::int64_t* strides) {
  // Order of the dims from innermost out: NCHW is the reverse of the dims;
  // channels last puts dim 1 innermost, then the spatial dims, then N.
  int order[kMaxDims];
  int count = 0;
  if (channels_last && nb_dims > 2) {
    order[count++] = 1;
    for (int d = nb_dims - 1; d >= 2; --d) order[count++] = d;
    order[count++] = 0;
  } else {
    for (int d = nb_dims - 1; d >= 0; --d) order[count++] = d;
  }
  std::int64_t stride = 1;
  for (int i = 0; i < count; ++i) {
    strides[order[i]] = stride;
    stride *= dims[order[i]];
  }
}

cudnnStatus_t forward_output_dims(const TensorShape& x, const TensorShape& w, const ConvolutionShape& conv,
                                  std::int64_t (&out)[4]) {
  if (x.nb_dims < 3 || w.nb_dims != x.nb_dims || conv.spatial_dims != x.nb_dims - 2) return CUDNN_STATUS_BAD_PARAM;
  if (conv.spatial_dims != 2) return CUDNN_STATUS_NOT_SUPPORTED;  // 1-d and 3-d convolutions are not simulated
  if (!all_positive(4, x.dims) || !all_positive(4, w.dims)) return CUDNN_STATUS_BAD_PARAM;
  if (!all_positive(2, conv.filter_stride) || !all_positive(2, conv.dilation)) return CUDNN_STATUS_BAD_PARAM;
  for (int axis = 0; axis < 2; ++axis)
    if (conv.pre_padding[axis] < 0 || conv.post_padding[axis] < 0) return CUDNN_STATUS_BAD_PARAM;
  const std::int64_t groups = conv.groups != 0 ? conv.groups : x.dims[1] / w.dims[1];
  if (groups < 1 || x.dims[1] != w.dims[1] * groups || w.dims[0] % groups != 0) return CUDNN_STATUS_BAD_PARAM;
  out[0] = x.dims[0];
  out[1] = w.dims[0];
  for (int axis = 0; axis < 2; ++axis) {
    const std::int64_t window = (w.dims[2 + axis] - 1) * conv.dilation[axis] + 1;
    const std::int64_t padded = x.dims[2 + axis] + conv.pre_padding[axis] + conv.post_padding[axis];
    if (padded < window) return CUDNN_STATUS_BAD_PARAM;
    out[2 + axis] = (padded - window) / conv.filter_stride[axis] + 1;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t describe_convolution(const TensorShape& x, const TensorShape& w, const TensorShape& y,
                                   const ConvolutionShape& conv, ConvOperation* operation) {
  if (x.data_type != w.data_type || x.data_type != y.data_type) return CUDNN_STATUS_BAD_PARAM;
  if (!is_supported_data_type(x.data_type)) return CUDNN_STATUS_NOT_SUPPORTED;
  // fp32 accumulation only (what PyTorch asks for fp16 and bf16 too).
  if (conv.compute_type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  if (conv.mode != CUDNN_CONVOLUTION && conv.mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
  std::int64_t out[4];
  if (const cudnnStatus_t status = forward_output_dims(x, w, conv, out); status != CUDNN_STATUS_SUCCESS) return status;
  if (y.nb_dims != 4) return CUDNN_STATUS_BAD_PARAM;
  for (int d = 0; d < 4; ++d)
    if (y.dims[d] != out[d]) return CUDNN_STATUS_BAD_PARAM;
  if (!all_positive(4, x.strides) || !all_positive(4, w.strides) || !all_positive(4, y.strides)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  ConvOperation& op = *operation;
  for (int d = 0; d < 4; ++d) {
    op.x_dims[d] = x.dims[d];
    op.x_strides[d] = x.strides[d];
    op.w_dims[d] = w.dims[d];
    op.w_strides[d] = w.strides[d];
    op.y_dims[d] = y.dims[d];
    op.y_strides[d] = y.strides[d];
  }
  for (int axis = 0; axis < 2; ++axis) {
    op.pre_padding[axis] = conv.pre_padding[axis];
    op.filter_stride[axis] = conv.filter_stride[axis];
    op.dilation[axis] = conv.dilation[axis];
  }
  op.groups = x.dims[1] / w.dims[1];
  op.data_type = to_cuda_type(x.data_type);
  op.cross_correlation = conv.mode == CUDNN_CROSS_CORRELATION ? 1 : 0;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace vgpusim_dnn
