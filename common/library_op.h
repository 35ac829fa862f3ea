// What a CUDA library call the shim hooks does, as the scheduler reads it:
// the kernels a call launches are tagged with it (vmm/library_call_scope.h
// carries it from the hook to the access feed; scheduler/ interprets it).
// A convolution's pass says exactly where the backward pass is; the start
// of a forward convolution or a matrix multiply is where a layer starts.
#pragma once

#include <cstdint>

namespace vgpumem {

enum class LibraryOp : std::uint8_t {
  none = 0,              // not inside a hooked library call
  matmul,                // cuBLAS / cuBLASLt GEMM: forward or backward, the call does not say
  conv_forward,          // cuDNN convolution forward (legacy or graph API)
  conv_backward_data,    // the gradient of its input
  conv_backward_filter,  // the gradient of its weights
  conv_backward_bias,    // the gradient of its bias
  other,                 // another hooked call (nothing inferred from it)
};

constexpr const char* library_op_name(LibraryOp op) {
  switch (op) {
    case LibraryOp::none: return "none";
    case LibraryOp::matmul: return "matmul";
    case LibraryOp::conv_forward: return "conv_forward";
    case LibraryOp::conv_backward_data: return "conv_backward_data";
    case LibraryOp::conv_backward_filter: return "conv_backward_filter";
    case LibraryOp::conv_backward_bias: return "conv_backward_bias";
    case LibraryOp::other: return "other";
  }
  return "none";
}

// A pass of the backward phase: only convolutions say so.
constexpr bool is_backward(LibraryOp op) {
  return op == LibraryOp::conv_backward_data || op == LibraryOp::conv_backward_filter ||
         op == LibraryOp::conv_backward_bias;
}

}  // namespace vgpumem
