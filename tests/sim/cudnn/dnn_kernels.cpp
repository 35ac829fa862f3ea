#include "dnn_kernels.h"

#include <cstring>
#include <iterator>
#include <mutex>

#include "declared_duration.h"
#include "dnn_duration.h"
#include "vgpusim.h"

namespace vgpusim_dnn {
namespace {

#define VGPUSIM_FIELD_SIZE(field) sizeof(ConvOperation::field),
constexpr std::size_t kConvSizes[] = {VGPUSIM_CONV_PARAMETERS(VGPUSIM_FIELD_SIZE)};
#undef VGPUSIM_FIELD_SIZE
#define VGPUSIM_FIELD_SIZE(field) sizeof(TensorOperation::field),
constexpr std::size_t kTensorSizes[] = {VGPUSIM_TENSOR_OP_PARAMETERS(VGPUSIM_FIELD_SIZE)};
#undef VGPUSIM_FIELD_SIZE
constexpr unsigned kConvCount = static_cast<unsigned>(std::size(kConvSizes));
constexpr unsigned kTensorCount = static_cast<unsigned>(std::size(kTensorSizes));

#define VGPUSIM_UNPACK(field) std::memcpy(&op.field, params[index++], sizeof op.field);
ConvOperation unpack_conv(void** params) {
  ConvOperation op;
  unsigned index = 0;
  VGPUSIM_CONV_PARAMETERS(VGPUSIM_UNPACK)
  return op;
}
TensorOperation unpack_tensor(void** params) {
  TensorOperation op;
  unsigned index = 0;
  VGPUSIM_TENSOR_OP_PARAMETERS(VGPUSIM_UNPACK)
  return op;
}
#undef VGPUSIM_UNPACK

// The kind rides in the kernel's user pointer: three kernels, one body.
void conv_body(void** params, const vgpusimLaunch*, void* user) {
  run_convolution(static_cast<ConvKind>(reinterpret_cast<std::intptr_t>(user)), unpack_conv(params));
}
double conv_duration(void** params, const vgpusimLaunch*, void*) {
  const ConvOperation op = unpack_conv(params);
  return op.declared_ns > 0.0 ? op.declared_ns : convolution_duration_ns(op);
}
void tensor_body(void** params, const vgpusimLaunch*, void* user) {
  run_tensor_operation(static_cast<TensorKind>(reinterpret_cast<std::intptr_t>(user)), unpack_tensor(params));
}
double tensor_duration(void** params, const vgpusimLaunch*, void*) {
  return tensor_operation_duration_ns(unpack_tensor(params));
}

using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);

struct Kernels {
  CUfunction conv[3] = {};
  CUfunction tensor[2] = {};
  LaunchKernel launch = nullptr;
  bool ready = false;
};

Kernels& kernels() {
  static Kernels k;
  return k;
}

bool register_kernel(const char* name, vgpusimKernelFn body, vgpusimDurationFn duration, const std::size_t* sizes,
                     unsigned count, int kind, CUfunction* out) {
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = count;
  desc.paramSizes = sizes;
  desc.durationFn = duration;
  desc.user = reinterpret_cast<void*>(static_cast<std::intptr_t>(kind));
  return vgpusimRegisterKernel(&desc, out) == CUDA_SUCCESS;
}

cudnnStatus_t launch(CUfunction function, void** arguments, CUstream stream) {
  // One block: the simulator runs the body once whatever the grid, and the
  // shape is not what an interposer looks at.
  const CUresult result = kernels().launch(function, 1, 1, 1, 128, 1, 1, 0, stream, arguments, nullptr);
  return result == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER;
}

}  // namespace

bool prepare_kernels() {
  static std::once_flag prepared;
  std::call_once(prepared, [] {
    Kernels& k = kernels();
    const bool registered =
        register_kernel("vgpusim_cudnn_conv_fprop", conv_body, conv_duration, kConvSizes, kConvCount,
                        static_cast<int>(ConvKind::kForward), &k.conv[0]) &&
        register_kernel("vgpusim_cudnn_conv_dgrad", conv_body, conv_duration, kConvSizes, kConvCount,
                        static_cast<int>(ConvKind::kBackwardData), &k.conv[1]) &&
        register_kernel("vgpusim_cudnn_conv_wgrad", conv_body, conv_duration, kConvSizes, kConvCount,
                        static_cast<int>(ConvKind::kBackwardFilter), &k.conv[2]) &&
        register_kernel("vgpusim_cudnn_add_tensor", tensor_body, tensor_duration, kTensorSizes, kTensorCount,
                        static_cast<int>(TensorKind::kAdd), &k.tensor[0]) &&
        register_kernel("vgpusim_cudnn_bias_grad", tensor_body, tensor_duration, kTensorSizes, kTensorCount,
                        static_cast<int>(TensorKind::kReduce), &k.tensor[1]);
    if (!registered) return;
    // The real cuDNN finds its driver entry points this way, so a shim that
    // hooks cuGetProcAddress sees the same request here.
    void* entry = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (cuGetProcAddress_v2("cuLaunchKernel", &entry, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        entry == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) {
      return;
    }
    k.launch = reinterpret_cast<LaunchKernel>(entry);
    k.ready = true;
  });
  return kernels().ready;
}

cudnnStatus_t launch_convolution(ConvKind kind, const ConvOperation& operation, CUstream stream) {
  ConvOperation copy = operation;  // the argument array points into it until the launch returns
  copy.declared_ns = vgpusim_libs::take_declared_kernel_ns();
  void* arguments[kConvCount];
  unsigned index = 0;
#define VGPUSIM_ARGUMENT(field) arguments[index++] = &copy.field;
  VGPUSIM_CONV_PARAMETERS(VGPUSIM_ARGUMENT)
  return launch(kernels().conv[static_cast<int>(kind)], arguments, stream);
}

cudnnStatus_t launch_tensor_operation(TensorKind kind, const TensorOperation& operation, CUstream stream) {
  TensorOperation copy = operation;
  void* arguments[kTensorCount];
  unsigned index = 0;
  VGPUSIM_TENSOR_OP_PARAMETERS(VGPUSIM_ARGUMENT)
#undef VGPUSIM_ARGUMENT
  return launch(kernels().tensor[static_cast<int>(kind)], arguments, stream);
}

}  // namespace vgpusim_dnn
