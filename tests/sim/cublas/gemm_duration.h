// How long a simulated GEMM takes on the simulated clock (see the comment in
// gemm_duration.cpp for where the numbers come from).
#pragma once

#include "gemm_operation.h"

namespace vgpusim_blas {

// Fixed cost of any GEMM launch: a kernel of a few tiles still pays launch,
// prologue and epilogue.
constexpr double kGemmMinimumNs = 3000.0;
// Achieved share of the dense peak: large GEMMs reach about 70 % of it.
constexpr double kGemmEfficiency = 0.70;
// H100 SXM5 dense peaks, FLOP/s (NVIDIA H100 Tensor Core GPU datasheet).
constexpr double kPeakTensor16Flops = 989e12;  // fp16 / bf16 tensor cores
constexpr double kPeakTf32Flops = 494e12;      // tf32 tensor cores
constexpr double kPeakFp32Flops = 67e12;       // fp32 CUDA cores

// The peak that applies: fp16/bf16 inputs use the 16-bit tensor cores; fp32
// inputs with a *_FAST_16F/_FAST_16BF/_FAST_TF32 compute type may use tensor
// cores too (16-bit or TF32); plain fp32 runs on the CUDA cores.
double gemm_peak_flops(int type_a, int compute_type);

// 2·m·n·k·batch flops at kGemmEfficiency of the peak, plus kGemmMinimumNs.
double gemm_duration_ns(const GemmOperation& operation);

}  // namespace vgpusim_blas
