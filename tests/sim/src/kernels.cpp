// Simulated kernels: registration, modules and libraries, parameter layout,
// and launches. A kernel body runs with a fault trap armed: touching device
// memory that is not mapped and accessible becomes CUDA_ERROR_ILLEGAL_ADDRESS,
// sticky for the context, as on hardware (docs/gpu-facts.md).
#include <setjmp.h>
#include <signal.h>

#include <cstring>

#include "sim.h"

namespace vgpusim {
namespace {

thread_local sigjmp_buf* t_trap = nullptr;
thread_local std::uint64_t t_fault_address = 0;
struct sigaction g_previous_segv {}, g_previous_bus {};

void on_fault(int signal, siginfo_t* info, void* context) {
  if (t_trap != nullptr) {
    t_fault_address = reinterpret_cast<std::uint64_t>(info->si_addr);
    siglongjmp(*t_trap, 1);
  }
  // Not ours: hand it to whoever was there before (or die as without us).
  const struct sigaction& previous = signal == SIGSEGV ? g_previous_segv : g_previous_bus;
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_IGN && previous.sa_handler != SIG_DFL) {
    previous.sa_handler(signal);
  } else {
    ::signal(signal, SIG_DFL);  // returning re-executes the access and takes the default action
  }
}

void install_fault_trap() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
    return true;
  }();
  static_cast<void>(installed);
}

// CUfunction and CUkernel are distinct values for one kernel, as on the real
// driver: the CUkernel is the Kernel's address with the low bit set.
Kernel* kernel_of_function(CUfunction f) {
  const auto bits = reinterpret_cast<std::uintptr_t>(f);
  return (bits & 1) ? nullptr : reinterpret_cast<Kernel*>(bits);
}
Kernel* kernel_of_any(const void* handle) {
  return reinterpret_cast<Kernel*>(reinterpret_cast<std::uintptr_t>(handle) & ~std::uintptr_t{1});
}
CUkernel kernel_handle(Kernel* k) { return reinterpret_cast<CUkernel>(reinterpret_cast<std::uintptr_t>(k) | 1); }

bool known(const Simulator& sim, const Kernel* k) {
  for (const auto& owned : sim.kernels) {
    if (owned.get() == k) return true;
  }
  return false;
}

Kernel* find_by_name(Simulator& sim, const char* name) {
  for (const auto& k : sim.kernels) {
    if (name != nullptr && k->name == name) return k.get();
  }
  return nullptr;
}

constexpr std::uintptr_t kModule = 0x5100, kLibrary = 0x5200;

// Runs a kernel body with the fault trap armed (caller holds sim.mutex).
CUresult run_kernel(const Kernel& kernel, void** params, const vgpusimLaunch& launch_info) {
  install_fault_trap();
  sigjmp_buf trap;
  // The mask is not saved: the handler runs with SA_NODEFER and blocks
  // nothing, so jumping out of it leaves the mask as it was, and saving it
  // is a system call on every kernel.
  if (sigsetjmp(trap, 0) == 0) {
    t_trap = &trap;
    kernel.desc.body(params, &launch_info, kernel.desc.user);
    t_trap = nullptr;
    return CUDA_SUCCESS;
  }
  t_trap = nullptr;
  record_illegal_access(Simulator::get(), kernel.name, t_fault_address, launch_info.device);
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

// The launch's argument bytes, packed with the kernel's layout into `call`.
CUresult pack_arguments(const Kernel& kernel, void** params, void** extra, KernelCall* call) {
  call->resize(kernel.arg_bytes);
  unsigned char* packed = call->data();
  if (params == nullptr && extra != nullptr) {
    const char* buffer = nullptr;
    std::size_t size = 0;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<const char*>(e[1]);
      else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(e[1]);
      else return CUDA_ERROR_INVALID_VALUE;
    }
    if (buffer == nullptr || size < kernel.arg_bytes) return CUDA_ERROR_INVALID_VALUE;
    if (kernel.arg_bytes) std::memcpy(packed, buffer, kernel.arg_bytes);
    return CUDA_SUCCESS;
  }
  if (params == nullptr && !kernel.sizes.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < kernel.sizes.size(); ++i) {
    std::memcpy(packed + kernel.offsets[i], params[i], kernel.sizes[i]);
  }
  return CUDA_SUCCESS;
}

// The argument pointers a kernel body (or duration function) is given: into
// the packed bytes, which stay constant like a real kernel's parameter space.
void unpack(const KernelCall& call, void* (&unpacked)[VGPUSIM_MAX_PARAMS]) {
  unsigned char* packed = const_cast<unsigned char*>(call.data());  // the C API takes void**
  for (std::size_t i = 0; i < call.kernel->sizes.size(); ++i) unpacked[i] = packed + call.kernel->offsets[i];
}

}  // namespace

KernelCall& KernelCall::operator=(const KernelCall& other) {
  if (this == &other) return *this;
  kernel = other.kernel;
  info = other.info;
  size = other.size;
  if (size > kInlineBytes) spilled = other.spilled;
  else std::memcpy(inline_bytes, other.inline_bytes, size);
  return *this;
}

void KernelCall::resize(std::size_t bytes) {
  size = bytes;
  if (bytes > kInlineBytes) spilled.assign(bytes, 0);
  else std::memset(inline_bytes, 0, bytes);
}

CUresult perform(const Operation& operation) {
  if (const KernelCall& call = operation.call; call.kernel != nullptr) {
    void* unpacked[VGPUSIM_MAX_PARAMS];
    unpack(call, unpacked);
    return run_kernel(*call.kernel, unpacked, call.info);
  }
  return operation.run ? operation.run() : CUDA_SUCCESS;
}

void record_illegal_access(Simulator& sim, const std::string& what, std::uint64_t address, int device) {
  ++sim.stats.illegal;
  sim.stats.illegal_events.push_back("{\"kernel\":\"" + what + "\",\"address\":" + std::to_string(address) +
                                     ",\"device\":" + std::to_string(device) + "}");
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, CUstream stream_handle, bool per_thread_api, void** params, void** extra) {
  // Before the lock, as a profiler sees the API call before the driver does
  // the launch (and may run client code: the external-id stack).
  const std::uint32_t correlation = observe_launch();
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  Context* context = nullptr;
  if (CUresult r = check_context(sim, &context)) return r;
  const Kernel* kernel = kernel_of_any(f);
  if (f == nullptr || !known(sim, kernel)) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  Operation operation;
  operation.what = "kernel";
  operation.name = kernel->name.c_str();
  operation.engine = Engine::compute;
  operation.call.kernel = kernel;
  operation.call.info = vgpusimLaunch{{gx, gy, gz}, {bx, by, bz}, shared, stream_handle, context->device};
  if (CUresult r = pack_arguments(*kernel, params, extra, &operation.call)) return r;
  if (kernel->desc.durationFn) {
    void* unpacked[VGPUSIM_MAX_PARAMS];
    unpack(operation.call, unpacked);
    operation.duration_ns = kernel->desc.durationFn(unpacked, &operation.call.info, kernel->desc.user);
  } else {
    operation.duration_ns = kernel->desc.durationNs;
  }
  operation.duration_ns *= sim.kernel_time_scale;
  // A captured launch runs only as part of a graph: not observed (see docs/simulated-driver.md).
  if (stream->capture == nullptr) {
    operation.correlation = correlation;
    spend_issue_time(sim, Issue::launch);
  }
  if (CUresult r = enqueue(sim, stream, std::move(operation))) return r;
  ++sim.stats.kernels;
  return CUDA_SUCCESS;
}

}  // namespace vgpusim

using namespace vgpusim;

SIM_EXPORT CUresult vgpusimRegisterKernel(const vgpusimKernelDesc* desc, CUfunction* out) {
  if (desc == nullptr || desc->name == nullptr || desc->body == nullptr || desc->paramCount > VGPUSIM_MAX_PARAMS ||
      (desc->paramCount > 0 && desc->paramSizes == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (find_by_name(sim, desc->name) != nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto kernel = std::make_unique<Kernel>();
  kernel->name = desc->name;
  kernel->desc = *desc;
  kernel->sizes.assign(desc->paramSizes, desc->paramSizes + desc->paramCount);
  // Natural alignment, as nvcc lays out parameters: each at a multiple of its
  // size (capped at 8; non-power-of-two sizes align to 8).
  // A declared alignment (a CUtensorMap's 64) overrides.
  std::size_t offset = 0;
  for (std::size_t i = 0; i < kernel->sizes.size(); ++i) {
    const std::size_t size = kernel->sizes[i];
    std::size_t align = (size >= 8 || (size & (size - 1)) != 0) ? 8 : size;
    if (desc->paramAlignments != nullptr && desc->paramAlignments[i] != 0) align = desc->paramAlignments[i];
    offset = round_up(offset, align ? align : 1);
    kernel->offsets.push_back(offset);
    offset += size;
  }
  kernel->arg_bytes = offset;
  kernel->desc.name = kernel->name.c_str();
  kernel->desc.paramSizes = kernel->sizes.data();
  kernel->desc.paramAlignments = nullptr;  // the caller's array is not kept; the offsets say it
  if (out) *out = reinterpret_cast<CUfunction>(kernel.get());
  sim.kernels.push_back(std::move(kernel));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (std::strcmp(static_cast<const char*>(image), VGPUSIM_MODULE_IMAGE) != 0) return CUDA_ERROR_INVALID_IMAGE;
  *module = reinterpret_cast<CUmodule>(kModule);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  return cuModuleLoadData(module, image);
}
SIM_EXPORT CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
SIM_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (f == nullptr || reinterpret_cast<std::uintptr_t>(module) != kModule) return CUDA_ERROR_INVALID_VALUE;
  Kernel* k = find_by_name(sim, name);
  if (k == nullptr) return CUDA_ERROR_NOT_FOUND;
  *f = reinterpret_cast<CUfunction>(k);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned,
                                      CUlibraryOption*, void**, unsigned) {
  if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (std::strcmp(static_cast<const char*>(code), VGPUSIM_MODULE_IMAGE) != 0) return CUDA_ERROR_INVALID_IMAGE;
  *library = reinterpret_cast<CUlibrary>(kLibrary);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuLibraryUnload(CUlibrary) { return CUDA_SUCCESS; }
SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary library, const char* name) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (k == nullptr || reinterpret_cast<std::uintptr_t>(library) != kLibrary) return CUDA_ERROR_INVALID_VALUE;
  Kernel* kernel = find_by_name(sim, name);
  if (kernel == nullptr) return CUDA_ERROR_NOT_FOUND;
  *k = kernel_handle(kernel);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  if (f == nullptr || k == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *f = reinterpret_cast<CUfunction>(kernel_of_any(k));
  return CUDA_SUCCESS;
}

namespace {
CUresult param_info(Kernel* k, size_t index, size_t* offset, size_t* size) {
  if (k == nullptr || offset == nullptr || size == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  {
    Locked l;  // a driver that cannot describe the kernel (VGPUSIM_FAULTS=paraminfo:N)
    if (l.sim.inject_fault("paraminfo")) return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (index >= k->sizes.size()) return CUDA_ERROR_INVALID_VALUE;  // how callers find the count
  *offset = k->offsets[index];
  *size = k->sizes[index];
  return CUDA_SUCCESS;
}
}  // namespace

// A CUkernel passed where a CUfunction is expected is rejected with
// CUDA_ERROR_INVALID_HANDLE, as the H100's driver does (docs/gpu-facts.md).
SIM_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  return param_info(kernel_of_function(f), index, offset, size);
}
SIM_EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  return param_info(kernel_of_any(k), index, offset, size);
}
SIM_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  Kernel* k = kernel_of_function(f);
  if (name == nullptr || k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuKernelGetName(const char** name, CUkernel k) {
  if (name == nullptr || k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = kernel_of_any(k)->name.c_str();
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction) {
  if (state == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}

#define SIM_LAUNCH(name, per_thread)                                                                          \
  SIM_EXPORT CUresult name(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,     \
                           unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {      \
    Simulator::get().count(#name);                                                                           \
    return launch(f, gx, gy, gz, bx, by, bz, shared, stream, per_thread, params, extra);                     \
  }
SIM_LAUNCH(cuLaunchKernel, false)
SIM_LAUNCH(cuLaunchKernel_ptsz, true)

#define SIM_LAUNCH_EX(name, per_thread)                                                                      \
  SIM_EXPORT CUresult name(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {             \
    Simulator::get().count(#name);                                                                         \
    if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;                                                     \
    return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,      \
                  c->sharedMemBytes, c->hStream, per_thread, params, extra);                               \
  }
SIM_LAUNCH_EX(cuLaunchKernelEx, false)
SIM_LAUNCH_EX(cuLaunchKernelEx_ptsz, true)

#define SIM_LAUNCH_COOP(name, per_thread)                                                                    \
  SIM_EXPORT CUresult name(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,   \
                           unsigned bz, unsigned shared, CUstream stream, void** params) {                  \
    Simulator::get().count(#name);                                                                         \
    return launch(f, gx, gy, gz, bx, by, bz, shared, stream, per_thread, params, nullptr);                 \
  }
SIM_LAUNCH_COOP(cuLaunchCooperativeKernel, false)
SIM_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, true)
