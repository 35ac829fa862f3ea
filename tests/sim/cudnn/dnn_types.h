// cuDNN's element types as the shared element code (tests/sim/cublas's
// element_types) knows them.
#pragma once

#include <cudnn_graph.h>
#include <library_types.h>

namespace vgpusim_dnn {

// fp32, fp16 and bf16 are computed; every other cudnnDataType_t is refused.
inline bool is_supported_data_type(int type) {
  return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
}
inline cudaDataType to_cuda_type(int type) {
  return type == CUDNN_DATA_HALF ? CUDA_R_16F : type == CUDNN_DATA_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

}  // namespace vgpusim_dnn
