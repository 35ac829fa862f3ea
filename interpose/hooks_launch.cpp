// Kernel launches: the hot path. Each hook counts (and, when tracing, records)
// the launch with no lock and no allocation, then forwards. With paging on,
// the argument words are scanned for paged memory first, and everything they
// point into is made resident (and held so) before the launch is enqueued.
#include <atomic>
#include <vector>

#include "interpose/hook_support.h"
#include "shim/log.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

constexpr bool kLegacy = false, kPerThread = true;
constexpr std::size_t kWordsOnStack = 512;  // 4 KiB of parameters; larger ones are scanned into the heap

template <typename Launch>
CUresult paged_launch(HookId id, CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                      Launch&& launch) {
  Runtime& runtime = Runtime::get();
  runtime.on_launch(id, f, stream);
  vmm::Pager* pager = runtime.pager();
  if (pager == nullptr) return launch();
  std::uint64_t stack_words[kWordsOnStack];
  std::uint64_t* words = stack_words;
  std::size_t count = runtime.launch_args().scan(f, params, extra, stack_words, kWordsOnStack);
  std::vector<std::uint64_t> heap_words;
  if (count == vmm::LaunchArgs::kUnknownLayout) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      VGPUMEM_LOG_WARN("the driver cannot describe the parameters of kernel {}: its arguments are not scanned, and "
                       "paged memory it uses may be on the host", static_cast<const void*>(f));
    }
    count = 0;
  } else if (count > kWordsOnStack) {
    heap_words.resize(count);
    runtime.launch_args().scan(f, params, extra, heap_words.data(), count);
    words = heap_words.data();
  }
  vmm::Access access;
  if (const CUresult result = pager->prepare(words, count, stream, per_thread, access)) return result;
  return launch();
}

}  // namespace

extern "C" CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared, CUstream stream,
                                   void** params, void** extra) {
  return paged_launch(HookId::cuLaunchKernel, f, stream, kLegacy, params, extra,
                      [&] { return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });
}

extern "C" CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                        CUstream stream, void** params, void** extra) {
  return paged_launch(HookId::cuLaunchKernel_ptsz, f, stream, kPerThread, params, extra,
                      [&] { return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); });
}

extern "C" CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return paged_launch(HookId::cuLaunchKernelEx, f, config ? config->hStream : nullptr, kLegacy, params, extra,
                      [&] { return REAL(cuLaunchKernelEx)(config, f, params, extra); });
}

extern "C" CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return paged_launch(HookId::cuLaunchKernelEx_ptsz, f, config ? config->hStream : nullptr, kPerThread, params, extra,
                      [&] { return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra); });
}

extern "C" CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                              CUstream stream, void** params) {
  return paged_launch(HookId::cuLaunchCooperativeKernel, f, stream, kLegacy, params, nullptr,
                      [&] { return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params); });
}

extern "C" CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                   unsigned int bx, unsigned int by, unsigned int bz,
                                                   unsigned int shared, CUstream stream, void** params) {
  return paged_launch(HookId::cuLaunchCooperativeKernel_ptsz, f, stream, kPerThread, params, nullptr, [&] {
    return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  });
}

// A graph launch replays kernels the shim never sees one by one.
extern "C" CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) {
  Runtime::get().on_launch(HookId::cuGraphLaunch, graph, stream);
  return REAL(cuGraphLaunch)(graph, stream);
}

extern "C" CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) {
  Runtime::get().on_launch(HookId::cuGraphLaunch_ptsz, graph, stream);
  return REAL(cuGraphLaunch_ptsz)(graph, stream);
}
