#include "shim/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "shim/cupti_kernel_clock.h"
#include "shim/lifecycle.h"
#include "shim/log.h"
#include "vmm/kernel_name.h"
#include "vmm/driver_error.h"

// Note [fork() and the shim's locks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A child forked after the runtime existed cannot use its
// parent's CUDA state (CUDA's own rule), and any lock of the shim's — the
// pager's, the allocation registry's shards, the recorder's, the logger's —
// may have been held at the fork by a parent thread that does not exist in
// the child (the reclaimer holds the pager's lock across `cuMemCreate`). So
// the child takes none of them: the `pthread_atfork` child handler sets
// `g_passes_through`, and from then on every hook forwards its call straight
// to the driver — no accounting, no paging, no counting — with one warning
// on the first such call. The recorder and the logger renew themselves in
// the child (fresh state, fresh mutexes; the parent's are abandoned, never
// touched; the logger's stderr sink writes with `write(2)` under its own
// mutex rather than spdlog's process-wide console mutex), the reclaimer is
// abandoned, and the child's trace summary names itself `forked_child` and
// leaves out the parent's accounting and pager. It writes `<trace>.<pid>`
// instead of overwriting the parent's file. No *prepare* handler takes the
// shim's locks before the fork: that would make `fork()` wait for a driver
// call in flight, and could deadlock against the driver's own fork
// handlers. A child forked *before* the first CUDA call is an ordinary
// process and is capped and paged like any other. (Tested with the pager's
// lock held by a thread parked inside `cuMemCreate` at the fork.)

namespace vgpumem {

std::atomic<bool> g_passes_through{false};

namespace {

std::atomic<trace::Recorder*> g_recorder{nullptr};
std::atomic<Platform*> g_platform{nullptr};

// The platform of a runtime made before any was installed: it knows no
// driver, so caps in percent refuse (said, loudly) and paging stays off.
class PlatformWithoutDriver final : public Platform {
 public:
  const vmm::DriverOps* driver_ops() override { return nullptr; }
  int device_count() override { return -1; }
  CUresult device_total_memory(int, std::size_t*) override { return CUDA_ERROR_NOT_INITIALIZED; }
  cupti::SymbolLookup symbol_lookup() override { return nullptr; }
  void describe_calls(nlohmann::json&) const override {}
  void forget_calls_after_fork() override {}
};

// In a child after fork(): the recorder's mutexes may have been held by
// threads that are gone. The child records into a fresh state.
void reset_recorder_in_child() {
  if (trace::Recorder* recorder = g_recorder.load(std::memory_order_acquire)) {
    try {
      recorder->reset_after_fork();
    } catch (...) {
      // Out of memory in the child: it records nothing more.
    }
  }
}

// Whether PYTORCH_CUDA_ALLOC_CONF ("key:value,key:value") turns on
// expandable segments, which map memory with the program's own VMM calls,
// handle next to handle: capped, but pinned resident (vmm/program_handles.cpp).
bool pytorch_expandable_segments() {
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (conf == nullptr) return false;
  std::string text(conf);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text.find("expandable_segments:true") != std::string::npos;
}

// HAMi's cap variable set where vgpumem's may have been meant: ours is
// another name, and HAMi's is not read.
void hint_at_hami_variable() {
  if (std::getenv("CUDA_DEVICE_MEMORY_LIMIT") == nullptr) return;
  VGPUMEM_LOG_WARN("CUDA_DEVICE_MEMORY_LIMIT is HAMi's setting, which vgpumem does not read; vgpumem's cap is "
                   "VGPUMEM_LIMIT (VGPUMEM_LIMIT_<i> for one device)");
}

// A per-device cap on an index the process does not see (CUDA_VISIBLE_DEVICES
// renumbers the devices it leaves from 0) caps nothing: said, once.
void say_caps_on_absent_devices(const Config& config, Platform& platform) {
  if (config.limit_device.empty()) return;
  const int count = platform.device_count();
  if (count < 0) return;
  for (const auto& [device, limit] : config.limit_device) {
    if (device < count) continue;
    VGPUMEM_LOG_ERROR("VGPUMEM_LIMIT_{} names device {}, but this process sees {} device{} (indices count the "
                      "devices CUDA_VISIBLE_DEVICES leaves, from 0): that cap applies to no device",
                      device, device, count, count == 1 ? "" : "s");
  }
}

}  // namespace

Platform& platform_without_driver() {
  // Leaked on purpose, like the runtime that holds it: hooks run during exit.
  static Platform* const platform = new PlatformWithoutDriver();
  return *platform;
}

trace::Recorder& process_recorder() {
  if (trace::Recorder* recorder = g_recorder.load(std::memory_order_acquire)) return *recorder;
  static const bool created = [] {
    // Leaked on purpose: hooks can run during exit, after static destructors.
    g_recorder.store(new trace::Recorder(process_config().trace_max_events), std::memory_order_release);
    pthread_atfork(nullptr, nullptr, &reset_recorder_in_child);
    return true;
  }();
  static_cast<void>(created);
  return *g_recorder.load(std::memory_order_acquire);
}

void note_lookup(trace::LookupPath path, std::string_view name, int version, std::uint64_t flags, bool hooked) {
  process_recorder().record_lookup(path, name, version, flags, hooked);
}

void Runtime::install_platform(Platform& platform) {
  Platform* none = nullptr;
  g_platform.compare_exchange_strong(none, &platform, std::memory_order_acq_rel);
}

Runtime& Runtime::create() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Config& config = process_config();
    init_logging(config);
    Platform* platform = g_platform.load(std::memory_order_acquire);
    // Leaked on purpose, like the recorder.
    auto* runtime = new Runtime(config, platform != nullptr ? *platform : platform_without_driver());
    instance_.store(runtime, std::memory_order_release);
    std::atexit(&Runtime::at_exit);
    pthread_atfork(nullptr, nullptr, &Runtime::after_fork_in_child);
    hint_at_hami_variable();
    if (config.any_limit()) {
      VGPUMEM_LOG_INFO("active: memory caps on (VGPUMEM_LIMIT{}), trace {}", config.limit_all.is_set() ? "" : "_<i>",
                       config.trace_path.empty() ? "off" : config.trace_path);
    }
  });
  return *instance_.load(std::memory_order_acquire);
}

Runtime::Runtime(const Config& config, Platform& platform)
    : config_(config),
      platform_(platform),
      recorder_(process_recorder()),
      tracing_(!config.trace_path.empty()),
      accounting_([this](int device) { return cap_for_device(device); }, recorder_),
      paging_wanted_(config.policy != Policy::off && config.any_limit()) {}

vmm::Pager* Runtime::create_pager() {
  // Load the driver first, outside the once below: loading takes the loader's
  // lock, and a thread waiting for this once may hold that lock already (a
  // hook called from a library constructor).
  const vmm::DriverOps* driver = platform_.driver_ops();
  static std::once_flag once;
  std::call_once(once, [this, driver] {
    if (driver == nullptr) {
      VGPUMEM_LOG_ERROR("VGPUMEM_POLICY={}: the driver lacks a call paging needs; allocations beyond the cap "
                        "will fail with CUDA_ERROR_OUT_OF_MEMORY instead",
                        to_string(config_.policy));
      return;
    }
    vmm::PagerOptions options;
    options.host_limit = config_.host_limit;
    options.check = config_.check;
    options.grace_operations = config_.grace_operations;
    options.grace = config_.grace;
    options.lend_max_bytes = config_.lend_max_bytes;
    options.piece_bytes = config_.piece_bytes;
    options.block_chunks = config_.block_bytes / vmm::kChunkBytes;
    options.mover = config_.mover;
    launch_args_ = new vmm::LaunchArgs(*driver);  // leaked on purpose, like the runtime
    auto* pager = new vmm::Pager(*driver, accounting_.ledger(), recorder_, options);
    if (config_.policy != Policy::lru) {
      scheduler::Scheduler::Options plan;
      plan.planner = config_.policy == Policy::vdnn_all    ? scheduler::Planner::vdnn_all
                     : config_.policy == Policy::vdnn_conv ? scheduler::Planner::vdnn_conv
                                                           : scheduler::Planner::swap;
      // A blanket grace keeps each unit K operations past its use, so a plan's
      // offload goes no sooner; lending keeps nothing (a consumer is lent what
      // it needs back), so it goes with the last use.
      plan.grace_operations = config_.grace == vmm::GraceKind::blanket ? config_.grace_operations : 0;
      plan.victims_in_order = orders_victims_by_next_use(config_);
      // Leaked with the pager, whose feed it is; its planning thread stops at exit.
      // Kernel durations: while kernel_times() is active, the kernels of a timed
      // step are timed by CUPTI (keyed by the launch id timed_launch pushes), the
      // rest with events; otherwise everything with events.
      kernel_clock_ = new CuptiKernelClock(kernel_times_);
      scheduler_ = new scheduler::Scheduler(
          plan, *pager, [driver](CUfunction function) { return vmm::kernel_name(*driver, function); },
          config_.cupti == CuptiUse::off ? nullptr : kernel_clock_);
      pager->set_access_feed(scheduler_);
      if (plan.victims_in_order) pager->set_victim_policy(&scheduler_->victim_order());
    } else if (config_.victims == VictimOrder::next_use) {
      VGPUMEM_LOG_WARN("VGPUMEM_VICTIMS=next-use needs a learned step (VGPUMEM_POLICY=auto, vdnn-all or vdnn-conv); "
                       "under VGPUMEM_POLICY={} the least recently used unit makes room first",
                       to_string(config_.policy));
    }
    pager_.store(pager, std::memory_order_release);
    VGPUMEM_LOG_INFO("paging on (policy {}, victims {}, check {}, host limit {})", to_string(config_.policy),
                     orders_victims_by_next_use(config_) ? "by next use" : "least recently used", to_string(config_.check),
                     config_.host_limit ? format_bytes(*config_.host_limit) : std::string("none"));
    if (pytorch_expandable_segments()) {
      VGPUMEM_LOG_WARN("PYTORCH_CUDA_ALLOC_CONF turns on expandable segments: PyTorch then maps its memory handle "
                       "next to handle, where a tensor may span two, so vgpumem keeps it resident: capped, mostly not "
                       "paged. Leave expandable_segments off to page past the cap");
    }
  });
  // Outside the once, like the driver: loading CUPTI takes the loader's lock.
  if (pager_.load(std::memory_order_acquire) != nullptr) start_kernel_times();
  return pager_.load(std::memory_order_acquire);
}

void Runtime::start_kernel_times() {
  if (config_.cupti == CuptiUse::off || profiler_started_.load()) return;
  // One thread starts it; a thread that loses this race goes on without
  // waiting (it may hold the loader's lock that the winner's dlopen needs).
  bool unclaimed = false;
  if (!kernel_times_claimed_.compare_exchange_strong(unclaimed, true)) return;
  cupti::KernelTimesOptions options;
  options.lookup = platform_.symbol_lookup();
  if (options.lookup == nullptr) return;  // a platform without a driver has no CUPTI either
  auto* times = new cupti::KernelTimes(options);  // leaked on purpose, like the pager
  const cupti::TimerState state = times->start();
  kernel_times_.store(times, std::memory_order_release);
  if (state == cupti::TimerState::active) {
    VGPUMEM_LOG_INFO("kernel durations from CUPTI activity records");
  }
  // A profiler that started while we were starting saw no kernel times yet.
  if (profiler_started_.load()) times->step_aside();
}

void Runtime::step_aside_for_profiler(const char* entry) {
  if (profiler_started_.exchange(true)) return;
  cupti::KernelTimes* times = kernel_times();
  const bool held = times != nullptr && times->state() == cupti::TimerState::active;
  if (times != nullptr) times->step_aside();
  if (held) {
    VGPUMEM_LOG_INFO("the program is starting a profiler ({}): vgpumem stepped aside from CUPTI after {} kernel "
                     "records; kernel durations come from timed events",
                     entry, times->kernel_records());
  } else {
    VGPUMEM_LOG_DEBUG("the program is starting a profiler ({}): vgpumem will not use CUPTI", entry);
  }
}

nlohmann::json Runtime::cupti_summary() const {
  nlohmann::json cupti = {{"use", to_string(config_.cupti)}, {"profiler_started", profiler_started_.load()}};
  cupti::KernelTimes* times = kernel_times();
  if (times == nullptr) {
    cupti["state"] = config_.cupti == CuptiUse::off ? "off" : "not started";
    cupti["kernel_records"] = 0;
    return cupti;
  }
  cupti["state"] = to_string(times->state());
  cupti["kernel_records"] = times->kernel_records();
  cupti["unattributed_records"] = times->unattributed_records();
  cupti["dropped_records"] = times->dropped_records();
  if (!times->absent_reason().empty()) cupti["absent_reason"] = times->absent_reason();
  return cupti;
}

std::uint64_t Runtime::cap_for_device(int device) const {
  // The first device seen: the driver is initialised, its device count known.
  static std::once_flag checked;
  std::call_once(checked, [this] { say_caps_on_absent_devices(config_, platform_); });
  const MemoryLimit& limit = config_.limit_for(device);
  if (!limit.is_set()) return vmm::kUncapped;
  if (limit.kind == MemoryLimit::Kind::bytes) return limit.bytes;
  std::size_t total = 0;
  const CUresult result = platform_.device_total_memory(device, &total);
  if (result != CUDA_SUCCESS || total == 0) {
    // Never fall back to "no cap": refuse everything on this device, loudly.
    VGPUMEM_LOG_ERROR("cannot apply the {}% cap on device {}: its memory size is unknown (error {}); "
                      "refusing allocations there",
                      limit.percent, device, vmm::driver_error(result));
    return 0;
  }
  return limit.resolve(total);
}

nlohmann::json Runtime::summary() const {
  if (forked_child_.load(std::memory_order_relaxed)) {
    // A child forked after CUDA use passes every call through: the
    // accounting and the pager are the parent's, copied mid-flight (their
    // locks may have been held by another of the parent's threads), and
    // not the child's to report.
    return {{"pid", ::getpid()}, {"forked_child", true}, {"calls_by_api", nlohmann::json::object()}};
  }
  nlohmann::json summary = const_cast<vmm::Accounting&>(accounting_).summary();
  platform_.describe_calls(summary);
  summary["cupti"] = cupti_summary();
  if (vmm::Pager* pager = pager_.load(std::memory_order_acquire)) {
    summary["paging"] = pager->summary();
    summary["paging"]["policy"] = to_string(config_.policy);
    summary["paging"]["check"] = to_string(config_.check);
    summary["paging"]["launch_audit"] = launch_args_->audit();
    summary["paging"]["tensor_maps"] = {{"remembered", tensor_maps_.size()}, {"found_in_launches", tensor_maps_.found()}};
    if (scheduler_ != nullptr) summary["schedule"] = scheduler_->summary();
  }
  summary["pid"] = ::getpid();
  return summary;
}

void Runtime::write_trace() {
  if (!tracing_) return;
  std::string path = config_.trace_path;
  if (forked_child_.load(std::memory_order_relaxed)) {
    // %p was expanded with the parent's pid at load; expand it again, and
    // never write over the parent's file when the pattern has no %p.
    path = expand_pid(config_.trace_path_pattern, ::getpid());
    if (path == config_.trace_path) {
      // Two appends, not `"." + std::to_string(pid)`: GCC 12 at -O3 reports
      // that concatenation as an overlapping memcpy (-Wrestrict, a false positive).
      path += '.';
      path += std::to_string(::getpid());
    }
  }
  const nlohmann::json extra = summary();
  std::string error;
  if (recorder_.write(path, extra, &error)) {
    VGPUMEM_LOG_INFO("trace written to {}", path);
    return;
  }
  // Its directory was checked at load; it went away or stopped taking files
  // during the run. A long run's trace is worth keeping somewhere, said where.
  const std::string fallback = fallback_trace_path(path, ::getpid(), std::getenv("TMPDIR"));
  std::string fallback_error;
  if (fallback != path && recorder_.write(fallback, extra, &fallback_error)) {
    VGPUMEM_LOG_ERROR("cannot write the trace to {}: {}; wrote it to {} instead", path, error, fallback);
  } else {
    VGPUMEM_LOG_ERROR("cannot write the trace to {}: {}; nor to {}: {}", path, error, fallback, fallback_error);
  }
}

void Runtime::at_exit() {
  Runtime* runtime = get_if_created();
  if (runtime == nullptr) return;
  try {
    // Before the driver's own teardown (library destructors run after atexit
    // handlers): the reclaimer must not be inside a driver call then. A
    // forked child has neither thread, and must not touch their locks: the
    // parent's planning thread may have held its own at the fork, and no one
    // in the child would ever release it.
    if (!runtime->forked_child_.load(std::memory_order_relaxed)) {
      if (runtime->scheduler_ != nullptr) runtime->scheduler_->stop();
      if (vmm::Pager* pager = runtime->pager_.load(std::memory_order_acquire)) pager->stop_reclaimer();
      // The records of the kernels that ran since the last full buffer, for the summary's count.
      if (cupti::KernelTimes* times = runtime->kernel_times()) times->flush();
    }
    runtime->write_trace();
  } catch (...) {
    // exit() is a C frame too: nothing may unwind into it.
    write_stderr_line("[vgpumem] error: the trace could not be written at exit (out of memory)\n");
  }
}

void Runtime::after_fork_in_child() {
  // From here on every hook passes straight through to the driver
  // (g_passes_through). The child's own calls are not counted; if it
  // traces, it writes its own events (look-ups) next to the parent's file,
  // never over it. The recorder and the logger renew themselves in the child
  // through handlers of their own.
  g_passes_through.store(true, std::memory_order_relaxed);
  if (Runtime* runtime = get_if_created()) {
    runtime->forked_child_.store(true, std::memory_order_relaxed);
    runtime->platform_.forget_calls_after_fork();
    if (vmm::Pager* pager = runtime->pager_.load(std::memory_order_acquire)) pager->abandon_reclaimer_after_fork();
  }
}

}  // namespace vgpumem
