// Stream capture and graphs. While a stream captures, the work issued to it
// (and to streams that join the capture by waiting on an event recorded in
// it) is recorded instead of run; cuStreamEndCapture turns the record into a
// graph, and cuGraphLaunch issues the graph's work, in capture order, to a
// stream. The capture modes and what invalidates a capture follow the H100
// (docs/gpu-facts.md §8.9); check_capture_allows() in timeline.cpp has the rule.
//
// Not simulated: stream-ordered allocation inside a capture (graph memory
// nodes), graph updates. Graphs built node by node: graph_nodes.cpp.
#include <algorithm>

#include "sim.h"

using namespace vgpusim;

namespace {

void end_capture(Simulator& sim, Capture* capture) {
  for (Stream* stream : capture->streams) {
    if (sim.streams.count(stream)) stream->capture = nullptr;
  }
  for (Event* event : sim.events) {
    if (event->capture == capture) {
      std::lock_guard timing(sim.timing_mutex);
      event->capture = nullptr;
      event->recorded = false;
    }
  }
  sim.captures.erase(std::find(sim.captures.begin(), sim.captures.end(), capture));
  delete capture;
}

CUresult begin_capture(CUstream handle, CUstreamCaptureMode mode, bool per_thread_api) {
  Locked l;
  if (CUresult r = check_context(l.sim)) return r;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult error;
  Stream* stream = resolve_stream(l.sim, handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  if (stream->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
  if (stream->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  auto* capture = new Capture;
  capture->id = l.sim.next_capture_id++;
  capture->origin = stream;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->streams.push_back(stream);
  stream->capture = capture;
  l.sim.captures.push_back(capture);
  return CUDA_SUCCESS;
}

CUresult finish_capture(CUstream handle, CUgraph* out, bool per_thread_api) {
  Locked l;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  Capture* capture = stream->capture;
  if (capture == nullptr || capture->origin != stream) return CUDA_ERROR_ILLEGAL_STATE;
  if (capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED && capture->thread != std::this_thread::get_id()) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  const bool invalidated = capture->invalidated;
  Graph* graph = nullptr;
  if (!invalidated) {
    graph = new Graph{std::move(capture->operations)};
    l.sim.graphs.insert(graph);
  }
  end_capture(l.sim, capture);
  *out = reinterpret_cast<CUgraph>(graph);
  return invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

CUresult capture_status(CUstream handle, CUstreamCaptureStatus* status, cuuint64_t* id, bool per_thread_api) {
  Locked l;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_context(l.sim)) return r;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  const Capture* capture = stream->capture;
  *status = capture == nullptr      ? CU_STREAM_CAPTURE_STATUS_NONE
            : capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                   : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id != nullptr && capture != nullptr) *id = capture->id;
  // Asking the legacy stream while a blocking stream captures is an implicit join.
  if (stream->legacy) {
    for (Capture* active : l.sim.captures) {
      if (active->origin->context == stream->context && active->origin->blocking) {
        active->invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      }
    }
  }
  return CUDA_SUCCESS;
}

CUresult graph_launch(CUgraphExec handle, CUstream stream_handle, bool per_thread_api) {
  Locked l;
  if (CUresult r = check_context(l.sim)) return r;
  auto* exec = reinterpret_cast<Graph*>(handle);
  if (l.sim.graph_execs.count(exec) == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  for (const Operation& operation : exec->operations) {
    if (CUresult r = enqueue(l.sim, stream, operation)) return r;
  }
  return CUDA_SUCCESS;
}

CUresult instantiate(CUgraphExec* out, CUgraph handle) {
  Locked l;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* graph = reinterpret_cast<Graph*>(handle);
  if (l.sim.graphs.count(graph) == 0) return CUDA_ERROR_INVALID_VALUE;
  auto* exec = new Graph{graph->operations};
  l.sim.graph_execs.insert(exec);
  *out = reinterpret_cast<CUgraphExec>(exec);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream s) { return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, false); }
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) { return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, true); }
SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) { return begin_capture(s, mode, false); }
SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return begin_capture(s, mode, true);
}
SIM_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) { return finish_capture(s, graph, false); }
SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* graph) { return finish_capture(s, graph, true); }
SIM_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  return capture_status(s, status, nullptr, false);
}
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) {
  return capture_status(s, status, nullptr, true);
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return capture_status(s, status, id, false);
}
SIM_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return capture_status(s, status, id, true);
}
SIM_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                          *mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(*mode, thread_capture_mode());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  return instantiate(exec, graph);
}
SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  const CUresult r = instantiate(exec, graph);
  if (params != nullptr) params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}
SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return cuGraphInstantiateWithParams(exec, graph, params);
}
SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) { return graph_launch(exec, s, false); }
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) { return graph_launch(exec, s, true); }
SIM_EXPORT CUresult cuGraphDestroy(CUgraph handle) {
  Locked l;
  auto* graph = reinterpret_cast<Graph*>(handle);
  if (l.sim.graphs.erase(graph) == 0) return CUDA_ERROR_INVALID_VALUE;
  for (auto it = l.sim.graph_nodes.begin(); it != l.sim.graph_nodes.end();) {
    if ((*it)->graph != graph) {
      ++it;
      continue;
    }
    delete *it;
    it = l.sim.graph_nodes.erase(it);
  }
  delete graph;
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec handle) {
  Locked l;
  auto* exec = reinterpret_cast<Graph*>(handle);
  if (l.sim.graph_execs.erase(exec) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuGraphGetNodes(CUgraph handle, CUgraphNode* nodes, size_t* count) {
  Locked l;
  auto* graph = reinterpret_cast<Graph*>(handle);
  if (count == nullptr || l.sim.graphs.count(graph) == 0) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr) {
    // Node handles are opaque indices (1-based) into the graph's work.
    for (std::size_t i = 0; i < std::min(*count, graph->operations.size()); ++i) {
      nodes[i] = reinterpret_cast<CUgraphNode>(i + 1);
    }
  }
  *count = graph->operations.size();
  return CUDA_SUCCESS;
}
