// Kernel launches: the hot path. Each hook (counted by its boundary) records
// the launch when tracing, with no lock and no allocation, then forwards. With paging on,
// the argument words are scanned for paged memory first, and everything they
// point into is made resident (and held so) before the launch is enqueued.
#include <atomic>
#include <cstdint>
#include <vector>

#include "interpose/hook_support.h"
#include "shim/log.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

constexpr bool kLegacy = false, kPerThread = true;
constexpr std::size_t kWordsOnStack = 512;  // 4 KiB of parameters; larger ones are scanned into the heap

// Parameters over kWordsOnStack words are scanned into a buffer the thread
// keeps: PyTorch's foreach kernels pass 32 KiB at every launch.
thread_local std::vector<std::uint64_t> t_words;

// A kernel whose parameters the driver cannot describe may touch any paged
// memory of its device: all of it is made resident (or the launch is out of
// memory), and the kernel is counted in the trace's launch audit.
CUresult prepare_unscannable(vmm::Pager& pager, vmm::LaunchArgs::Kernel* kernel, CUfunction f, CUstream stream,
                             bool per_thread, vmm::Access& access, const vmm::Operation& op) {
  if (kernel != nullptr && kernel->unscannable.fetch_add(1, std::memory_order_relaxed) == 0) {
    VGPUMEM_LOG_WARN("the driver cannot describe the parameters of kernel {}: each of its launches makes all paged "
                     "memory of its device resident first",
                     kernel->name);
  } else if (kernel == nullptr) {
    VGPUMEM_LOG_DEBUG("kernel {}: parameters unreadable", static_cast<const void*>(f));
  }
  return pager.prepare_everything(current_device(), stream, per_thread, access, op);
}

// A TMA tensor map among the parameters names memory no word of them does:
// the range each map the shim saw encoded describes is made resident too.
CUresult prepare_tensor_maps(vmm::Pager& pager, const vmm::TensorMaps& maps, const vmm::LaunchArgs::Scan& scan,
                             void** params, void** extra, const std::uint64_t* words, CUstream stream,
                             bool per_thread, vmm::Access& access, const vmm::Operation& op) {
  CUresult result = CUDA_SUCCESS;
  maps.find_in_launch(scan.kernel != nullptr ? &scan.kernel->sizes : nullptr, params, extra, words, scan.count,
                      [&](const vmm::TensorMapRange& range) {
                        if (result == CUDA_SUCCESS) {
                          result = pager.prepare_range(range.address, range.bytes, stream, per_thread, access, op,
                                                       vmm::Pager::Extent::whole);
                        }
                      });
  return result;
}

template <typename Launch>
CUresult paged_launch(HookId id, CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                      Launch&& untimed_launch) {
  Runtime& runtime = Runtime::get();
  if (runtime.tracing()) runtime.trace_launch(api_name(id), f, stream);
  vmm::Pager* pager = runtime.pager();
  if (pager == nullptr) return untimed_launch();
  vmm::Access access;
  // A kernel of a timed step goes with a launch id that CUPTI times it by,
  // when the scheduler asked for that (shim/runtime.h).
  auto launch = [&] { return runtime.timed_launch(access, untimed_launch); };
  std::uint64_t stack_words[kWordsOnStack];
  std::uint64_t* words = stack_words;
  vmm::LaunchArgs::Scan scan = runtime.launch_args().scan(f, params, extra, stack_words, kWordsOnStack);
  if (scan.readable && scan.count > kWordsOnStack) {
    if (t_words.size() < scan.count) t_words.resize(scan.count);
    scan = runtime.launch_args().scan(f, params, extra, t_words.data(), t_words.size());
    words = t_words.data();
  }
  const vmm::Operation op{api_name(id), f};
  if (!scan.readable) {
    if (const CUresult result = prepare_unscannable(*pager, scan.kernel, f, stream, per_thread, access, op)) {
      return result;
    }
    return launch();
  }
  if (const CUresult result = pager->prepare(words, scan.count, stream, per_thread, access, op)) return result;
  if (const CUresult result = prepare_tensor_maps(*pager, runtime.tensor_maps(), scan, params, extra, words, stream,
                                                  per_thread, access, op)) {
    return result;
  }
  if (access.size() == 0 && scan.kernel != nullptr) {
    scan.kernel->without_paged_words.fetch_add(1, std::memory_order_relaxed);
  }
  return launch();
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuLaunchKernel,
                    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params, void** extra),
                    (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)) {
  return paged_launch(HookId::cuLaunchKernel, f, stream, kLegacy, params, extra,
                      [&] { return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });
}

VGPUMEM_HOOK_DEFINE(cuLaunchKernel_ptsz,
                    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params, void** extra),
                    (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)) {
  return paged_launch(HookId::cuLaunchKernel_ptsz, f, stream, kPerThread, params, extra,
                      [&] { return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });
}

VGPUMEM_HOOK_DEFINE(cuLaunchKernelEx,
                    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra),
                    (config, f, params, extra)) {
  return paged_launch(HookId::cuLaunchKernelEx, f, config ? config->hStream : nullptr, kLegacy, params, extra,
                      [&] { return REAL(cuLaunchKernelEx)(config, f, params, extra); });
}

VGPUMEM_HOOK_DEFINE(cuLaunchKernelEx_ptsz,
                    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra),
                    (config, f, params, extra)) {
  return paged_launch(HookId::cuLaunchKernelEx_ptsz, f, config ? config->hStream : nullptr, kPerThread, params, extra,
                      [&] { return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra); });
}

VGPUMEM_HOOK_DEFINE(cuLaunchCooperativeKernel,
                    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params),
                    (f, gx, gy, gz, bx, by, bz, shared, stream, params)) {
  return paged_launch(HookId::cuLaunchCooperativeKernel, f, stream, kLegacy, params, nullptr,
                      [&] { return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params); });
}

VGPUMEM_HOOK_DEFINE(cuLaunchCooperativeKernel_ptsz,
                    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params),
                    (f, gx, gy, gz, bx, by, bz, shared, stream, params)) {
  return paged_launch(HookId::cuLaunchCooperativeKernel_ptsz, f, stream, kPerThread, params, nullptr, [&] {
    return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  });
}

// A graph launch replays kernels the shim never sees one by one.
VGPUMEM_HOOK_DEFINE(cuGraphLaunch, (CUgraphExec graph, CUstream stream), (graph, stream)) {
  Runtime& runtime = Runtime::get();
  if (runtime.tracing()) runtime.trace_launch(api_name(HookId::cuGraphLaunch), graph, stream);
  return REAL(cuGraphLaunch)(graph, stream);
}

VGPUMEM_HOOK_DEFINE(cuGraphLaunch_ptsz, (CUgraphExec graph, CUstream stream), (graph, stream)) {
  Runtime& runtime = Runtime::get();
  if (runtime.tracing()) runtime.trace_launch(api_name(HookId::cuGraphLaunch_ptsz), graph, stream);
  return REAL(cuGraphLaunch_ptsz)(graph, stream);
}
