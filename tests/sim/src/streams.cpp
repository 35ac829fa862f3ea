// Streams, events and host functions: the API over the timeline
// (timeline.cpp). Synchronising calls run the pending work they wait for and
// return the context's sticky error, so an illegal access made by a kernel
// surfaces at the next synchronisation, as on the H100 (docs/gpu-facts.md §8.7).
#include "sim.h"

using namespace vgpusim;

namespace {

// Host time a query that finds work unfinished costs: a host polling in a
// loop sees the device make progress.
constexpr double kPollNs = 1000;

CUresult stream_create(CUstream* out, unsigned flags) {
  Locked l;
  if (CUresult r = check_context(l.sim)) return r;
  if (out == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUstream>(create_stream(l.sim, current_handle(), (flags & CU_STREAM_NON_BLOCKING) == 0));
  return CUDA_SUCCESS;
}

CUresult stream_context(CUstream handle, CUcontext* context, bool per_thread_api) {
  Locked l;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  *context = stream->context;
  return CUDA_SUCCESS;
}

CUresult stream_flags(CUstream handle, unsigned* flags, bool per_thread_api) {
  Locked l;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  *flags = stream->blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
  return CUDA_SUCCESS;
}

// The stream a synchronize or query waits on, or the error that forbids it:
// waiting on a capturing stream, or (in a mode that forbids it) on anything
// while some stream captures, ends that capture.
Stream* stream_to_wait_on(Simulator& sim, CUstream handle, bool per_thread_api, Context** context, CUresult* error) {
  if ((*error = check_context(sim, context)) != CUDA_SUCCESS) return nullptr;
  Stream* stream = resolve_stream(sim, handle, per_thread_api, error);
  if (stream == nullptr) return nullptr;
  if (stream->capture != nullptr) {
    stream->capture->invalidated = true;
    *error = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return nullptr;
  }
  if ((*error = check_capture_allows(sim)) != CUDA_SUCCESS) return nullptr;
  return stream;
}

CUresult stream_synchronize(CUstream handle, bool per_thread_api) {
  Locked l;
  Context* context = nullptr;
  CUresult error;
  Stream* stream = stream_to_wait_on(l.sim, handle, per_thread_api, &context, &error);
  if (stream == nullptr) return error;
  return wait_until(l.sim, stream->tail_ns, context);
}

CUresult stream_query(CUstream handle, bool per_thread_api) {
  Locked l;
  Context* context = nullptr;
  CUresult error;
  Stream* stream = stream_to_wait_on(l.sim, handle, per_thread_api, &context, &error);
  if (stream == nullptr) return error;
  if (stream->tail_ns > host_now(l.sim)) {
    advance_host(l.sim, std::min(stream->tail_ns, host_now(l.sim) + kPollNs), HostSpan::poll);
    return CUDA_ERROR_NOT_READY;
  }
  return wait_until(l.sim, stream->tail_ns, context);
}

Event* event_of(Simulator& sim, CUevent handle) {
  auto* event = reinterpret_cast<Event*>(handle);
  return sim.events.count(event) ? event : nullptr;
}

// The stream a record or a wait names, and its event; nullptr and the error
// if either is not valid.
Stream* event_and_stream(Simulator& sim, CUevent event_handle, CUstream stream_handle, bool per_thread_api,
                         Event** event, CUresult* error) {
  if ((*error = check_context(sim)) != CUDA_SUCCESS) return nullptr;
  *event = event_of(sim, event_handle);
  if (*event == nullptr) {
    *error = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  return resolve_stream(sim, stream_handle, per_thread_api, error);
}

CUresult event_record(CUevent handle, CUstream stream_handle, bool per_thread_api) {
  Locked l;
  Event* event = nullptr;
  CUresult error;
  Stream* stream = event_and_stream(l.sim, handle, stream_handle, per_thread_api, &event, &error);
  if (stream == nullptr || event == nullptr) return error;
  // "hEvent and hStream must be from the same context otherwise
  // CUDA_ERROR_INVALID_HANDLE is returned" (cuda.h, cuEventRecord).
  if (event->context != stream->context) return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture != nullptr) {
    if (stream->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    std::lock_guard timing(l.sim.timing_mutex);
    event->capture = stream->capture;
    event->recorded = true;
    return CUDA_SUCCESS;
  }
  // A marker in the stream: complete when everything issued before it is.
  Operation marker;
  marker.what = "event";
  marker.untimed = (event->flags & CU_EVENT_DISABLE_TIMING) != 0;
  spend_issue_time(l.sim, marker.untimed ? Issue::event_record_untimed : Issue::event_record);
  if (CUresult r = enqueue(l.sim, stream, std::move(marker))) return r;
  std::lock_guard timing(l.sim.timing_mutex);
  event->capture = nullptr;
  event->recorded = true;
  event->time_ns = stream->tail_ns;
  return CUDA_SUCCESS;
}

CUresult stream_wait_event(CUstream stream_handle, CUevent event_handle, bool per_thread_api) {
  Locked l;
  Event* event = nullptr;
  CUresult error;
  Stream* stream = event_and_stream(l.sim, event_handle, stream_handle, per_thread_api, &event, &error);
  if (stream == nullptr || event == nullptr) return error;
  if (event->capture != nullptr) {
    // Waiting on an event recorded inside a capture joins that capture.
    Capture* capture = event->capture;
    if (stream->capture != nullptr && stream->capture != capture) return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    if (stream->capture == nullptr) {
      stream->capture = capture;
      capture->streams.push_back(stream);
    }
    return CUDA_SUCCESS;
  }
  spend_issue_time(l.sim, Issue::stream_wait);
  if (event->recorded) stream->tail_ns = std::max(stream->tail_ns, event->time_ns);
  return CUDA_SUCCESS;
}

CUresult launch_host_function(CUstream stream_handle, CUhostFn fn, void* data, bool per_thread_api) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Locked l;
  if (CUresult r = check_context(l.sim)) return r;
  CUresult error;
  Stream* stream = resolve_stream(l.sim, stream_handle, per_thread_api, &error);
  if (stream == nullptr) return error;
  Operation operation;
  operation.what = "host function";
  // Runs on whichever thread waits for it, with the simulator locked: like
  // the real driver's, a host function must not call the CUDA API.
  operation.run = [fn, data] {
    fn(data);
    return CUDA_SUCCESS;
  };
  return enqueue(l.sim, stream, std::move(operation));
}

}  // namespace

// ---- streams ---------------------------------------------------------------------------
SIM_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned flags) { return stream_create(stream, flags); }
SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned flags, int) { return stream_create(stream, flags); }
SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream handle) {
  Locked l;
  auto* stream = reinterpret_cast<Stream*>(handle);
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD || l.sim.streams.count(stream) == 0 ||
      stream->legacy || stream->per_thread) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  destroy_stream(l.sim, stream);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuStreamGetFlags(CUstream s, unsigned* flags) { return stream_flags(s, flags, false); }
SIM_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext* context) { return stream_context(s, context, false); }
SIM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext* context) { return stream_context(s, context, true); }
SIM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned* flags) { return stream_flags(s, flags, true); }
SIM_EXPORT CUresult cuStreamSynchronize(CUstream s) { return stream_synchronize(s, false); }
SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { return stream_synchronize(s, true); }
SIM_EXPORT CUresult cuStreamQuery(CUstream s) { return stream_query(s, false); }
SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) { return stream_query(s, true); }
SIM_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned) { return stream_wait_event(s, e, false); }
SIM_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned) { return stream_wait_event(s, e, true); }
SIM_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) { return launch_host_function(s, fn, data, false); }
SIM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void* data) {
  return launch_host_function(s, fn, data, true);
}

SIM_EXPORT CUresult cuCtxSynchronize() {
  Locked l;
  Context* context = nullptr;
  if (CUresult r = check_context(l.sim, &context)) return r;
  if (CUresult r = check_capture_allows(l.sim, true)) return r;
  return wait_until(l.sim, context_tail(l.sim, *context), context);
}
SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext) { return cuCtxSynchronize(); }

// ---- events ------------------------------------------------------------------------------
SIM_EXPORT CUresult cuEventCreate(CUevent* out, unsigned flags) {
  Locked l;
  if (CUresult r = check_context(l.sim)) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* event = new Event;
  event->context = current_handle();
  event->flags = flags;
  std::lock_guard timing(l.sim.timing_mutex);
  l.sim.events.insert(event);
  *out = reinterpret_cast<CUevent>(event);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventDestroy_v2(CUevent handle) {
  Locked l;
  Event* event = event_of(l.sim, handle);
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard timing(l.sim.timing_mutex);
  l.sim.events.erase(event);
  delete event;
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { return event_record(e, s, false); }
SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return event_record(e, s, true); }
SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned) { return event_record(e, s, false); }
SIM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned) { return event_record(e, s, true); }

namespace {
// The event a synchronize or query waits for; nullptr with `*error` set when
// there is nothing to wait for (an error, or an event never recorded or
// recorded only into a capture: CUDA_SUCCESS).
Event* event_to_wait_for(Simulator& sim, CUevent handle, Context** context, CUresult* error) {
  Event* event = event_of(sim, handle);
  *error = event == nullptr ? CUDA_ERROR_INVALID_HANDLE : check_context(sim, context);
  if (*error == CUDA_SUCCESS) *error = check_capture_allows(sim);
  if (*error != CUDA_SUCCESS || !event->recorded || event->capture != nullptr) return nullptr;
  return event;
}
}  // namespace

SIM_EXPORT CUresult cuEventSynchronize(CUevent handle) {
  Locked l;
  Context* context = nullptr;
  CUresult error;
  Event* event = event_to_wait_for(l.sim, handle, &context, &error);
  if (event == nullptr) return error;
  return wait_until(l.sim, event->time_ns, context);
}
SIM_EXPORT CUresult cuEventQuery(CUevent handle) {
  Locked l;
  Context* context = nullptr;
  CUresult error;
  Event* event = event_to_wait_for(l.sim, handle, &context, &error);
  if (event == nullptr) return error;
  if (event->time_ns > host_now(l.sim)) {
    advance_host(l.sim, std::min(event->time_ns, host_now(l.sim) + kPollNs), HostSpan::poll);
    return CUDA_ERROR_NOT_READY;
  }
  return wait_until(l.sim, event->time_ns, context);
}
// Under the timing lock alone (Simulator::timing_mutex).
SIM_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start_handle, CUevent end_handle) {
  Simulator& sim = Simulator::get();
  std::lock_guard timing(sim.timing_mutex);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Event* start = event_of(sim, start_handle);
  Event* end = event_of(sim, end_handle);
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (start->time_ns > sim.executed_until_ns || end->time_ns > sim.executed_until_ns) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((end->time_ns - start->time_ns) / 1e6);
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime_v2(ms, start, end); }
