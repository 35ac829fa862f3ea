// The simulated device's timeline: streams, implicit synchronisation with the
// legacy default stream, engines, the clock, and lazy execution.
//
// Work is scheduled when it is issued — start = max(host clock, the stream's
// last end, the engine's next idle time, implicit dependencies), end = start +
// duration — so simulated time is deterministic for a given issue order. Its
// effect on memory is applied later, only when the host waits for it (or the
// queue of pending work is full, as a real launch queue fills), in
// (scheduled time, issue order). That makes the simulator adversarial in the
// useful direction: a program that unmaps memory, reuses a buffer or reads a
// result before waiting for the work that uses it sees the fault or the stale
// data every time, not by chance.
//
// Kernels and host functions act at their start; copies and memsets land at
// their end, so a kernel that does not wait for a copy into its input reads
// the old bytes.
#include <algorithm>

#include "sim.h"

namespace vgpusim {
namespace {

// Real launch queues hold about a thousand entries; beyond that the host
// blocks until the device catches up.
constexpr std::size_t kMaxPending = 1024;

// Per-thread default streams, by context.
thread_local std::map<CUcontext, Stream*> t_per_thread_streams;

Stream* per_thread_stream(Simulator& sim, CUcontext context) {
  auto it = t_per_thread_streams.find(context);
  if (it != t_per_thread_streams.end() && sim.streams.count(it->second) != 0) return it->second;
  Stream* stream = create_stream(sim, context, true);
  stream->per_thread = true;
  t_per_thread_streams[context] = stream;
  return stream;
}

// The earliest a new operation on `stream` may start, from the legacy default
// stream's implicit synchronisation: the legacy stream waits for every
// blocking stream of its context, and every blocking stream waits for it.
double implicit_dependencies(Simulator& sim, const Stream& stream) {
  auto it = sim.contexts.find(stream.context);
  if (it == sim.contexts.end()) return 0;
  const Context& context = it->second;
  if (stream.legacy) {
    double latest = 0;
    for (const Stream* other : context.streams) {
      if (other->blocking) latest = std::max(latest, other->tail_ns);
    }
    return latest;
  }
  return stream.blocking && context.legacy_stream ? context.legacy_stream->tail_ns : 0;
}

void execute(Simulator& sim, Pending& work) {
  auto context = sim.contexts.find(work.context);
  // Work of a context that faulted or was destroyed never runs, as on hardware.
  if (context == sim.contexts.end() || context->second.sticky != CUDA_SUCCESS) return;
  if (!work.operation.has_work()) return;
  ++sim.stats.operations_executed;
  if (sim.timeline.enabled && work.operation.engine != Engine::none) {
    record_operation(sim, context->second.device, work);
  }
  if (work.operation.correlation != 0) observe_run(work, context->second.device);
  const CUresult result = perform(work.operation);
  if (result != CUDA_SUCCESS) {
    context->second.sticky = result;
    sim.devices[static_cast<std::size_t>(context->second.device)].faulted = true;
  }
}

// Keeps a node whose work ran for the next issue (up to the queue's bound),
// what its work holds released now, as a freed node's would be.
void recycle(Simulator& sim, decltype(Simulator::pending)::node_type node) {
  if (sim.spare_pending.size() >= kMaxPending) return;
  node.mapped().operation.run = nullptr;
  if (sim.spare_pending.capacity() == 0) sim.spare_pending.reserve(kMaxPending);
  sim.spare_pending.push_back(std::move(node));
}

void run_pending_until(Simulator& sim, double time_ns) {
  while (!sim.pending.empty() && sim.pending.begin()->first.first <= time_ns) {
    auto node = sim.pending.extract(sim.pending.begin());
    execute(sim, node.mapped());
    recycle(sim, std::move(node));
  }
  if (time_ns > sim.executed_until_ns) {
    std::lock_guard timing(sim.timing_mutex);
    sim.executed_until_ns = time_ns;
  }
}

}  // namespace

Stream* create_stream(Simulator& sim, CUcontext context, bool blocking) {
  auto* stream = new Stream;
  stream->context = context;
  stream->blocking = blocking;
  stream->id = sim.next_stream_id++;
  sim.streams.insert(stream);
  sim.contexts.at(context).streams.insert(stream);
  return stream;
}

void destroy_stream(Simulator& sim, Stream* stream) {
  // Work already issued still runs (it is in `pending`, bound to the context).
  sim.streams.erase(stream);
  auto it = sim.contexts.find(stream->context);
  if (it != sim.contexts.end()) it->second.streams.erase(stream);
  delete stream;
}

Stream* resolve_stream(Simulator& sim, CUstream handle, bool per_thread_api, CUresult* error) {
  *error = CUDA_SUCCESS;
  const CUcontext current = current_handle();
  auto context = sim.contexts.find(current);
  if (context == sim.contexts.end()) {
    *error = CUDA_ERROR_INVALID_CONTEXT;
    return nullptr;
  }
  if (handle == CU_STREAM_PER_THREAD || (handle == nullptr && per_thread_api)) return per_thread_stream(sim, current);
  if (handle == nullptr || handle == CU_STREAM_LEGACY) return context->second.legacy_stream;
  auto* stream = reinterpret_cast<Stream*>(handle);
  if (sim.streams.count(stream) == 0) {
    *error = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  return stream;
}

CUresult enqueue(Simulator& sim, Stream* stream, Operation operation) {
  if (Capture* capture = stream->capture) {
    if (capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    capture->operations.push_back(std::move(operation));
    return CUDA_SUCCESS;
  }
  // A blocking stream cannot touch the legacy stream while it captures (and
  // the reverse): the implicit synchronisation would join them.
  if (stream->legacy || stream->blocking) {
    for (Capture* capture : sim.captures) {
      for (Stream* captured : capture->streams) {
        if (captured->context == stream->context && captured->blocking && (stream->legacy || captured->legacy)) {
          capture->invalidated = true;
          return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
      }
    }
  }
  Device& device = sim.devices[static_cast<std::size_t>(sim.contexts.at(stream->context).device)];
  const auto engine = static_cast<std::size_t>(operation.engine);
  const double issued = operation.untimed ? 0.0 : host_now(sim);
  double start = std::max({issued, stream->tail_ns, implicit_dependencies(sim, *stream)});
  if (operation.engine != Engine::none) start = std::max(start, device.engine_free_ns[engine]);
  const double end = start + operation.duration_ns;
  if (operation.engine != Engine::none) {
    device.engine_free_ns[engine] = end;
    device.engine_busy_ns[engine] += operation.duration_ns;
  }
  stream->tail_ns = end;
  sim.last_end_ns = std::max(sim.last_end_ns, end);
  const double acts_at = operation.effect_at_end ? end : start;
  Pending work{stream->context, std::move(operation), start, end, issued, stream->id,
               sim.timeline.enabled ? host_lane(sim) : -1};
  const auto key = std::make_pair(acts_at, sim.next_sequence++);
  if (sim.spare_pending.empty()) {
    sim.pending.emplace(key, std::move(work));
  } else {
    auto node = std::move(sim.spare_pending.back());
    sim.spare_pending.pop_back();
    node.key() = key;
    node.mapped() = std::move(work);
    sim.pending.insert(std::move(node));
  }
  // A full queue makes the host wait for the oldest work, as a real launch does.
  while (sim.pending.size() > kMaxPending) {
    const double oldest = sim.pending.begin()->first.first;
    run_pending_until(sim, oldest);
    advance_host(sim, oldest, HostSpan::device_wait);
  }
  return CUDA_SUCCESS;
}

namespace {
double& thread_clock(const Simulator& sim) {
  thread_local double clock = -1;
  if (clock < 0) clock = sim.latest_host_ns;
  return clock;
}
}  // namespace

double host_now(Simulator& sim) { return thread_clock(sim); }

void advance_host(Simulator& sim, double time_ns, HostSpan why, const char* label) {
  double& clock = thread_clock(sim);
  if (time_ns > clock && sim.timeline.enabled) record_host_span(sim, clock, time_ns, why, label);
  clock = std::max(clock, time_ns);
  sim.latest_host_ns = std::max(sim.latest_host_ns, clock);
}

CUresult wait_until(Simulator& sim, double time_ns, Context* context) {
  run_pending_until(sim, time_ns);
  advance_host(sim, time_ns, HostSpan::device_wait);
  return context ? context->sticky : CUDA_SUCCESS;
}

double context_tail(Simulator&, const Context& context) {
  double latest = 0;
  for (const Stream* stream : context.streams) latest = std::max(latest, stream->tail_ns);
  return latest;
}

CUstreamCaptureMode& thread_capture_mode() {
  thread_local CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  return mode;
}

CUresult check_capture_allows(Simulator& sim, bool context_sync) {
  const CUstreamCaptureMode mine = thread_capture_mode();
  const CUcontext current = current_handle();
  bool forbidden = false;
  for (Capture* capture : sim.captures) {
    const bool own = capture->thread == std::this_thread::get_id();
    const bool applies = context_sync ? capture->origin->context == current
                                      : mine != CU_STREAM_CAPTURE_MODE_RELAXED &&
                                            (capture->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                                             (own && capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED));
    if (applies) {
      capture->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

bool is_pinned_host(Simulator& sim, std::uint64_t address, std::uint64_t bytes) {
  auto it = sim.pinned_ranges.upper_bound(address);
  if (it == sim.pinned_ranges.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second;
}

}  // namespace vgpusim
