#include "layered_libraries.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <cstring>
#include <vector>

// The simulated libraries' own entry points (tests/sim/cublas/declared_duration.h).
extern "C" void vgpusimCublasDeclareNextKernelNs(double ns);
extern "C" void vgpusimCudnnDeclareNextKernelNs(double ns);

namespace layered {
namespace {

bool is_conv(HeavyKind kind) {
  return kind == HeavyKind::conv_forward || kind == HeavyKind::conv_backward_data ||
         kind == HeavyKind::conv_backward_filter;
}

// first * second == total with first <= max_first and second <= max_second,
// the largest such first; false when there is none.
bool split(std::uint64_t total, std::uint64_t max_first, std::uint64_t max_second, std::uint64_t* first,
           std::uint64_t* second) {
  bool found = false;
  const auto consider = [&](std::uint64_t f) {
    const std::uint64_t s = total / f;
    if (f <= max_first && s <= max_second && (!found || f > *first)) {
      *first = f;
      *second = s;
      found = true;
    }
  };
  for (std::uint64_t d = 1; d * d <= total; ++d) {
    if (total % d != 0) continue;
    consider(d);
    consider(total / d);
  }
  return found;
}

struct Prepared {
  HeavyOperation op;
  // cuDNN: 4-d NCHW descriptors, H = W = 1 (x, w, y as the forward names them).
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // cuBLAS: C[m x n] = A[m x 1] * B[1 x n], column-major.
  int m = 0, n = 0;
};

}  // namespace

struct Libraries::State {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  CUdeviceptr workspace = 0;
  std::uint64_t workspace_bytes = 0;
  std::vector<Prepared> calls;
};

bool heavy_kind(const std::string& name, HeavyKind* kind) {
  static const struct {
    const char* prefix;
    HeavyKind kind;
  } kinds[] = {{"conv_fwd_", HeavyKind::conv_forward},       {"conv_dgrad_", HeavyKind::conv_backward_data},
               {"conv_wgrad_", HeavyKind::conv_backward_filter}, {"gemm_fwd_", HeavyKind::gemm_forward},
               {"gemm_dgrad_", HeavyKind::gemm_backward_data},   {"gemm_wgrad_", HeavyKind::gemm_backward_filter}};
  for (const auto& k : kinds) {
    if (name.rfind(k.prefix, 0) == 0) {
      *kind = k.kind;
      return true;
    }
  }
  return false;
}

Libraries::Libraries(std::unique_ptr<State> state) : state_(std::move(state)) {}

Libraries::~Libraries() {
  for (Prepared& p : state_->calls) {
    if (p.x != nullptr) cudnnDestroyTensorDescriptor(p.x);
    if (p.y != nullptr) cudnnDestroyTensorDescriptor(p.y);
    if (p.w != nullptr) cudnnDestroyFilterDescriptor(p.w);
    if (p.conv != nullptr) cudnnDestroyConvolutionDescriptor(p.conv);
  }
  if (state_->dnn != nullptr) cudnnDestroy(state_->dnn);
  if (state_->blas != nullptr) cublasDestroy_v2(state_->blas);
}

std::unique_ptr<Libraries> Libraries::open(CUstream stream, CUdeviceptr workspace, std::uint64_t workspace_bytes,
                                           std::string* why) {
  auto state = std::make_unique<State>();
  state->workspace = workspace;
  state->workspace_bytes = workspace_bytes;
  std::unique_ptr<Libraries> libraries(new Libraries(std::move(state)));
  State& s = *libraries->state_;
  if (const cudnnStatus_t status = cudnnCreate(&s.dnn); status != CUDNN_STATUS_SUCCESS) {
    s.dnn = nullptr;
    *why = std::string("cudnnCreate: ") + cudnnGetErrorString(status);
    return nullptr;
  }
  if (const cublasStatus_t status = cublasCreate_v2(&s.blas); status != CUBLAS_STATUS_SUCCESS) {
    s.blas = nullptr;
    *why = std::string("cublasCreate: ") + cublasGetStatusName(status);
    return nullptr;
  }
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  if (cudnnSetStream(s.dnn, cuda_stream) != CUDNN_STATUS_SUCCESS ||
      cublasSetStream_v2(s.blas, cuda_stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace_v2(s.blas, reinterpret_cast<void*>(workspace), workspace_bytes) != CUBLAS_STATUS_SUCCESS) {
    *why = "setting the libraries' stream or cuBLAS's workspace failed";
    return nullptr;
  }
  return libraries;
}

bool Libraries::prepare(const HeavyOperation& op, int* index, std::string* why) {
  Prepared p;
  p.op = op;
  std::uint64_t first = 0, second = 0;
  // Conv forward: x [N,1], w [K,1], y [N,K]. Backward data: dy [N,1] (a),
  // w [1,C] (b), dx [N,C]. Backward filter: x [1,C] (a), dy [1,K] (b),
  // dw [K,C]: K within b, C within a. GEMM: y [m x n], m within a, n within b.
  const bool filter = op.kind == HeavyKind::conv_backward_filter;
  const bool fits = filter ? split(op.y_words, op.b_words, op.a_words, &first, &second)
                           : split(op.y_words, op.a_words, op.b_words, &first, &second);
  if (!fits || first > (1u << 30) || second > (1u << 30)) {
    *why = "no shape covers an output of " + std::to_string(op.y_words) + " words from inputs of " +
           std::to_string(op.a_words) + " and " + std::to_string(op.b_words);
    return false;
  }
  if (is_conv(op.kind)) {
    int n = 1, c = 1, k = 1;
    switch (op.kind) {
      case HeavyKind::conv_forward: n = static_cast<int>(first), k = static_cast<int>(second); break;
      case HeavyKind::conv_backward_data: n = static_cast<int>(first), c = static_cast<int>(second); break;
      default: k = static_cast<int>(first), c = static_cast<int>(second); break;
    }
    bool ok = cudnnCreateTensorDescriptor(&p.x) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateTensorDescriptor(&p.y) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateFilterDescriptor(&p.w) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateConvolutionDescriptor(&p.conv) == CUDNN_STATUS_SUCCESS;
    ok = ok && cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, 1, 1) == CUDNN_STATUS_SUCCESS &&
         cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, 1, 1) == CUDNN_STATUS_SUCCESS &&
         cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, 1, 1) == CUDNN_STATUS_SUCCESS &&
         cudnnSetConvolution2dDescriptor(p.conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
             CUDNN_STATUS_SUCCESS;
    if (!ok) {
      state_->calls.push_back(p);  // destroyed with the rest
      *why = "cuDNN refused a descriptor";
      return false;
    }
  } else {
    p.m = static_cast<int>(first);
    p.n = static_cast<int>(second);
  }
  state_->calls.push_back(p);
  *index = static_cast<int>(state_->calls.size()) - 1;
  return true;
}

bool Libraries::run(int index, const Operands& operands, std::string* why) {
  const State& s = *state_;
  const Prepared& p = s.calls[static_cast<std::size_t>(index)];
  const HeavyOperation& op = p.op;
  const float alpha = 1.0f, beta = op.accumulate ? 1.0f : 0.0f;
  auto* a = reinterpret_cast<void*>(operands.a);
  auto* b = reinterpret_cast<void*>(operands.b);
  auto* y = reinterpret_cast<void*>(operands.y);
  auto* ws = reinterpret_cast<void*>(s.workspace);
  if (is_conv(op.kind)) {
    vgpusimCudnnDeclareNextKernelNs(op.ns);
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    switch (op.kind) {
      case HeavyKind::conv_forward:
        status = cudnnConvolutionForward(s.dnn, &alpha, p.x, a, p.w, b, p.conv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                         ws, s.workspace_bytes, &beta, p.y, y);
        break;
      case HeavyKind::conv_backward_data:
        status = cudnnConvolutionBackwardData(s.dnn, &alpha, p.w, b, p.y, a, p.conv, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                                              ws, s.workspace_bytes, &beta, p.x, y);
        break;
      default:
        status = cudnnConvolutionBackwardFilter(s.dnn, &alpha, p.x, a, p.y, b, p.conv,
                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws, s.workspace_bytes, &beta, p.w,
                                                y);
        break;
    }
    if (status != CUDNN_STATUS_SUCCESS) *why = cudnnGetErrorString(status);
    return status == CUDNN_STATUS_SUCCESS;
  }
  vgpusimCublasDeclareNextKernelNs(op.ns);
  const cublasStatus_t status =
      cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, p.m, p.n, 1, &alpha, a, CUDA_R_32F, p.m, b, CUDA_R_32F, 1, &beta,
                   y, CUDA_R_32F, p.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) *why = cublasGetStatusName(status);
  return status == CUBLAS_STATUS_SUCCESS;
}

}  // namespace layered
