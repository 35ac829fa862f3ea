// shim::Runtime — one per process, created on the first intercepted CUDA call.
//
// It owns what the hooks share: the configuration, the accounting of device
// memory against the caps, the pager and its scheduler, and the trace.
// Creating it does no CUDA work. What only the layer above can answer (the
// driver's calls, the hooks' call counts) comes through a Platform
// (shim/platform.h), installed before the runtime is made: this file never
// includes interpose/, and the runtime links without the preload library.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "cupti/kernel_times.h"
#include "scheduler/scheduler.h"
#include "shim/config.h"
#include "shim/platform.h"
#include "trace/recorder.h"
#include "vmm/access.h"
#include "vmm/accounting.h"
#include "vmm/launch_args.h"
#include "vmm/pager.h"
#include "vmm/pool_registry.h"
#include "vmm/tensor_maps.h"

namespace vgpumem {

// True in a process forked after the runtime existed: such a child cannot use
// its parent's CUDA state, and the shim's locks may have been held, at the
// fork, by parent threads that do not exist in it. Every hook then passes its
// call straight to the driver (interpose/hook_support.h), touching no lock of
// the shim's. One relaxed load on every hook.
extern std::atomic<bool> g_passes_through;
inline bool passes_through() { return g_passes_through.load(std::memory_order_relaxed); }

class Runtime {
 public:
  // The runtime of this process, made on first use with the installed
  // platform (install_platform), or one without a driver if none was.
  // Inline: every hook asks, and the answer after the first is one load.
  static Runtime& get() {
    if (Runtime* made = get_if_created()) [[likely]] return *made;
    return create();
  }
  static Runtime* get_if_created() { return instance_.load(std::memory_order_acquire); }
  // The platform the runtime will be made with; only before the first get()
  // (a later call changes nothing). The preloaded library installs its own
  // on the way to its first hook (interpose/hook_support.h, runtime()).
  static void install_platform(Platform& platform);

  const Config& config() const { return config_; }
  vmm::Accounting& accounting() { return accounting_; }
  trace::Recorder& recorder() { return recorder_; }
  bool tracing() const { return tracing_; }

  // The launch path's trace entry, when tracing: `api` is the entry point
  // (its exported name). Allocates nothing. (Calls are counted by the hook
  // boundary, interpose/hook_support.h, not here.)
  void trace_launch(const char* api, const void* function, const void* stream) {
    if (tracing_) recorder_.record_launch(api, function, stream);
  }

  // The pager, when paging is on (VGPUMEM_POLICY=auto, the default with a cap,
  // lru, vdnn-all or vdnn-conv): created on first use, with the real driver
  // loaded; nullptr when paging is off or the driver lacks a call it needs.
  // Pages only devices that have a cap.
  vmm::Pager* pager() {
    if (!paging_wanted_) return nullptr;
    if (vmm::Pager* pager = pager_.load(std::memory_order_acquire)) return pager;
    return create_pager();
  }
  // The pager if it was made already; never makes one.
  vmm::Pager* pager_if_created() const { return pager_.load(std::memory_order_acquire); }
  vmm::Pager* pager_for(int device) {
    vmm::Pager* pager = this->pager();
    return pager != nullptr && device >= 0 && accounting_.capped(device) ? pager : nullptr;
  }
  // The program's memory pools, and which the pager may serve.
  vmm::PoolRegistry& pools() { return pools_; }
  // Kernel parameter layouts (valid once pager() is non-null).
  vmm::LaunchArgs& launch_args() { return *launch_args_; }
  // The TMA tensor maps the program encoded (remembered while paging is on).
  vmm::TensorMaps& tensor_maps() { return tensor_maps_; }

  // Kernel durations from CUPTI (cupti/kernel_times.h): made with the pager
  // when VGPUMEM_CUPTI=auto; nullptr before that, with VGPUMEM_CUPTI=off, or
  // when a profiler came first. Its state says whether it is active; while it
  // is, the scheduler times the kernels of a timed step by it
  // (shim/cupti_kernel_clock.h) and the other operations with events.
  cupti::KernelTimes* kernel_times() const { return kernel_times_.load(std::memory_order_acquire); }
  // Runs `launch`; when the scheduler asked to time this kernel by its launch
  // id (`access`, only on the operations of a timed step), with a fresh id
  // on CUPTI's external-correlation stack around it: no lock, no allocation.
  // Every other launch pays one load of `access`.
  template <typename Launch>
  CUresult timed_launch(vmm::Access& access, Launch&& launch) {
    if (!access.wants_launch_id()) return launch();
    cupti::KernelTimes* times = kernel_times();
    if (times == nullptr) return launch();
    const std::uint64_t id = next_launch_id();
    access.set_launch_id(id);  // stepped aside meanwhile: no record comes, and the planner knows why
    times->begin(id);
    const CUresult result = launch();
    times->end();
    return result;
  }
  // The program is starting a profiler (interpose/hooks_cupti.cpp, `entry`
  // the CUPTI function it called): give CUPTI back now and never take it.
  void step_aside_for_profiler(const char* entry);

  nlohmann::json summary() const;
  // Writes the trace now (also done at exit when VGPUMEM_TRACE is set).
  void write_trace();

 private:
  Runtime(const Config& config, Platform& platform);
  static Runtime& create();
  static void at_exit();
  static void after_fork_in_child();
  std::uint64_t cap_for_device(int device) const;
  vmm::Pager* create_pager();
  void start_kernel_times();
  nlohmann::json cupti_summary() const;

  const Config& config_;
  Platform& platform_;
  trace::Recorder& recorder_;
  const bool tracing_;
  vmm::Accounting accounting_;
  std::atomic<bool> forked_child_{false};
  const bool paging_wanted_;
  std::atomic<vmm::Pager*> pager_{nullptr};
  scheduler::Scheduler* scheduler_ = nullptr;  // made with the pager under a learned policy: the schedule it follows
  vmm::LaunchArgs* launch_args_ = nullptr;
  vmm::PoolRegistry pools_;
  vmm::TensorMaps tensor_maps_;
  std::atomic<cupti::KernelTimes*> kernel_times_{nullptr};
  scheduler::KernelClock* kernel_clock_ = nullptr;  // the scheduler's view of kernel_times_
  std::atomic<bool> kernel_times_claimed_{false};  // one thread starts it; the others never wait for it
  std::atomic<bool> profiler_started_{false};
  // Launch ids, unique in the process without a shared counter on the
  // launch path: the thread's number in the high bits, its own count below.
  static std::uint64_t next_launch_id() {
    thread_local std::uint64_t id = 0;
    if (id == 0) id = (launching_threads_.fetch_add(1, std::memory_order_relaxed) + 1) << 40;
    return ++id;
  }
  static inline std::atomic<std::uint64_t> launching_threads_{0};
  static inline std::atomic<Runtime*> instance_{nullptr};  // leaked on purpose: hooks run during exit
};

// The recorder of this process. It exists before the runtime does: dlsym and
// cuGetProcAddress look-ups are recorded from the first one. A forked child
// starts a fresh one (trace::Recorder::reset_after_fork).
trace::Recorder& process_recorder();

// Records a look-up of a driver entry point (for the trace summary and the
// debug log).
void note_lookup(trace::LookupPath path, std::string_view name, int version, std::uint64_t flags, bool hooked);

}  // namespace vgpumem
