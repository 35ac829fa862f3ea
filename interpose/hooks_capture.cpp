// Stream capture: the pager must know when a capture is open, because work
// recorded into a graph runs later, every time the graph is launched, without
// passing through the launch hooks. Memory such work uses is pinned resident
// (vmm/pager.h); these hooks keep the count of open captures that makes the
// launch path look.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

template <typename Begin>
CUresult begin(Begin&& real_begin) {
  const CUresult result = real_begin();
  if (result == CUDA_SUCCESS) {
    if (vmm::Pager* pager = Runtime::get().pager()) pager->capture_began();
  }
  return result;
}

template <typename End>
CUresult end(End&& real_end) {
  const CUresult result = real_end();
  // Ended, or ended in error (an invalidated capture is over too); a stream
  // that was not capturing answers ILLEGAL_STATE and changes nothing.
  if (result != CUDA_ERROR_ILLEGAL_STATE && result != CUDA_ERROR_INVALID_VALUE && result != CUDA_ERROR_INVALID_HANDLE) {
    if (vmm::Pager* pager = Runtime::get().pager()) pager->capture_ended();
  }
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuStreamBeginCapture, (CUstream s), (s)) {
  return begin([&] { return REAL(cuStreamBeginCapture)(s); });
}
VGPUMEM_HOOK_DEFINE(cuStreamBeginCapture_ptsz, (CUstream s), (s)) {
  return begin([&] { return REAL(cuStreamBeginCapture_ptsz)(s); });
}
VGPUMEM_HOOK_DEFINE(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode mode), (s, mode)) {
  return begin([&] { return REAL(cuStreamBeginCapture_v2)(s, mode); });
}
VGPUMEM_HOOK_DEFINE(cuStreamBeginCapture_v2_ptsz, (CUstream s, CUstreamCaptureMode mode), (s, mode)) {
  return begin([&] { return REAL(cuStreamBeginCapture_v2_ptsz)(s, mode); });
}
VGPUMEM_HOOK_DEFINE(cuStreamBeginCaptureToGraph,
                    (CUstream s, CUgraph graph, const CUgraphNode* dependencies, const CUgraphEdgeData* edges, size_t count, CUstreamCaptureMode mode),
                    (s, graph, dependencies, edges, count, mode)) {
  return begin([&] { return REAL(cuStreamBeginCaptureToGraph)(s, graph, dependencies, edges, count, mode); });
}
VGPUMEM_HOOK_DEFINE(cuStreamBeginCaptureToGraph_ptsz,
                    (CUstream s, CUgraph graph, const CUgraphNode* dependencies, const CUgraphEdgeData* edges, size_t count, CUstreamCaptureMode mode),
                    (s, graph, dependencies, edges, count, mode)) {
  return begin([&] { return REAL(cuStreamBeginCaptureToGraph_ptsz)(s, graph, dependencies, edges, count, mode); });
}
VGPUMEM_HOOK_DEFINE(cuStreamEndCapture, (CUstream s, CUgraph* graph), (s, graph)) {
  return end([&] { return REAL(cuStreamEndCapture)(s, graph); });
}
VGPUMEM_HOOK_DEFINE(cuStreamEndCapture_ptsz, (CUstream s, CUgraph* graph), (s, graph)) {
  return end([&] { return REAL(cuStreamEndCapture_ptsz)(s, graph); });
}
