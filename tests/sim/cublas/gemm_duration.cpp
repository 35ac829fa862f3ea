// Where the numbers come from: NVIDIA's H100 Tensor Core GPU datasheet gives
// the SXM5 part's dense (without sparsity) peaks as 989.4 TFLOP/s for fp16 and
// bf16 tensor-core math, 494.7 TFLOP/s for TF32 and 66.9 TFLOP/s for fp32 on
// the CUDA cores. Large cuBLAS GEMMs typically reach 60-80 % of peak; 70 % is
// the model. The 3 µs minimum stands for launch and prologue/epilogue latency
// of a small GEMM (a few microseconds on an H100).
#include "gemm_duration.h"

#include <cublas_api.h>

namespace vgpusim_blas {

double gemm_peak_flops(int type_a, int compute_type) {
  if (type_a == CUDA_R_16F || type_a == CUDA_R_16BF) return kPeakTensor16Flops;
  switch (compute_type) {
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
      return kPeakTensor16Flops;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return kPeakTf32Flops;
    default:
      return kPeakFp32Flops;
  }
}

double gemm_duration_ns(const GemmOperation& op) {
  const double flops = 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k) *
                       static_cast<double>(op.batch);
  return kGemmMinimumNs + flops / (kGemmEfficiency * gemm_peak_flops(op.type_a, op.compute_type)) * 1e9;
}

}  // namespace vgpusim_blas
