// What the pager's reclaimer thread does between the program's operations
// (vmm/reclaimer.h runs it): unmaps units whose copy out is done, makes
// chunks and pins host memory ahead of need, and times the program's waits
// for units. None of it records on or waits for the program's streams but
// the last. (Pager's other parts: pager.cpp.)
#include <algorithm>
#include <utility>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/atomic_max.h"
#include "vmm/pager.h"
#include "vmm/pager_device_state.h"
#include "vmm/relaxed_capture_mode.h"
#include "vmm/driver_error.h"

namespace vgpumem::vmm {

void Pager::wake_reclaimer() {
  if (!reclaimer_) return;
  if (const std::uint64_t now = host_clock_ns(); now != 0) raise_to(reclaimer_woken_ns_, now);
  reclaimer_->wake();
}

// On the reclaimer's thread. It never records on the program's streams, only
// on the copy streams (time_stalls waits for events the launch path recorded
// on them); its mode is relaxed, so it cannot invalidate a capture the
// program has open (docs/gpu-facts.md §8.9).
void Pager::reclaim() {
  // On a simulated driver, no earlier than the thread that woke it.
  if (driver_.host_handoff != nullptr) {
    driver_.host_handoff(reclaimer_woken_ns_.load(std::memory_order_relaxed), "woken");
  }
  RelaxedCaptureMode relaxed(driver_, true);
  unmap_finished_offloads();
  create_chunks_ahead();
  pin_host_ahead();
  time_stalls();  // last: it waits for the program's streams
  reclaimer_passes_.fetch_add(1, std::memory_order_release);
}

// Takes the stall timers over and waits, without the lock, for each wait on
// the program's streams to be over (blocking-sync events: the thread
// sleeps). Only this thread reads them while it runs, so none is destroyed
// under its wait.
void Pager::time_stalls() {
  std::vector<StallTimer> timers;
  CUcontext context = nullptr;
  {
    MutexLock lock(mutex_);
    {
      MutexLock timers_lock(stall_timers_mutex_);
      timers.swap(stall_timers_);
      stalls_being_read_.fetch_add(timers.size(), std::memory_order_relaxed);  // under the lock, with the swap
    }
    if (!devices_.empty()) context = devices_.begin()->second->context;
  }
  if (timers.empty()) return;
  driver_.context_set_current(context);
  for (const StallTimer& timer : timers) {
    finish_stall(timer, driver_.event_synchronize(timer.passed) == CUDA_SUCCESS);
    stalls_being_read_.fetch_sub(1, std::memory_order_release);  // after its length is in stall_ns_
  }
}

// Waits, without the lock, for everything the copy streams hold now (a mark
// of its own behind the offloads' copies), then unmaps each unit whose copy
// is done.
void Pager::unmap_finished_offloads() {
  std::vector<std::pair<CUcontext, CUevent>> marks;
  {
    MutexLock lock(mutex_);
    for (auto& [device, state] : devices_) {
      const bool saving = std::any_of(saved_units_.begin(), saved_units_.end(),
                                      [device = device](const Unit* unit) { return unit->device == device; });
      if (!saving || driver_.context_set_current(state->context) != CUDA_SUCCESS) continue;
      if (state->reclaim_mark == nullptr &&
          driver_.event_create(&state->reclaim_mark, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) {
        state->reclaim_mark = nullptr;
        continue;
      }
      if (driver_.event_record(state->reclaim_mark, state->copy_stream) == CUDA_SUCCESS) {
        marks.emplace_back(state->context, state->reclaim_mark);
      }
    }
  }
  if (marks.empty()) return;
  for (const auto& [context, mark] : marks) {
    driver_.context_set_current(context);
    driver_.event_synchronize(mark);  // a blocking-sync event: the thread sleeps, it does not spin
  }
  MutexLock lock(mutex_);
  PhaseTimer timer(phases_, PagerPhase::reclaimer_locked);
  const std::size_t before = saved_units_.size();
  reap_saved_units(false);
  reclaimer_unmaps_.fetch_add(before - saved_units_.size(), std::memory_order_relaxed);
}

// Keeps `spare_chunks` free chunks per device while the cap has room, so a
// new allocation or a fetch under the cap maps chunks that exist. A spare is
// charged to the cap like any chunk. Each is created under the lock (a slow
// path may wait one cuMemCreate for it; launches do not), so make_room can
// stop this for good and take the spares back with no creation in flight:
// once the program's own unpaged memory has needed room, no more spares.
void Pager::create_chunks_ahead() {
  std::vector<DeviceState*> states;
  {
    MutexLock lock(mutex_);
    for (auto& [device, state] : devices_) states.push_back(state.get());
  }
  for (DeviceState* state : states) {
    for (;;) {
      MutexLock lock(mutex_);
      if (!state->spares_wanted || state->pool.free_chunks() >= options_.spare_chunks ||
          driver_.context_set_current(state->context) != CUDA_SUCCESS) {
        break;
      }
      CUresult error = CUDA_SUCCESS;
      bool cap_full = false;
      // A whole block, so that the spares map in runs.
      const std::size_t created = state->pool.grow(kBlockChunks, &error, &cap_full);
      if (created == 0) {  // the cap is full (the usual case) or the driver said no: on demand, then
        if (!cap_full) {
          state->spares_wanted = false;  // the device is short of memory; do not ask again and again
          VGPUMEM_LOG_WARN("cannot create a 2 MiB block ahead on device {}: error {}; blocks are created on "
                           "demand from now on",
                           state->pool.device(), driver_error(error));
        }
        break;
      }
      chunks_created_ahead_.fetch_add(created, std::memory_order_relaxed);
    }
  }
}

void Pager::pin_host_ahead() {
  std::optional<std::uint64_t> bytes;
  CUcontext context = nullptr;
  {
    MutexLock lock(mutex_);
    bytes = host_.spare_wanted();
    if (!devices_.empty()) context = devices_.begin()->second->context;
  }
  if (!bytes || !pin_ahead_ || driver_.context_set_current(context) != CUDA_SUCCESS) return;
  void* buffer = nullptr;
  CUresult result = CUDA_SUCCESS;
  {
    DriverCallTimer timed(&host_path_, DriverWork::pin, *bytes);
    if ((result = driver_.host_alloc(&buffer, *bytes, 0)) != CUDA_SUCCESS) timed.pinned_nothing();
  }
  if (result != CUDA_SUCCESS) {
    pin_ahead_ = false;  // the host is short of memory: do not ask again and again
    VGPUMEM_LOG_WARN("cannot pin {} of host memory ahead: error {}; offloads pin what they need on demand from now on",
                     format_bytes(*bytes), driver_error(result));
    return;
  }
  MutexLock lock(mutex_);
  host_.add_spare(buffer, *bytes);
}

}  // namespace vgpumem::vmm
