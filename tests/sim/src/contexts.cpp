// Contexts: the primary context of each device and regular ones
// (cuCtxCreate), the per-thread context stack. Each context has its own
// legacy default stream and sticky error. As on the H100, an illegal access
// ends the device for the process: no context can be retained or created on
// it afterwards, and resetting the primary context does not recover it
// (docs/gpu-facts.md §8.7).
#include <algorithm>

#include "sim.h"

using namespace vgpusim;

namespace vgpusim {
CUcontext create_context(Simulator& sim, int device, bool primary) {
  auto* handle = reinterpret_cast<CUcontext>(new char);  // a unique address is the handle
  Context& context = sim.contexts[handle];
  context.device = device;
  context.primary = primary;
  context.legacy_stream = create_stream(sim, handle, true);
  context.legacy_stream->legacy = true;
  return handle;
}
}  // namespace vgpusim

namespace {

CUresult check_device(Simulator& sim, CUdevice device) {
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= static_cast<int>(sim.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (sim.devices[static_cast<std::size_t>(device)].faulted) return CUDA_ERROR_ILLEGAL_ADDRESS;
  return CUDA_SUCCESS;
}

CUresult create(CUcontext* out, CUdevice device) {
  Locked l;
  l.sim.count("cuCtxCreate");
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_device(l.sim, device)) return r;
  *out = create_context(l.sim, device, false);
  context_stack().push_back(*out);  // a new context becomes current
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  Locked l;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_device(l.sim, device)) return r;
  *context = l.sim.primary[static_cast<std::size_t>(device)];
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }

// Succeeds but does not recover a context after an illegal access: on the
// H100 every later call still returns 700 (docs/gpu-facts.md §8.7).
SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  Locked l;
  if (device < 0 || device >= static_cast<int>(l.sim.primary.size())) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* out, unsigned, CUdevice device) { return create(out, device); }
SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext* out, CUexecAffinityParam*, int, unsigned, CUdevice device) {
  return create(out, device);
}
SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* out, CUctxCreateParams*, unsigned, CUdevice device) {
  return create(out, device);
}

// Waits for the context's work, frees what was allocated in it and removes it
// from every thread's view (the calling thread's stack included).
SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext handle) {
  Locked l;
  l.sim.count("cuCtxDestroy_v2");
  auto it = l.sim.contexts.find(handle);
  if (it == l.sim.contexts.end() || it->second.primary) return CUDA_ERROR_INVALID_CONTEXT;
  wait_until(l.sim, context_tail(l.sim, it->second), nullptr);
  std::vector<std::uint64_t> owned;
  for (const auto& [base, region] : l.sim.regions) {
    if (region.context == handle && region.kind != Region::Kind::reservation) owned.push_back(base);
  }
  for (std::uint64_t base : owned) release_region(l.sim, base);
  for (Stream* stream : std::vector<Stream*>(it->second.streams.begin(), it->second.streams.end())) {
    destroy_stream(l.sim, stream);
  }
  l.sim.contexts.erase(it);
  auto& stack = context_stack();
  stack.erase(std::remove(stack.begin(), stack.end(), handle), stack.end());
  delete reinterpret_cast<char*>(handle);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext handle) {
  Locked l;
  if (l.sim.contexts.count(handle) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  context_stack().push_back(handle);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* out) {
  auto& stack = context_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (out != nullptr) *out = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext handle) {
  Locked l;
  if (!l.sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  auto& stack = context_stack();
  if (handle == nullptr) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (l.sim.contexts.count(handle) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty()) stack.push_back(handle);
  else stack.back() = handle;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = current_handle();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  Locked l;
  if (!l.sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* context = current_context(l.sim);
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = context->device;
  return CUDA_SUCCESS;
}
