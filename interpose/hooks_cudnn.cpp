// cuDNN's convolutions through its legacy API: each call says which pass of
// a convolution it is -- the forward pass, or the backward pass for the
// input, the weights or the bias -- which the scheduler reads layers and
// phases from (common/library_op.h), and its output is overwritten whole
// when beta is zero (its bytes on the host need not come back first). The
// shapes come from the descriptors, asked of the library. The graph API:
// hooks_cudnn_backend.cpp.
#include <cudnn.h>

#include <optional>

#include "interpose/cudnn_support.h"
#include "interpose/library_call.h"
#include "interpose/tensor_operands.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// cuDNN's scaling factors are host values: double for double data, float
// for everything else.
bool beta_is_zero(const void* beta, cudnnDataType_t data) {
  return scalar_is_zero(beta, data == CUDNN_DATA_DOUBLE ? CUDA_R_64F : CUDA_R_32F);
}

TensorOperand tensor(const void* address, cudnnTensorDescriptor_t desc, cudnnDataType_t* type = nullptr) {
  TensorOperand t;
  t.address = reinterpret_cast<std::uint64_t>(address);
  auto get = NEXT(cudnnGetTensorNdDescriptor);
  int dims[TensorOperand::kMaxRank] = {}, strides[TensorOperand::kMaxRank] = {}, rank = 0;
  cudnnDataType_t data = CUDNN_DATA_FLOAT;
  if (desc == nullptr || get == nullptr ||
      get(desc, TensorOperand::kMaxRank, &data, &rank, dims, strides) != CUDNN_STATUS_SUCCESS ||
      rank > TensorOperand::kMaxRank) {
    return t;  // unknown
  }
  t.rank = rank;
  for (int d = 0; d < rank; ++d) {
    t.dims[static_cast<std::size_t>(d)] = dims[d];
    t.strides[static_cast<std::size_t>(d)] = strides[d];
  }
  t.element_bytes = cudnn_element_bytes(data);
  if (type != nullptr) *type = data;
  return t;
}

// A filter is packed in its format: KCRS for NCHW, KRSC for NHWC.
TensorOperand filter(const void* address, cudnnFilterDescriptor_t desc) {
  TensorOperand t;
  t.address = reinterpret_cast<std::uint64_t>(address);
  auto get = NEXT(cudnnGetFilterNdDescriptor);
  int dims[TensorOperand::kMaxRank] = {}, rank = 0;
  cudnnDataType_t data = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  if (desc == nullptr || get == nullptr ||
      get(desc, TensorOperand::kMaxRank, &data, &format, &rank, dims) != CUDNN_STATUS_SUCCESS || rank < 3 ||
      rank > TensorOperand::kMaxRank || format == CUDNN_TENSOR_NCHW_VECT_C) {
    return t;
  }
  t.rank = rank;
  for (int d = 0; d < rank; ++d) t.dims[static_cast<std::size_t>(d)] = dims[d];
  // Memory order, innermost last: K C R S... or K R S... C.
  std::array<int, TensorOperand::kMaxRank> order{};
  for (int d = 0; d < rank; ++d) order[static_cast<std::size_t>(d)] = d;
  if (format == CUDNN_TENSOR_NHWC) {
    for (int d = 1; d < rank - 1; ++d) order[static_cast<std::size_t>(d)] = d + 1;
    order[static_cast<std::size_t>(rank - 1)] = 1;
  }
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(order[static_cast<std::size_t>(i)]);
    t.strides[d] = stride;
    stride *= t.dims[d];
  }
  t.element_bytes = cudnn_element_bytes(data);
  return t;
}

// The written output of a call, if it overwrites it whole.
std::optional<ByteRange> output_written(const TensorOperand& output, cudnnDataType_t data, const void* beta,
                                        std::initializer_list<TensorOperand> inputs) {
  if (LibraryCall::inside_one()) return std::nullopt;
  return overwritten_whole(output, !beta_is_zero(beta, data), inputs);
}

// The same for an output a tensor descriptor describes (its type is the
// call's data type).
std::optional<ByteRange> output_written(void* output, cudnnTensorDescriptor_t desc, const void* beta,
                                        std::initializer_list<TensorOperand> inputs) {
  cudnnDataType_t data = CUDNN_DATA_FLOAT;
  const TensorOperand out = tensor(output, desc, &data);
  return output_written(out, data, beta, inputs);
}

}  // namespace

VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnConvolutionForward(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t yDesc, void* y) {
  return call_library(
      LIBRARY_HOOK(cudnnConvolutionForward), NEXT(cudnnConvolutionForward), CUDNN_STATUS_NOT_INITIALIZED, LibraryOp::conv_forward,
      [&] { return output_written(y, yDesc, beta, {tensor(x, xDesc), filter(w, wDesc)}); },
      [&] { return cudnn_stream(handle); }, handle, alpha, xDesc, x, wDesc, w, convDesc, algo, workSpace,
      workSpaceSizeInBytes, beta, yDesc, y);
}

VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionBwdDataAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return call_library(
      LIBRARY_HOOK(cudnnConvolutionBackwardData), NEXT(cudnnConvolutionBackwardData), CUDNN_STATUS_NOT_INITIALIZED, LibraryOp::conv_backward_data,
      [&] { return output_written(dx, dxDesc, beta, {filter(w, wDesc), tensor(dy, dyDesc)}); },
      [&] { return cudnn_stream(handle); }, handle, alpha, wDesc, w, dyDesc, dy, convDesc, algo, workSpace,
      workSpaceSizeInBytes, beta, dxDesc, dx);
}

VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* dy, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
    const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return call_library(
      LIBRARY_HOOK(cudnnConvolutionBackwardFilter), NEXT(cudnnConvolutionBackwardFilter), CUDNN_STATUS_NOT_INITIALIZED, LibraryOp::conv_backward_filter,
      [&] {
        cudnnDataType_t data = CUDNN_DATA_FLOAT;  // the filter's own type is the image data's
        const TensorOperand image = tensor(x, xDesc, &data);
        return output_written(filter(dw, dwDesc), data, beta, {image, tensor(dy, dyDesc)});
      },
      [&] { return cudnn_stream(handle); }, handle, alpha, xDesc, x, dyDesc, dy, convDesc, algo, workSpace,
      workSpaceSizeInBytes, beta, dwDesc, dw);
}

VGPUMEM_LIBRARY_HOOK cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void* alpha,
                                                                const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                                                const void* beta,
                                                                const cudnnTensorDescriptor_t dbDesc, void* db) {
  return call_library(
      LIBRARY_HOOK(cudnnConvolutionBackwardBias), NEXT(cudnnConvolutionBackwardBias), CUDNN_STATUS_NOT_INITIALIZED, LibraryOp::conv_backward_bias,
      [&] { return output_written(db, dbDesc, beta, {tensor(dy, dyDesc)}); }, [&] { return cudnn_stream(handle); },
      handle, alpha, dyDesc, dy, beta, dbDesc, db);
}
