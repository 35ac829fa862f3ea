// The simulated GEMM kernel of one library: registered with the simulated
// driver once per process, launched through the driver API exactly as a real
// cuBLAS kernel is, so an interposer sees each launch and its operands.
#pragma once

#include <cublas_api.h>
#include <cuda.h>

#include <mutex>

#include "gemm_operation.h"

namespace vgpusim_blas {

class GemmKernel {
 public:
  // `name` is the kernel's registered name, unique in the process (each
  // library has its own kernel, so both may be loaded together).
  explicit constexpr GemmKernel(const char* name) : name_(name) {}

  // Registers the kernel and resolves cuLaunchKernel through
  // cuGetProcAddress_v2, as the real library does, the first time; later
  // calls answer the first's result. False when either failed.
  bool prepare();

  // Launches `operation` on `stream` (prepare() must have succeeded).
  // CUBLAS_STATUS_EXECUTION_FAILED when the driver refuses the launch.
  cublasStatus_t launch(const GemmOperation& operation, CUstream stream) const;

 private:
  const char* name_;
  CUfunction function_ = nullptr;
  CUresult (*launch_kernel_)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  std::once_flag prepared_;
  bool ready_ = false;  // written once, under prepared_
};

}  // namespace vgpusim_blas
