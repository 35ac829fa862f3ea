// The simulated cuDNN kernels: registered with the simulated driver once per
// process and launched through the driver API exactly as real cuDNN kernels
// are (cuLaunchKernel from cuGetProcAddress_v2), so an interposer sees each
// launch and its operands.
#pragma once

#include <cudnn_graph.h>

#include "conv_operation.h"

namespace vgpusim_dnn {

// Registers the kernels and resolves cuLaunchKernel the first time; later
// calls answer the first's result.
bool prepare_kernels();

// CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER when the driver refuses a launch.
cudnnStatus_t launch_convolution(ConvKind kind, const ConvOperation& operation, CUstream stream);
cudnnStatus_t launch_tensor_operation(TensorKind kind, const TensorOperation& operation, CUstream stream);

}  // namespace vgpusim_dnn
