// Where the numbers come from: NVIDIA's H100 Tensor Core GPU datasheet gives
// the SXM5 part's dense (without sparsity) peaks as 989.4 TFLOP/s for fp16 and
// bf16 tensor-core math and 66.9 TFLOP/s for fp32 on the CUDA cores, and
// 3.35 TB/s of HBM3 bandwidth. cuDNN's implicit-GEMM convolutions on large
// layers typically reach 60-70 % of the math peak (65 % is the model), and
// elementwise kernels about 80 % of the bandwidth. The 4 µs minimum stands
// for launch latency and a small kernel's prologue and epilogue.
#include "dnn_duration.h"

#include "element_types.h"

namespace vgpusim_dnn {

double convolution_duration_ns(const ConvOperation& op) {
  const double outputs = static_cast<double>(op.y_dims[0]) * static_cast<double>(op.y_dims[1]) *
                         static_cast<double>(op.y_dims[2]) * static_cast<double>(op.y_dims[3]);
  const double terms = static_cast<double>(op.w_dims[1]) * static_cast<double>(op.w_dims[2]) *
                       static_cast<double>(op.w_dims[3]);
  const double peak = op.data_type == CUDA_R_32F ? kPeakFp32Flops : kPeakTensor16Flops;
  return kMinimumNs + 2.0 * outputs * terms / (kConvEfficiency * peak) * 1e9;
}

double tensor_operation_duration_ns(const TensorOperation& op) {
  double a_elements = 1.0, c_elements = 1.0;
  for (int d = 0; d < kMaxTensorOpDims; ++d) {
    a_elements *= static_cast<double>(op.a_dims[d]);
    c_elements *= static_cast<double>(op.c_dims[d]);
  }
  const double a_bytes = a_elements * static_cast<double>(vgpusim_blas::element_bytes(static_cast<cudaDataType>(op.a_type)));
  const double c_bytes = c_elements * static_cast<double>(vgpusim_blas::element_bytes(static_cast<cudaDataType>(op.c_type)));
  const double bytes = a_bytes + c_bytes * (op.beta != 0.0f ? 2.0 : 1.0);
  return kMinimumNs + bytes / kAchievedBytesPerSecond * 1e9;
}

}  // namespace vgpusim_dnn
