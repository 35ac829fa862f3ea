// What the legacy API's tensor, filter and convolution descriptors hold, and
// their reduction to the shapes conv_geometry.h checks.
#pragma once

#include <cudnn_cnn.h>
#include <cudnn_ops.h>

#include "conv_geometry.h"

// The descriptor types cudnn_ops.h and cudnn_cnn.h declare and leave
// incomplete. A tensor is its shape; nb_dims 0 until set.
struct cudnnTensorStruct {
  vgpusim_dnn::TensorShape shape;
};

struct cudnnFilterStruct {
  int data_type = CUDNN_DATA_FLOAT;
  int format = CUDNN_TENSOR_NCHW;
  int nb_dims = 0;
  std::int64_t dims[vgpusim_dnn::kMaxDims] = {};
};

struct cudnnConvolutionStruct {
  vgpusim_dnn::ConvolutionShape shape{.spatial_dims = 0, .groups = 1};  // groups 1 until set
  int math_type = CUDNN_DEFAULT_MATH;
};

namespace vgpusim_dnn {

// A filter's shape: the format decides the strides (NHWC is K R S C).
inline TensorShape filter_shape(const cudnnFilterStruct& filter) {
  TensorShape shape;
  shape.data_type = filter.data_type;
  shape.nb_dims = filter.nb_dims;
  for (int d = 0; d < filter.nb_dims; ++d) shape.dims[d] = filter.dims[d];
  packed_strides(filter.nb_dims, filter.dims, filter.format == CUDNN_TENSOR_NHWC, shape.strides);
  return shape;
}

}  // namespace vgpusim_dnn
