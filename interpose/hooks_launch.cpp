// Kernel launches: the hot path. Each hook counts (and, when tracing, records)
// the launch with no lock and no allocation, then forwards.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

extern "C" CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared, CUstream stream,
                                   void** params, void** extra) {
  Runtime::get().on_launch(HookId::cuLaunchKernel, f, stream);
  return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

extern "C" CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                        CUstream stream, void** params, void** extra) {
  Runtime::get().on_launch(HookId::cuLaunchKernel_ptsz, f, stream);
  return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

extern "C" CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  Runtime::get().on_launch(HookId::cuLaunchKernelEx, f, config ? config->hStream : nullptr);
  return REAL(cuLaunchKernelEx)(config, f, params, extra);
}

extern "C" CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  Runtime::get().on_launch(HookId::cuLaunchKernelEx_ptsz, f, config ? config->hStream : nullptr);
  return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
}

extern "C" CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                              CUstream stream, void** params) {
  Runtime::get().on_launch(HookId::cuLaunchCooperativeKernel, f, stream);
  return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}

extern "C" CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                   unsigned int bx, unsigned int by, unsigned int bz,
                                                   unsigned int shared, CUstream stream, void** params) {
  Runtime::get().on_launch(HookId::cuLaunchCooperativeKernel_ptsz, f, stream);
  return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shared, stream, params);
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
