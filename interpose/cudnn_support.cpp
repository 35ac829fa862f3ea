#include "interpose/cudnn_support.h"

#include "interpose/library_call.h"

namespace vgpumem::interpose {

std::size_t cudnn_element_bytes(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2:
      return 1;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
      return 2;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_UINT32:
      return 4;
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
      return 8;
    default:
      return 0;
  }
}

cudaStream_t cudnn_stream(cudnnHandle_t handle) {
  cudaStream_t stream = nullptr;
  if (auto get = NEXT(cudnnGetStream)) get(handle, &stream);
  return stream;
}

}  // namespace vgpumem::interpose
