// What the cuDNN hooks (hooks_cudnn.cpp, hooks_cudnn_backend.cpp) both ask
// of a call: the bytes of an element of a cuDNN data type, and the stream
// a handle runs on.
#pragma once

#include <cudnn.h>

#include <cstddef>

namespace vgpumem::interpose {

// 0 for the packed and vector types: nothing is claimed about them.
std::size_t cudnn_element_bytes(cudnnDataType_t type);
// The handle's stream, as the library says (the default stream if it cannot).
cudaStream_t cudnn_stream(cudnnHandle_t handle);

}  // namespace vgpumem::interpose
