// The layered trainer's heavy operations as library calls (--libraries):
// each convolution a cuDNN legacy call (cudnnConvolutionForward,
// BackwardData, BackwardFilter), each GEMM a cublasGemmEx, as PyTorch issues
// them, instead of the trainer's own kernels. What changes for vgpumem: it
// sees the calls (library_hooks), so it knows the layers and passes from
// them, and which outputs a call overwrites whole.
//
// The trainer scales every byte size down, so a layer's real shape does not
// fit its buffers. A call's shape is chosen to cover its output buffer
// exactly (so a beta = 0 call overwrites all of it, as the layer's real call
// does) and to read within its inputs, with an inner dimension of 1 so the
// simulated arithmetic costs one multiply per output element; the layer's
// time is declared to the simulated library before the call
// (vgpusim*DeclareNextKernelNs), the same time the trainer's own kernel
// declares. Every operand is fp32, as the trainer's kernels read and write.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

namespace layered {

enum class HeavyKind { conv_forward, conv_backward_data, conv_backward_filter, gemm_forward, gemm_backward_data, gemm_backward_filter };

// The kind of a heavy kernel from the trainer's name for it (conv_fwd_3,
// gemm_wgrad_12, ...); false for any other name.
bool heavy_kind(const std::string& kernel_name, HeavyKind* kind);

// One heavy operation: y (+)= f(a, b) as the trainer's Heavy kernels take
// it. Forward: a = x, b = w, y = the output. Backward data: a = dy, b = w,
// y = dx. Backward filter: a = x, b = dy, y = dw. Sizes in 32-bit words; the
// addresses are given with each call (Operands), as a caching allocator
// may place a layer's tensors elsewhere every step.
struct HeavyOperation {
  HeavyKind kind = HeavyKind::gemm_forward;
  std::uint64_t a_words = 0, b_words = 0, y_words = 0;
  bool accumulate = false;  // beta = 1 (else 0)
  double ns = 0.0;          // the layer's time
};

class Libraries {
 public:
  // Handles on `stream`; `workspace` is the cuDNN workspace and cuBLAS's.
  // False with the reason in `why` when a library is missing or refuses.
  static std::unique_ptr<Libraries> open(CUstream stream, CUdeviceptr workspace, std::uint64_t workspace_bytes,
                                         std::string* why);
  ~Libraries();
  Libraries(const Libraries&) = delete;
  Libraries& operator=(const Libraries&) = delete;

  // Describes `op` once (its descriptors and shape); the index for run().
  // False with the reason when no shape covers y within a's and b's words.
  bool prepare(const HeavyOperation& op, int* index, std::string* why);

  // Issues the prepared call on a, b and y (as HeavyOperation names them);
  // false with the library's status in `why`. Any thread with the context
  // current may call it (the handles are not tied to a thread).
  struct Operands {
    CUdeviceptr a = 0, b = 0, y = 0;
  };
  bool run(int index, const Operands& operands, std::string* why);

 private:
  struct State;
  explicit Libraries(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace layered
