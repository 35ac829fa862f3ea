// The checks both APIs make on a convolution's tensors, filter and
// descriptor, and the ConvOperation they describe. The legacy descriptors and
// the backend's tensor and convolution descriptors are both reduced to these
// shapes first, so both APIs accept and refuse exactly the same problems.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>

#include "conv_operation.h"

namespace vgpusim_dnn {

constexpr int kMaxDims = 8;  // CUDNN_DIM_MAX

struct TensorShape {
  int data_type = CUDNN_DATA_FLOAT;
  int nb_dims = 0;
  std::int64_t dims[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};  // elements
};

struct ConvolutionShape {
  int spatial_dims = 0;
  std::int64_t pre_padding[kMaxDims] = {}, post_padding[kMaxDims] = {};
  std::int64_t filter_stride[kMaxDims] = {}, dilation[kMaxDims] = {};
  int mode = CUDNN_CROSS_CORRELATION;
  int compute_type = CUDNN_DATA_FLOAT;
  std::int64_t groups = 0;  // 0: implied by x's channels over w's (the backend API)
};

// The forward output's dims (N, K, P, Q) for x, w and conv, or BAD_PARAM when
// they do not fit (non-positive sizes, channels that do not divide into the
// groups, a window larger than the padded input), NOT_SUPPORTED for anything
// but a 2-d convolution.
cudnnStatus_t forward_output_dims(const TensorShape& x, const TensorShape& w, const ConvolutionShape& conv,
                                  std::int64_t (&out)[4]);

// Checks a whole convolution, y included (its dims must be the output's), and
// fills every field of *operation but the pointers, alpha and beta.
// Mismatches are BAD_PARAM; types or shapes not simulated are NOT_SUPPORTED.
cudnnStatus_t describe_convolution(const TensorShape& x, const TensorShape& w, const TensorShape& y,
                                   const ConvolutionShape& conv, ConvOperation* operation);

// Packed strides for `dims` stored in NCHW order, or NHWC (channels last).
void packed_strides(int nb_dims, const std::int64_t* dims, bool channels_last, std::int64_t* strides);

}  // namespace vgpusim_dnn
