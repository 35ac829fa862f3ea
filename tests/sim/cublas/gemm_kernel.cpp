#include "gemm_kernel.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "declared_duration.h"
#include "gemm_duration.h"
#include "vgpusim.h"

namespace vgpusim_blas {
namespace {

#define VGPUSIM_GEMM_SIZE(field) sizeof(GemmOperation::field),
constexpr std::size_t kParameterSizes[] = {VGPUSIM_GEMM_PARAMETERS(VGPUSIM_GEMM_SIZE)};
#undef VGPUSIM_GEMM_SIZE
constexpr unsigned kParameterCount = static_cast<unsigned>(std::size(kParameterSizes));

GemmOperation unpack(void** params) {
  GemmOperation op;
  unsigned index = 0;
#define VGPUSIM_GEMM_UNPACK(field) std::memcpy(&op.field, params[index++], sizeof op.field);
  VGPUSIM_GEMM_PARAMETERS(VGPUSIM_GEMM_UNPACK)
#undef VGPUSIM_GEMM_UNPACK
  return op;
}

float read_device_scalar(CUdeviceptr pointer) {
  float value;
  std::memcpy(&value, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(pointer)), sizeof value);
  return value;
}

// The kernel body: runs when the simulated stream reaches the launch, so in
// device pointer mode alpha and beta are read then, as on a GPU.
void gemm_body(void** params, const vgpusimLaunch*, void*) {
  const GemmOperation op = unpack(params);
  const float alpha = op.alpha_device != 0 ? read_device_scalar(op.alpha_device) : op.alpha;
  const float beta = op.beta_device != 0 ? read_device_scalar(op.beta_device) : op.beta;
  run_gemm(op, alpha, beta);
  if (op.workspace != 0 && op.workspace_bytes != 0) {
    std::memset(reinterpret_cast<void*>(static_cast<std::uintptr_t>(op.workspace)), kWorkspaceScratchByte,
                std::min(op.workspace_bytes, kWorkspaceScratchBytes));
  }
}

double gemm_duration(void** params, const vgpusimLaunch*, void*) {
  const GemmOperation op = unpack(params);
  return op.declared_ns > 0.0 ? op.declared_ns : gemm_duration_ns(op);
}

}  // namespace

bool GemmKernel::prepare() {
  std::call_once(prepared_, [this] {
    vgpusimKernelDesc desc{};
    desc.name = name_;
    desc.body = gemm_body;
    desc.paramCount = kParameterCount;
    desc.paramSizes = kParameterSizes;
    desc.durationFn = gemm_duration;
    if (vgpusimRegisterKernel(&desc, &function_) != CUDA_SUCCESS) return;
    // The real cuBLAS finds its driver entry points this way, so a shim that
    // hooks cuGetProcAddress sees the same request here.
    void* entry = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (cuGetProcAddress_v2("cuLaunchKernel", &entry, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        entry == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) {
      return;
    }
    launch_kernel_ = reinterpret_cast<decltype(launch_kernel_)>(entry);
    ready_ = true;
  });
  return ready_;
}

cublasStatus_t GemmKernel::launch(const GemmOperation& operation, CUstream stream) const {
  GemmOperation copy = operation;  // the argument array points into it until the launch returns
  copy.declared_ns = vgpusim_libs::take_declared_kernel_ns();
  void* arguments[kParameterCount];
  unsigned index = 0;
#define VGPUSIM_GEMM_ARGUMENT(field) arguments[index++] = &copy.field;
  VGPUSIM_GEMM_PARAMETERS(VGPUSIM_GEMM_ARGUMENT)
#undef VGPUSIM_GEMM_ARGUMENT
  // One block of 128 threads: the simulator runs the body once whatever the
  // grid, and the shape is not what an interposer looks at.
  const CUresult result = launch_kernel_(function_, 1, 1, 1, 128, 1, 1, 0, stream, arguments, nullptr);
  return result == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace vgpusim_blas
