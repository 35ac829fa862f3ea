// The activity API's subset. Kernel records come from the simulated driver's
// kernel observer (vgpusim.h): a correlation id at launch, and the kernel's
// start and end on the simulated clock when the simulated device runs it.
// Records wait in a queue until cuptiActivityFlushAll copies them into
// buffers the client hands out, as the real CUPTI's buffer callbacks do.
//
// Kinds: CONCURRENT_KERNEL, KERNEL (both CUpti_ActivityKernel10) and
// EXTERNAL_CORRELATION make records; DRIVER, RUNTIME, MEMCPY, MEMSET,
// SYNCHRONIZATION and OVERHEAD are accepted and make none (a profiler that
// asks for them still starts); every other kind is CUPTI_ERROR_NOT_SUPPORTED.
// As on the H200 (scripts/gpu/probe_cupti.cu, docs/gpu-facts.md), an
// external-correlation record is made for a launch only while DRIVER records
// are enabled: CUPTI makes one beside an API record, and with kernel records
// alone there is none. A subscriber's driver-API callback for the launch is
// called on the launching thread, at API_ENTER and then API_EXIT, with the
// correlation id the kernel's record will carry.
#include <array>
#include <cstring>
#include <mutex>
#include <vector>

#include "cupti_state.h"
#include "vgpusim.h"

namespace vgpusim::cupti {
namespace {

constexpr std::size_t kExternalKinds = 8;  // CUPTI_EXTERNAL_CORRELATION_KIND_INVALID .. CUSTOM2, with room

// The calling thread's external correlation ids, a stack per kind.
thread_local std::array<std::vector<std::uint64_t>, kExternalKinds> t_external_ids;

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

bool kernel_kind_enabled(const State& state) {
  return state.concurrent_kernel.load(std::memory_order_relaxed) || state.kernel.load(std::memory_order_relaxed);
}

bool launch_callbacks_enabled(const State& state) {
  return state.driver_domain.load(std::memory_order_relaxed) || state.launch_callbacks.load(std::memory_order_relaxed) != 0;
}

// The subscriber's driver-API callback for a launch, at both sites, outside the lock.
void call_back_for_launch(State& state, std::uint32_t correlation) {
  CUpti_CallbackFunc callback = nullptr;
  void* user = nullptr;
  {
    std::lock_guard lock(state.mutex);
    if (!state.subscribed) return;
    callback = state.callback;
    user = state.callback_user;
  }
  if (callback == nullptr) return;
  CUpti_CallbackData data{};
  data.functionName = "cuLaunchKernel";
  data.correlationId = correlation;
  data.callbackSite = CUPTI_API_ENTER;
  callback(user, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  data.callbackSite = CUPTI_API_EXIT;
  callback(user, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
}

// On the launching thread: the correlation id, the subscriber's launch
// callbacks, and an external-correlation record for each kind whose stack
// is not empty, where the real CUPTI makes one: beside the launch's API
// record, so only while DRIVER records are enabled.
unsigned int on_launching(void*) {
  State& state = State::get();
  const bool callbacks = launch_callbacks_enabled(state);
  if (!kernel_kind_enabled(state) && !callbacks) return 0;
  const std::uint32_t correlation = state.next_correlation.fetch_add(1, std::memory_order_relaxed);
  if (callbacks) call_back_for_launch(state, correlation);
  if (state.external_correlation.load(std::memory_order_relaxed) && state.driver_records.load(std::memory_order_relaxed)) {
    std::lock_guard lock(state.mutex);
    for (std::size_t kind = 1; kind < kExternalKinds; ++kind) {
      if (t_external_ids[kind].empty()) continue;
      CUpti_ActivityExternalCorrelation record{};
      record.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      record.externalKind = static_cast<CUpti_ExternalCorrelationKind>(kind);
      record.externalId = t_external_ids[kind].back();
      record.correlationId = correlation;
      state.queued.emplace_back(record);
    }
  }
  return correlation;
}

// Under the simulator's lock: only queues the record.
void on_ran(const vgpusimKernelRun* run, void*) {
  State& state = State::get();
  const bool concurrent = state.concurrent_kernel.load(std::memory_order_relaxed);
  if (!concurrent && !state.kernel.load(std::memory_order_relaxed)) return;  // disabled since the launch
  CUpti_ActivityKernel10 record{};
  record.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
  record.start = run->startNs;
  record.end = run->endNs;
  record.completed = run->endNs;
  record.deviceId = static_cast<std::uint32_t>(run->device);
  record.streamId = run->streamId;
  record.correlationId = run->correlationId;
  record.name = run->name;
  std::lock_guard lock(state.mutex);
  state.queued.emplace_back(record);
}

const vgpusimKernelObserver kObserver{&on_launching, &on_ran, nullptr};

CUptiResult set_kind(CUpti_ActivityKind kind, bool on) {
  State& state = State::get();
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      state.concurrent_kernel.store(on);
      if (on) attach_kernel_observer();
      return CUPTI_SUCCESS;
    case CUPTI_ACTIVITY_KIND_KERNEL:
      state.kernel.store(on);
      if (on) attach_kernel_observer();
      return CUPTI_SUCCESS;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      state.external_correlation.store(on);
      return CUPTI_SUCCESS;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      state.driver_records.store(on);
      return CUPTI_SUCCESS;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_MEMCPY:
    case CUPTI_ACTIVITY_KIND_MEMSET:
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return CUPTI_SUCCESS;
    default:
      return CUPTI_ERROR_NOT_SUPPORTED;
  }
}

CUpti_ActivityKind kind_of(const Record& record) {
  return std::visit([](const auto& r) { return r.kind; }, record);
}

}  // namespace

State& State::get() {
  static State* state = new State;  // leaked: a client may flush from its own exit handlers
  return *state;
}

std::uint32_t launch_callback_bit(CUpti_CallbackId id) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: return 1u << 0;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: return 1u << 1;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: return 1u << 2;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: return 1u << 3;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: return 1u << 4;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: return 1u << 5;
    default: return 0;
  }
}

std::size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
  }
}

void attach_kernel_observer() {
  static std::once_flag once;
  std::call_once(once, [] { vgpusimSetKernelObserver(&kObserver); });
}

void reset(State& state) {
  std::lock_guard lock(state.mutex);
  state.concurrent_kernel.store(false);
  state.kernel.store(false);
  state.external_correlation.store(false);
  state.driver_records.store(false);
  state.launch_callbacks.store(0);
  state.driver_domain.store(false);
  state.subscribed = false;
  state.callback = nullptr;
  state.callback_user = nullptr;
  state.request = nullptr;
  state.complete = nullptr;
  state.queued.clear();
  state.dropped = 0;
}

}  // namespace vgpusim::cupti

using namespace vgpusim::cupti;

CUPTI_SIM_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) { return set_kind(kind, true); }
CUPTI_SIM_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) { return set_kind(kind, false); }
// Per-context collection is process-wide here: the simulator runs one clock for all contexts.
CUPTI_SIM_EXPORT CUptiResult cuptiActivityEnableContext(CUcontext, CUpti_ActivityKind kind) {
  return set_kind(kind, true);
}
CUPTI_SIM_EXPORT CUptiResult cuptiActivityDisableContext(CUcontext, CUpti_ActivityKind kind) {
  return set_kind(kind, false);
}

CUPTI_SIM_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                            CUpti_BuffersCallbackCompleteFunc completed) {
  if (requested == nullptr || completed == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& state = State::get();
  std::lock_guard lock(state.mutex);
  state.request = requested;
  state.complete = completed;
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  const auto index = static_cast<std::size_t>(kind);
  if (index == 0 || index >= t_external_ids.size()) return CUPTI_ERROR_INVALID_PARAMETER;
  t_external_ids[index].push_back(id);
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                   uint64_t* last) {
  const auto index = static_cast<std::size_t>(kind);
  if (index == 0 || index >= t_external_ids.size()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (t_external_ids[index].empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last != nullptr) *last = t_external_ids[index].back();
  t_external_ids[index].pop_back();
  return CUPTI_SUCCESS;
}

// Copies every queued record into buffers from the client's request
// callback, and hands each back through the completion callback, outside
// the lock. A buffer too small for the next record ends the flush: what is
// left is dropped and counted.
CUPTI_SIM_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  State& state = State::get();
  std::deque<Record> records;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  {
    std::lock_guard lock(state.mutex);
    records.swap(state.queued);
    request = state.request;
    complete = state.complete;
  }
  std::size_t next = 0;
  while (next < records.size() && request != nullptr) {
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer == nullptr || size < record_size(kind_of(records[next]))) break;
    std::size_t used = 0, written = 0;
    while (next < records.size() && (max_records == 0 || written < max_records)) {
      const std::size_t at = round_up(used, kRecordAlignment);
      const std::size_t bytes = record_size(kind_of(records[next]));
      if (at + bytes > size) break;
      std::visit([&](const auto& r) { std::memcpy(buffer + at, &r, sizeof r); }, records[next]);
      used = at + bytes;
      ++written;
      ++next;
    }
    complete(nullptr, 0, buffer, size, used);
  }
  if (next < records.size()) {
    std::lock_guard lock(state.mutex);
    state.dropped += records.size() - next;
  }
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::size_t at = 0;
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<const std::uint8_t*>(*record);
    const std::size_t bytes = record_size((*record)->kind);
    if (current < buffer || bytes == 0) return CUPTI_ERROR_INVALID_KIND;
    at = round_up(static_cast<std::size_t>(current - buffer) + bytes, kRecordAlignment);
  }
  if (at >= valid_bytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
  return CUPTI_SUCCESS;
}

// Every record dropped since the start (or cuptiFinalize), whatever the context or stream.
CUPTI_SIM_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& state = State::get();
  std::lock_guard lock(state.mutex);
  *dropped = state.dropped;
  return CUPTI_SUCCESS;
}
