// shim::Runtime — one per process, created on the first intercepted CUDA call.
//
// It owns what the hooks share: the configuration, the accounting of device
// memory against the caps, the per-entry-point call counters and the trace.
// Creating it does no CUDA work; the real driver is loaded by the first hook
// that forwards a call (interpose/real_driver.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "cupti/kernel_times.h"
#include "interpose/hook_table.h"
#include "scheduler/scheduler.h"
#include "shim/config.h"
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
  static Runtime& get();
  static Runtime* get_if_created();

  const Config& config() const { return config_; }
  vmm::Accounting& accounting() { return accounting_; }
  trace::Recorder& recorder() { return recorder_; }
  bool tracing() const { return tracing_; }

  // Every hook counts its calls (relaxed atomics: no lock on any path).
  void count(interpose::HookId id) {
    calls_[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t calls(interpose::HookId id) const {
    return calls_[static_cast<std::size_t>(id)].load(std::memory_order_relaxed);
  }
  // The launch path: count, and trace when asked. Allocates nothing.
  void on_launch(interpose::HookId id, const void* function, const void* stream) {
    count(id);
    if (tracing_) recorder_.record_launch(interpose::hook_entry(id).symbol, function, stream);
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
  explicit Runtime(const Config& config);
  static void at_exit();
  static void after_fork_in_child();
  std::uint64_t cap_for_device(int device) const;
  vmm::Pager* create_pager();
  void start_kernel_times();
  nlohmann::json cupti_summary() const;

  const Config& config_;
  trace::Recorder& recorder_;
  const bool tracing_;
  vmm::Accounting accounting_;
  std::atomic<std::uint64_t> calls_[interpose::kHookCount] = {};
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
};

// The recorder of this process. It exists before the runtime does: dlsym and
// cuGetProcAddress look-ups are recorded from the first one. A forked child
// starts a fresh one (trace::Recorder::reset_after_fork).
trace::Recorder& process_recorder();

// Records a look-up of a driver entry point (for the trace summary and the
// debug log).
void note_lookup(trace::LookupPath path, std::string_view name, int version, std::uint64_t flags, bool hooked);

// The device of the calling thread's current context, or -1 when the thread
// has none (never an uninitialised value).
int current_device();
// The device an allocation at `address` belongs to, or -1.
int device_of_pointer(std::uint64_t address);

}  // namespace vgpumem
