// How long a simulated cuDNN kernel takes on the simulated clock (the comment
// in dnn_duration.cpp says where the numbers come from).
#pragma once

#include "conv_operation.h"

namespace vgpusim_dnn {

// Fixed cost of any launch: launch latency, prologue and epilogue.
constexpr double kMinimumNs = 4000.0;
// Achieved share of the dense peak: implicit-GEMM convolutions reach about
// 65 % of it on large layers.
constexpr double kConvEfficiency = 0.65;
// H100 SXM5 dense peaks, FLOP/s (NVIDIA H100 Tensor Core GPU datasheet).
constexpr double kPeakTensor16Flops = 989e12;  // fp16 / bf16 tensor cores
constexpr double kPeakFp32Flops = 67e12;       // fp32 CUDA cores
// H100 SXM5 HBM3 bandwidth, 3.35 TB/s, of which elementwise kernels reach ~80 %.
constexpr double kAchievedBytesPerSecond = 0.8 * 3.35e12;

// 2 · (forward output elements) · (C/groups · R · S) flops, the same for all
// three convolutions, at kConvEfficiency of the type's peak, plus kMinimumNs.
double convolution_duration_ns(const ConvOperation& operation);

// Bytes read and written (every element of a and c once, c twice when
// beta != 0) at kAchievedBytesPerSecond, plus kMinimumNs.
double tensor_operation_duration_ns(const TensorOperation& operation);

}  // namespace vgpusim_dnn
