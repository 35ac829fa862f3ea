// Streams, events, capture and graphs. The simulator currently executes every
// operation when it is issued, in issue order, so streams are trivially
// ordered and synchronisation returns at once (with the context's sticky
// error, if any). Asynchronous streams with copy/compute engines are the
// next step (docs/simulated-driver.md, "Known differences").
#include "sim.h"

using namespace vgpusim;

namespace {
struct Event {
  double time_ns = 0;
};
CUresult context_status() {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return check_context(sim);
}
}  // namespace

SIM_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  if (CUresult r = context_status()) return r;
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  *stream = reinterpret_cast<CUstream>(new char);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned flags, int) { return cuStreamCreate(stream, flags); }
SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char*>(stream);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuStreamSynchronize(CUstream) { return context_status(); }
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream) { return context_status(); }
SIM_EXPORT CUresult cuStreamQuery(CUstream) { return context_status(); }
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream) { return context_status(); }
SIM_EXPORT CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned) { return context_status(); }
SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream, CUevent, unsigned) { return context_status(); }
SIM_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;  // capture is not simulated yet
  return context_status();
}
SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return cuStreamIsCapturing(stream, status);
}
SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode) { return CUDA_ERROR_NOT_SUPPORTED; }
SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; }
SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; }
SIM_EXPORT CUresult cuLaunchHostFunc(CUstream, CUhostFn fn, void* data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = context_status()) return r;
  fn(data);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventCreate(CUevent* event, unsigned) {
  if (CUresult r = context_status()) return r;
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *event = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<Event*>(event);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  {
    Simulator& sim = Simulator::get();
    std::lock_guard lock(sim.mutex);
    reinterpret_cast<Event*>(event)->time_ns = sim.stats.sim_time_ns;
  }
  return context_status();
}
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) { return cuEventRecord(event, stream); }
SIM_EXPORT CUresult cuEventSynchronize(CUevent event) { return event ? context_status() : CUDA_ERROR_INVALID_HANDLE; }
SIM_EXPORT CUresult cuEventQuery(CUevent event) { return event ? context_status() : CUDA_ERROR_INVALID_HANDLE; }
SIM_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ms = static_cast<float>((reinterpret_cast<Event*>(end)->time_ns - reinterpret_cast<Event*>(start)->time_ns) / 1e6);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime_v2(ms, start, end); }
