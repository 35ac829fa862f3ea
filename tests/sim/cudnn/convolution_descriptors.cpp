// Legacy convolution descriptors: symmetric padding, filter strides,
// dilations, mode, compute type, group count and math type, and the output
// dims they give.
#include "api_export.h"
#include "legacy_descriptors.h"

VGPUSIM_CUDNN_API cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc) {
  if (desc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *desc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int array_length,
                                                                const int pad_a[], const int stride_a[],
                                                                const int dilation_a[], cudnnConvolutionMode_t mode,
                                                                cudnnDataType_t compute_type) {
  if (desc == nullptr || pad_a == nullptr || stride_a == nullptr || dilation_a == nullptr || array_length < 1 ||
      array_length > vgpusim_dnn::kMaxDims - 2) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < array_length; ++i)
    if (pad_a[i] < 0 || stride_a[i] <= 0 || dilation_a[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
  vgpusim_dnn::ConvolutionShape& s = desc->shape;
  s.spatial_dims = array_length;
  for (int i = 0; i < array_length; ++i) {
    s.pre_padding[i] = s.post_padding[i] = pad_a[i];
    s.filter_stride[i] = stride_a[i];
    s.dilation[i] = dilation_a[i];
  }
  s.mode = mode;
  s.compute_type = compute_type;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h,
                                                                int pad_w, int u, int v, int dilation_h,
                                                                int dilation_w, cudnnConvolutionMode_t mode,
                                                                cudnnDataType_t compute_type) {
  const int pads[2] = {pad_h, pad_w}, strides[2] = {u, v}, dilations[2] = {dilation_h, dilation_w};
  return cudnnSetConvolutionNdDescriptor(desc, 2, pads, strides, dilations, mode, compute_type);
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t desc,
                                                                int requested, int* array_length, int pad_a[],
                                                                int stride_a[], int dilation_a[],
                                                                cudnnConvolutionMode_t* mode,
                                                                cudnnDataType_t* compute_type) {
  if (desc == nullptr || desc->shape.spatial_dims == 0 || requested < 0 || array_length == nullptr ||
      mode == nullptr || compute_type == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (requested > 0 && (pad_a == nullptr || stride_a == nullptr || dilation_a == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const vgpusim_dnn::ConvolutionShape& s = desc->shape;
  *array_length = s.spatial_dims;
  for (int i = 0; i < requested && i < s.spatial_dims; ++i) {
    pad_a[i] = static_cast<int>(s.pre_padding[i]);
    stride_a[i] = static_cast<int>(s.filter_stride[i]);
    dilation_a[i] = static_cast<int>(s.dilation[i]);
  }
  *mode = static_cast<cudnnConvolutionMode_t>(s.mode);
  *compute_type = static_cast<cudnnDataType_t>(s.compute_type);
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t desc, int* pad_h,
                                                                int* pad_w, int* u, int* v, int* dilation_h,
                                                                int* dilation_w, cudnnConvolutionMode_t* mode,
                                                                cudnnDataType_t* compute_type) {
  if (desc == nullptr || desc->shape.spatial_dims != 2 || pad_h == nullptr || pad_w == nullptr || u == nullptr ||
      v == nullptr || dilation_h == nullptr || dilation_w == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  int length = 0, pads[2], strides[2], dilations[2];
  const cudnnStatus_t status =
      cudnnGetConvolutionNdDescriptor(desc, 2, &length, pads, strides, dilations, mode, compute_type);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  *pad_h = pads[0];
  *pad_w = pads[1];
  *u = strides[0];
  *v = strides[1];
  *dilation_h = dilations[0];
  *dilation_w = dilations[1];
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups) {
  if (desc == nullptr || groups < 1) return CUDNN_STATUS_BAD_PARAM;
  desc->shape.groups = groups;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int* groups) {
  if (desc == nullptr || groups == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *groups = static_cast<int>(desc->shape.groups);
  return CUDNN_STATUS_SUCCESS;
}

// Kept and read back; the arithmetic is fp32 accumulation whatever the mode.
VGPUSIM_CUDNN_API cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math) {
  if (desc == nullptr || math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
  desc->math_type = math;
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t* math) {
  if (desc == nullptr || math == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *math = static_cast<cudnnMathType_t>(desc->math_type);
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                                      const cudnnTensorDescriptor_t input,
                                                                      const cudnnFilterDescriptor_t filter,
                                                                      int nb_dims, int output_dim_a[]) {
  if (conv == nullptr || input == nullptr || filter == nullptr || output_dim_a == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (nb_dims != input->shape.nb_dims) return CUDNN_STATUS_BAD_PARAM;
  std::int64_t out[4];
  const cudnnStatus_t status =
      vgpusim_dnn::forward_output_dims(input->shape, vgpusim_dnn::filter_shape(*filter), conv->shape, out);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  for (int d = 0; d < 4; ++d) output_dim_a[d] = static_cast<int>(out[d]);
  return CUDNN_STATUS_SUCCESS;
}

VGPUSIM_CUDNN_API cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                                      const cudnnTensorDescriptor_t input,
                                                                      const cudnnFilterDescriptor_t filter, int* n,
                                                                      int* c, int* h, int* w) {
  if (n == nullptr || c == nullptr || h == nullptr || w == nullptr) return CUDNN_STATUS_BAD_PARAM;
  int out[4];
  const cudnnStatus_t status = cudnnGetConvolutionNdForwardOutputDim(conv, input, filter, 4, out);
  if (status != CUDNN_STATUS_SUCCESS) return status;
  *n = out[0];
  *c = out[1];
  *h = out[2];
  *w = out[3];
  return CUDNN_STATUS_SUCCESS;
}
