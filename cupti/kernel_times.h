// cupti::KernelTimes — kernel durations from CUPTI's activity API, for the
// scheduler's cost model (docs/architecture.md, "cupti/").
//
// CUPTI has one subscriber per process and one set of activity buffer
// callbacks. We take it only when it is free, and hand it back for good the
// moment the program's own profiler (Nsight Systems, torch.profiler) starts:
//   start()       loads libcupti at run time, subscribes, enables kernel
//                 records with a pool of buffers and the driver-API
//                 callbacks of kernel launches;
//                 absent or taken -> the caller times launches with events;
//   begin()/end() around a launch: the launch's id waits in a thread-local;
//                 the driver's launch callback, on this thread inside the
//                 launch, pairs it with CUPTI's correlation id for the call,
//                 the one the kernel's record will carry.
//
// Not external correlation ids: on the H200 (scripts/gpu/probe_cupti.cu) an
// id pushed around the launch reached no kernel record unless CUPTI also
// made API records (DRIVER or RUNTIME: one per call of the whole program),
// and a runtime launch (PyTorch's cudaLaunchKernel) carries the runtime
// call's correlation id, not that of the driver call the shim forwards; the
// driver callback's id matched the kernel record in every case.
//   flush()/drain() deliver (launch id, start, end) of completed kernels;
//   step_aside()  flushes, disables, unsubscribes and stops for good.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cupti/activity_buffers.h"
#include "cupti/correlation_join.h"
#include "cupti/cupti_library.h"

// Note [CUPTI kernel times]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// `cupti::KernelTimes` (`cupti/kernel_times.h`) gives each kernel's start and
// end from CUPTI's activity API, for the scheduler's cost model; it is made
// with the pager when `VGPUMEM_CUPTI=auto` (the default). CUPTI is loaded at
// run time (`dlopen` of `libcupti.so.13`, then `libcupti.so`; functions through
// that handle, looked up with `real_dlsym`), never linked. It claims CUPTI with
// `cuptiSubscribe`; when CUPTI is absent, or another subscriber holds it (Nsight
// Systems, `torch.profiler`), it says so once in the log and the runtime keeps
// timing launches with events. Active, it enables `CONCURRENT_KERNEL` records
// into a fixed pool of buffers allocated at start (`activity_buffers.*`: when
// all are out, CUPTI drops records and counts them), and the driver-API
// callbacks of the six launch entry points (`cuLaunchKernel`, `cuLaunchKernelEx`,
// `cuLaunchCooperativeKernel`, each also `_ptsz`). Around each kernel of a timed
// step the runtime notes a launch id in a thread-local; the launch callback,
// which CUPTI calls on that thread inside the driver's launch, pairs it with
// the call's correlation id — the one the kernel record will carry — in the
// join (`correlation_join.*`, one short lock, timed launches only; every other
// launch's callback returns after one thread-local load). A completed buffer's
// kernel records are joined by that id, and `drain()` hands out (launch id,
// start, end). The scheduler times the kernels of its timed steps by them
// (Note [Where durations come from], scheduler/step_times.h); CUPTI's records of every other kernel
// come in unattributed and the join drops them.

namespace vgpumem::cupti {

enum class TimerState {
  not_started,
  active,         // subscribed; kernel records flow to us
  absent,         // no usable libcupti: none loads, or it refuses to subscribe (absent_reason())
  taken,          // another subscriber holds CUPTI (or another KernelTimes is active)
  stepped_aside,  // we held it and gave it back to the program's profiler
};
std::string_view to_string(TimerState state);

struct KernelTimesOptions {
  SymbolLookup lookup = nullptr;  // required (cupti_library.h)
  std::string library_path;       // tried before libcupti.so.13 and libcupti.so when set
  bool search_default_names = true;  // false: library_path only
  std::size_t buffer_count = 8;
  std::size_t buffer_bytes = 1 << 20;  // ~2,500 kernel records each
};

class KernelTimes {
 public:
  explicit KernelTimes(KernelTimesOptions options);
  ~KernelTimes();
  KernelTimes(const KernelTimes&) = delete;
  KernelTimes& operator=(const KernelTimes&) = delete;

  // Once; later calls return the state.
  TimerState start();
  TimerState state() const { return state_.load(std::memory_order_acquire); }

  // Around one launch, on the launching thread. begin() is a no-op unless
  // active; end() forgets what this thread's begin() noted.
  void begin(std::uint64_t external_id) noexcept;
  void end() noexcept;

  // Asks CUPTI for every record it holds (buffers complete on this thread).
  void flush();
  // Hands over the kernels joined so far, outside any lock of ours.
  void drain(const std::function<void(const KernelTime&)>& take);

  // Flush, disable our kinds, unsubscribe: the program's profiler may now
  // take CUPTI. Final, from any state (a later start() does nothing).
  void step_aside();

  std::uint64_t kernel_records() const { return kernel_records_.load(std::memory_order_relaxed); }
  std::uint64_t unattributed_records() const;
  std::uint64_t dropped_records() const { return dropped_records_.load(std::memory_order_relaxed); }
  // Why the state is absent (what was tried); empty otherwise.
  const std::string& absent_reason() const { return absent_reason_; }

 private:
  static void CUPTIAPI on_launch(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data);
  bool enable_launch_callbacks(bool on);
  static void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
  void read_buffer(uint8_t* buffer, size_t valid);
  void stop_collecting();

  const KernelTimesOptions options_;
  std::atomic<TimerState> state_{TimerState::not_started};
  std::mutex control_;  // start, flush, step_aside
  CuptiLibrary cupti_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::unique_ptr<ActivityBuffers> buffers_;
  std::string absent_reason_;

  mutable std::mutex join_mutex_;  // join_, from the launch callback, the buffer-completed callback and drain
  CorrelationJoin join_;
  std::atomic<std::uint64_t> kernel_records_{0};
  std::atomic<std::uint64_t> dropped_records_{0};
};

}  // namespace vgpumem::cupti
