// One convolution as the simulated kernels receive it, and the tensor
// operations beside it (bias gradient, tensor add). Two-dimensional, every
// tensor described by its logical NCHW dims and its strides in elements, so
// NCHW, NHWC and any other strided layout are one case.
#pragma once

#include <cuda.h>
#include <library_types.h>

#include <cstdint>

namespace vgpusim_dnn {

// Which of the three convolutions a kernel runs; each is its own registered
// kernel (the kind travels as the kernel's user pointer, not as a parameter).
enum class ConvKind : int { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

struct ConvOperation {
  // Device memory. Forward writes y from x and w; backward data writes x
  // (dx) from y (dy) and w; backward filter writes w (dw) from x and y (dy).
  CUdeviceptr x = 0, w = 0, y = 0, workspace = 0;
  std::uint64_t workspace_bytes = 0;
  std::int64_t x_dims[4] = {}, x_strides[4] = {};  // N, C, H, W
  std::int64_t w_dims[4] = {}, w_strides[4] = {};  // K, C / groups, R, S
  std::int64_t y_dims[4] = {}, y_strides[4] = {};  // N, K, P, Q
  std::int64_t pre_padding[2] = {}, filter_stride[2] = {1, 1}, dilation[2] = {1, 1};
  std::int64_t groups = 1;
  std::int32_t data_type = CUDA_R_32F;  // a cudaDataType, the same for x, w and y
  std::int32_t cross_correlation = 1;   // 0: CUDNN_CONVOLUTION (the filter is flipped)
  float alpha = 1.0f, beta = 0.0f;
  double declared_ns = 0.0;  // the caller's declared kernel time (declared_duration.h); 0: the model's
};

// The kernels' parameters, in launch order: each field one parameter, so an
// interposer sees each device pointer as a pointer-sized argument of its own.
// One list registers, packs and unpacks, so they cannot drift apart.
#define VGPUSIM_CONV_PARAMETERS(X)                                                                        \
  X(x) X(w) X(y) X(workspace) X(workspace_bytes) X(x_dims) X(x_strides) X(w_dims) X(w_strides) X(y_dims) \
  X(y_strides) X(pre_padding) X(filter_stride) X(dilation) X(groups) X(data_type) X(cross_correlation)   \
  X(alpha) X(beta) X(declared_ns)

// Tensors of up to 5 dims for the bias gradient and cudnnAddTensor:
//   add:    c = alpha * a + beta * c, a broadcast where its dim is 1;
//   reduce: c = alpha * (sum of a over the dims where c's is 1) + beta * c.
constexpr int kMaxTensorOpDims = 5;
enum class TensorKind : int { kAdd = 0, kReduce = 1 };

struct TensorOperation {
  CUdeviceptr a = 0, c = 0;
  std::int64_t a_dims[kMaxTensorOpDims] = {}, a_strides[kMaxTensorOpDims] = {};
  std::int64_t c_dims[kMaxTensorOpDims] = {}, c_strides[kMaxTensorOpDims] = {};
  std::int32_t a_type = CUDA_R_32F, c_type = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
};

#define VGPUSIM_TENSOR_OP_PARAMETERS(X) \
  X(a) X(c) X(a_dims) X(a_strides) X(c_dims) X(c_strides) X(a_type) X(c_type) X(alpha) X(beta)

// The one algorithm's workspace: real implicit-GEMM and split-K kernels keep
// partial results there, so the kernel writes scratch into all of it and an
// interposer must treat a workspace as written.
constexpr std::uint64_t kConvWorkspaceBytes = 4096;
constexpr unsigned char kWorkspaceScratchByte = 0x5A;

// Run on the host (device pointers are host addresses in the simulator).
// beta == 0 never reads the output. Sums in a fixed order, rounded once.
void run_convolution(ConvKind kind, const ConvOperation& operation);
void run_tensor_operation(TensorKind kind, const TensorOperation& operation);

}  // namespace vgpusim_dnn
