#include "cupti/kernel_times.h"

#include <vector>

#include "common/log.h"

namespace vgpumem::cupti {
namespace {

// CUPTI's buffer callbacks carry no user pointer: they reach the one
// instance that holds CUPTI through this.
std::atomic<KernelTimes*> g_holder{nullptr};

// The launch id begin() noted on this thread, until end(); 0: none.
thread_local std::uint64_t t_launch_id = 0;

// Every driver entry point that launches a kernel (the shim forwards each).
constexpr CUpti_CallbackId kLaunchCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

}  // namespace

std::string_view to_string(TimerState state) {
  switch (state) {
    case TimerState::not_started: return "not started";
    case TimerState::active: return "active";
    case TimerState::absent: return "absent";
    case TimerState::taken: return "taken";
    case TimerState::stepped_aside: return "stepped aside";
  }
  return "unknown";
}

KernelTimes::KernelTimes(KernelTimesOptions options) : options_(std::move(options)) {}

KernelTimes::~KernelTimes() {
  step_aside();
  KernelTimes* self = this;
  g_holder.compare_exchange_strong(self, nullptr);
}

TimerState KernelTimes::start() {
  std::lock_guard lock(control_);
  if (state() != TimerState::not_started) return state();
  if (options_.lookup == nullptr || !load_cupti(cupti_candidates(options_.library_path, options_.search_default_names), options_.lookup, &cupti_,
                                             &absent_reason_)) {
    if (options_.lookup == nullptr) absent_reason_ = "no symbol look-up given";
    VGPUMEM_LOG_INFO("CUPTI unavailable ({}): kernel durations come from timed events", absent_reason_);
    state_.store(TimerState::absent, std::memory_order_release);
    return TimerState::absent;
  }
  KernelTimes* nobody = nullptr;
  const CUptiResult subscribed = g_holder.load() == nullptr
                                     ? cupti_.subscribe(&subscriber_, &KernelTimes::on_launch, this)
                                     : CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (subscribed != CUPTI_SUCCESS && subscribed != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // The library loaded but refuses to work (no support for this driver or
    // GPU, no profiling privileges, ...): no profiler holds it, so saying
    // "taken" would send whoever reads the log looking for one.
    absent_reason_ = "libcupti could not be used: cuptiSubscribe failed with " + describe_result(cupti_, subscribed);
    VGPUMEM_LOG_INFO("CUPTI unavailable ({}): kernel durations come from timed events", absent_reason_);
    state_.store(TimerState::absent, std::memory_order_release);
    return TimerState::absent;
  }
  if (subscribed != CUPTI_SUCCESS || !g_holder.compare_exchange_strong(nobody, this)) {
    if (subscribed == CUPTI_SUCCESS) cupti_.unsubscribe(subscriber_);
    VGPUMEM_LOG_INFO("CUPTI is held by another subscriber (a profiler, or another vgpumem timer): kernel "
                     "durations come from timed events");
    state_.store(TimerState::taken, std::memory_order_release);
    return TimerState::taken;
  }
  buffers_ = std::make_unique<ActivityBuffers>(options_.buffer_count, options_.buffer_bytes);
  const bool enabled = cupti_.register_callbacks(&buffer_requested, &buffer_completed) == CUPTI_SUCCESS &&
                       enable_launch_callbacks(true) &&
                       cupti_.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
  if (!enabled) {
    stop_collecting();
    absent_reason_ = "CUPTI refused kernel activity";
    VGPUMEM_LOG_INFO("CUPTI refused kernel activity records: kernel durations come from timed events");
    state_.store(TimerState::absent, std::memory_order_release);
    return TimerState::absent;
  }
  state_.store(TimerState::active, std::memory_order_release);
  VGPUMEM_LOG_DEBUG("kernel durations from CUPTI activity records");
  return TimerState::active;
}

bool KernelTimes::enable_launch_callbacks(bool on) {
  bool all = true;
  for (CUpti_CallbackId id : kLaunchCallbacks) {
    all = cupti_.enable_callback(on ? 1 : 0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS && all;
  }
  return all;
}

void KernelTimes::begin(std::uint64_t external_id) noexcept {
  if (state() == TimerState::active) t_launch_id = external_id;
}

void KernelTimes::end() noexcept { t_launch_id = 0; }

// On the launching thread, inside the driver's launch: a launch begin()
// named is paired with the correlation id its kernel record will carry.
// Every other launch returns at once.
void CUPTIAPI KernelTimes::on_launch(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  const std::uint64_t launch_id = t_launch_id;
  if (launch_id == 0 || domain != CUPTI_CB_DOMAIN_DRIVER_API || user == nullptr || data == nullptr) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_ENTER) return;
  t_launch_id = 0;  // one kernel per launch: a nested launch is not ours
  auto* self = static_cast<KernelTimes*>(user);
  std::lock_guard lock(self->join_mutex_);
  self->join_.add_external(call->correlationId, launch_id);
}

void KernelTimes::flush() {
  std::lock_guard lock(control_);
  if (state() == TimerState::active) cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void KernelTimes::drain(const std::function<void(const KernelTime&)>& take) {
  std::vector<KernelTime> ready;
  {
    std::lock_guard lock(join_mutex_);
    ready.swap(join_.ready());
  }
  for (const KernelTime& time : ready) take(time);
}

std::uint64_t KernelTimes::unattributed_records() const {
  std::lock_guard lock(join_mutex_);
  return join_.unattributed();
}

void KernelTimes::step_aside() {
  std::lock_guard lock(control_);
  const TimerState was = state_.exchange(TimerState::stepped_aside, std::memory_order_acq_rel);
  if (was == TimerState::active) {
    cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    stop_collecting();
    VGPUMEM_LOG_DEBUG("CUPTI handed over after {} kernel records; kernel durations now come "
                     "from timed events",
                     kernel_records());
  } else if (was != TimerState::not_started) {
    state_.store(was, std::memory_order_release);  // absent or taken: nothing of ours to give back
  }
}

// Disables what we enabled and unsubscribes. The buffer callbacks stay
// registered until the next subscriber registers its own: a buffer CUPTI
// completes meanwhile still finds us (g_holder).
void KernelTimes::stop_collecting() {
  cupti_.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  enable_launch_callbacks(false);
  size_t dropped = 0;
  if (cupti_.dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS) {
    dropped_records_.store(dropped, std::memory_order_relaxed);
  }
  cupti_.unsubscribe(subscriber_);
  subscriber_ = nullptr;
}

void KernelTimes::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  KernelTimes* self = g_holder.load(std::memory_order_acquire);
  *buffer = self != nullptr && self->buffers_ ? self->buffers_->take() : nullptr;
  *size = *buffer != nullptr ? self->buffers_->buffer_bytes() : 0;  // none: CUPTI drops and counts
  *max_records = 0;
}

void KernelTimes::buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  KernelTimes* self = g_holder.load(std::memory_order_acquire);
  if (self == nullptr || buffer == nullptr) return;
  self->read_buffer(buffer, valid);
  self->buffers_->give_back(buffer);
}

// Kernel records, joined with the launch ids the launch callbacks paired
// with their correlation ids (always earlier: at the launch).
void KernelTimes::read_buffer(uint8_t* buffer, size_t valid) {
  std::lock_guard lock(join_mutex_);
  CUpti_Activity* record = nullptr;
  std::uint64_t kernels = 0;
  while (cupti_.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    join_.add_kernel(kernel->correlationId, kernel->start, kernel->end);
    ++kernels;
  }
  kernel_records_.fetch_add(kernels, std::memory_order_relaxed);
}

}  // namespace vgpumem::cupti
