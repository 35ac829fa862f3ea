#include "shim/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "interpose/paging_driver.h"
#include "interpose/real_driver.h"
#include "shim/lifecycle.h"
#include "shim/log.h"

namespace vgpumem {
namespace {

std::atomic<Runtime*> g_runtime{nullptr};

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

}  // namespace

trace::Recorder& process_recorder() {
  // Leaked on purpose: hooks can run during exit, after static destructors.
  static trace::Recorder* recorder = new trace::Recorder(process_config().trace_max_events);
  return *recorder;
}

void note_lookup(trace::LookupPath path, std::string_view name, int version, std::uint64_t flags, bool hooked) {
  process_recorder().record_lookup(path, name, version, flags, hooked);
}

Runtime* Runtime::get_if_created() { return g_runtime.load(std::memory_order_acquire); }

Runtime& Runtime::get() {
  if (Runtime* runtime = g_runtime.load(std::memory_order_acquire)) return *runtime;
  static std::once_flag once;
  std::call_once(once, [] {
    const Config& config = process_config();
    init_logging(config);
    auto* runtime = new Runtime(config);  // leaked on purpose, like the recorder
    g_runtime.store(runtime, std::memory_order_release);
    std::atexit(&Runtime::at_exit);
    pthread_atfork(nullptr, nullptr, &Runtime::after_fork_in_child);
    if (config.any_limit()) {
      VGPUMEM_LOG_INFO("active: memory caps on (VGPUMEM_LIMIT{}), trace {}", config.limit_all.is_set() ? "" : "_<i>",
                       config.trace_path.empty() ? "off" : config.trace_path);
    }
  });
  return *g_runtime.load(std::memory_order_acquire);
}

Runtime::Runtime(const Config& config)
    : config_(config),
      recorder_(process_recorder()),
      tracing_(!config.trace_path.empty()),
      accounting_([this](int device) { return cap_for_device(device); }, recorder_),
      paging_wanted_(config.policy == Policy::lru && config.any_limit()) {}

vmm::Pager* Runtime::create_pager() {
  static std::once_flag once;
  std::call_once(once, [this] {
    const vmm::DriverOps* driver = interpose::paging_driver_ops();
    if (driver == nullptr) {
      VGPUMEM_LOG_ERROR("VGPUMEM_POLICY=lru: the driver lacks a call paging needs; allocations beyond the cap "
                        "will fail with CUDA_ERROR_OUT_OF_MEMORY instead");
      return;
    }
    vmm::PagerOptions options;
    options.host_limit = config_.host_limit;
    launch_args_ = new vmm::LaunchArgs(*driver);  // leaked on purpose, like the runtime
    pager_.store(new vmm::Pager(*driver, accounting_.ledger(), recorder_, options), std::memory_order_release);
    VGPUMEM_LOG_INFO("paging on (policy lru, host limit {})",
                     config_.host_limit ? format_bytes(*config_.host_limit) : std::string("none"));
    if (pytorch_expandable_segments()) {
      VGPUMEM_LOG_WARN("PYTORCH_CUDA_ALLOC_CONF turns on expandable segments: PyTorch then maps its memory handle "
                       "next to handle, where a tensor may span two, so vgpumem keeps it resident: capped, mostly not "
                       "paged. Leave expandable_segments off to page past the cap");
    }
  });
  return pager_.load(std::memory_order_acquire);
}

std::uint64_t Runtime::cap_for_device(int device) const {
  const MemoryLimit& limit = config_.limit_for(device);
  if (!limit.is_set()) return vmm::kUncapped;
  if (limit.kind == MemoryLimit::Kind::bytes) return limit.bytes;
  std::size_t total = 0;
  const CUresult result = REAL(cuDeviceTotalMem_v2)(&total, static_cast<CUdevice>(device));
  if (result != CUDA_SUCCESS || total == 0) {
    // Never fall back to "no cap": refuse everything on this device, loudly.
    VGPUMEM_LOG_ERROR("cannot apply the {}% cap on device {}: its memory size is unknown (error {}); "
                      "refusing allocations there",
                      limit.percent, device, static_cast<int>(result));
    return 0;
  }
  return limit.resolve(total);
}

nlohmann::json Runtime::summary() const {
  nlohmann::json calls = nlohmann::json::object();
  for (std::size_t i = 0; i < interpose::kHookCount; ++i) {
    const std::uint64_t n = calls_[i].load(std::memory_order_relaxed);
    if (n > 0) calls[interpose::hook_entry(i).symbol] = n;
  }
  nlohmann::json summary = const_cast<vmm::Accounting&>(accounting_).summary();
  summary["calls_by_api"] = std::move(calls);
  // A forked child's pager is the parent's, copied mid-flight (its lock may
  // have been held by another of the parent's threads): not the child's to report.
  vmm::Pager* pager = pager_.load(std::memory_order_acquire);
  if (pager != nullptr && !forked_child_.load(std::memory_order_relaxed)) summary["paging"] = pager->summary();
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
    if (path == config_.trace_path) path += "." + std::to_string(::getpid());
  }
  std::string error;
  if (!recorder_.write(path, summary(), &error)) {
    VGPUMEM_LOG_ERROR("cannot write the trace to {}: {}", path, error);
  } else {
    VGPUMEM_LOG_INFO("trace written to {}", path);
  }
}

void Runtime::at_exit() {
  Runtime* runtime = get_if_created();
  if (runtime == nullptr) return;
  // Before the driver's own teardown (library destructors run after atexit
  // handlers): the reclaimer must not be inside a driver call then.
  if (vmm::Pager* pager = runtime->pager_.load(std::memory_order_acquire)) pager->stop_reclaimer();
  runtime->write_trace();
}

void Runtime::after_fork_in_child() {
  // The child starts with no events of its own; if it uses CUDA and traces,
  // it writes next to the parent's file, never over it.
  if (Runtime* runtime = get_if_created()) {
    runtime->forked_child_.store(true, std::memory_order_relaxed);
    runtime->recorder_.reset_after_fork();
    if (vmm::Pager* pager = runtime->pager_.load(std::memory_order_acquire)) pager->abandon_reclaimer_after_fork();
  }
}

int current_device() {
  interpose::RealDriver* driver = interpose::RealDriver::get();
  if (driver == nullptr || driver->support().cuCtxGetDevice == nullptr) return -1;
  CUdevice device = -1;
  if (driver->support().cuCtxGetDevice(&device) != CUDA_SUCCESS) return -1;
  return device;
}

int device_of_pointer(std::uint64_t address) {
  interpose::RealDriver* driver = interpose::RealDriver::get();
  if (driver == nullptr || driver->support().cuPointerGetAttribute == nullptr) return -1;
  int ordinal = -1;
  if (driver->support().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                               static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS) {
    return -1;
  }
  return ordinal;
}

}  // namespace vgpumem
