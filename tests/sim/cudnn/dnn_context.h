// What a simulated cudnnHandle_t holds, and the handles alive now.
#pragma once

#include <cuda.h>
#include <cudnn_graph.h>

#include "api_export.h"
#include "live_handles.h"

// The handle type cudnn_graph.h declares and leaves incomplete.
struct cudnnContext {
  CUstream stream = nullptr;  // cudaStream_t and CUstream are the same type
};

namespace vgpusim_dnn {

vgpusim_blas::LiveHandles<cudnnContext>& live_handles();
inline bool is_live(cudnnHandle_t handle) { return live_handles().contains(handle); }

}  // namespace vgpusim_dnn
