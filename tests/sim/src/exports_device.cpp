// Initialisation, configuration, devices, error names, the report.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim.h"

using namespace vgpusim;

namespace {

[[noreturn]] void bad_setting(const char* variable, const char* value, const char* accepted) {
  std::fprintf(stderr, "vgpusim: invalid %s=\"%s\": expected %s\n", variable, value, accepted);
  std::exit(2);
}

bool parse_size(const std::string& text, std::uint64_t* out) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return false;
  const std::string unit = text.substr(digits);
  std::uint64_t scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KiB") scale = 1ull << 10;
  else if (unit == "M" || unit == "MiB") scale = 1ull << 20;
  else if (unit == "G" || unit == "GiB") scale = 1ull << 30;
  else if (unit == "T" || unit == "TiB") scale = 1ull << 40;
  else return false;
  *out = std::stoull(text.substr(0, digits)) * scale;
  return *out > 0;
}

void configure(Simulator& sim) {
  int count = 1;
  if (const char* v = std::getenv("VGPUSIM_DEVICES")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 1 || n > 16) bad_setting("VGPUSIM_DEVICES", v, "a device count from 1 to 16");
    count = static_cast<int>(n);
  }
  sim.devices.assign(static_cast<std::size_t>(count), Device{});
  if (const char* v = std::getenv("VGPUSIM_DEVICE_MEMORY")) {
    // One size for all devices, or one per device separated by commas.
    std::string text = v;
    std::size_t i = 0, start = 0;
    while (true) {
      const std::size_t comma = text.find(',', start);
      std::uint64_t size = 0;
      if (!parse_size(text.substr(start, comma - start), &size)) {
        bad_setting("VGPUSIM_DEVICE_MEMORY", v, "a size such as 16GiB or 512MiB, or one per device separated by commas");
      }
      for (std::size_t d = i; d < sim.devices.size() && (comma != std::string::npos ? d == i : true); ++d) {
        sim.devices[d].memory_bytes = size;
      }
      ++i;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (auto [variable, rate] : {std::pair{"VGPUSIM_LINK_GBPS", &sim.link_gbps}, std::pair{"VGPUSIM_PAGEABLE_GBPS", &sim.pageable_gbps}}) {
    const char* v = std::getenv(variable);
    if (v == nullptr) continue;
    char* end = nullptr;
    *rate = std::strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(*rate > 0)) bad_setting(variable, v, "a positive number of GB/s");
  }
  if (const char* v = std::getenv("VGPUSIM_COST_MODEL")) {
    const std::string model = v;
    if (model == "calibrated") sim.cost_model = CostModel::calibrated;
    else if (model == "idle") sim.cost_model = CostModel::idle;
    else bad_setting("VGPUSIM_COST_MODEL", v, "calibrated (what a training run on an H200 paid) or idle (the H100's idle medians)");
  }
  if (const char* v = std::getenv("VGPUSIM_KERNEL_TIME_SCALE")) {
    char* end = nullptr;
    sim.kernel_time_scale = std::strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(sim.kernel_time_scale > 0)) {
      bad_setting("VGPUSIM_KERNEL_TIME_SCALE", v, "a positive factor for every kernel's declared duration");
    }
  }
  if (const char* v = std::getenv("VGPUSIM_MAP_BUSY_US")) {
    char* end = nullptr;
    const double us = std::strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(us >= 0)) bad_setting("VGPUSIM_MAP_BUSY_US", v, "microseconds, 0 or more");
    sim.map_busy_ns = us * 1000.0;
  }
  if (const char* v = std::getenv("VGPUSIM_FAULTS")) {
    // "operation:n" fails the n-th call; "operation:n+" the n-th and every later one.
    std::string text = v;
    std::size_t start = 0;
    while (start <= text.size() && !text.empty()) {
      const std::size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma - start);
      const std::size_t colon = item.find(':');
      if (colon == std::string::npos || colon == 0) {
        bad_setting("VGPUSIM_FAULTS", v, "a comma-separated list of OPERATION:N or OPERATION:N+");
      }
      std::string n = item.substr(colon + 1);
      const bool later = !n.empty() && n.back() == '+';
      if (later) n.pop_back();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || std::stoull(n) == 0) {
        bad_setting("VGPUSIM_FAULTS", v, "a comma-separated list of OPERATION:N or OPERATION:N+ with N >= 1");
      }
      sim.faults[item.substr(0, colon)] = Simulator::FaultRule{std::stoull(n), later, 0};
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (const char* v = std::getenv("VGPUSIM_TIMELINE")) sim.timeline.enabled = *v != '\0';
  if (const char* v = std::getenv("VGPUSIM_TIMELINE_MAX_EVENTS")) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end != '\0' || n == 0) {
      bad_setting("VGPUSIM_TIMELINE_MAX_EVENTS", v, "a positive number of events");
    }
    sim.timeline.max_events = static_cast<std::size_t>(n);
  }
  for (std::size_t d = 0; d < sim.devices.size(); ++d) sim.primary.push_back(create_context(sim, static_cast<int>(d), true));
  create_default_pools(sim);
}

// The report and the timeline describe the simulated device, which belongs
// to the process that initialised it: a forked child (a data-loader worker
// that never uses CUDA) writes neither. Its exit must not wait for the
// simulator's lock either, which another of the parent's threads may have
// held at the fork.
std::atomic<bool> g_forked_child{false};

// The path in `variable` with %p replaced by the process id ("" if unset).
std::string path_from(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr) return "";
  std::string expanded;
  for (const char* c = path; *c; ++c) {
    if (c[0] == '%' && c[1] == 'p') {
      expanded += std::to_string(::getpid());
      ++c;
    } else {
      expanded += *c;
    }
  }
  return expanded;
}

void write_at_exit() {
  if (g_forked_child.load()) return;
  const std::string report = path_from("VGPUSIM_REPORT");
  const std::string timeline = path_from("VGPUSIM_TIMELINE");
  if (report.empty() && timeline.empty()) return;
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!report.empty()) sim.write_report(report.c_str());
  if (!timeline.empty() && sim.timeline.enabled) write_timeline(sim, timeline.c_str());
}

struct ErrorName {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorName kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

}  // namespace

SIM_EXPORT CUresult cuInit(unsigned int flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!sim.initialised) {
    configure(sim);
    sim.initialised = true;
    std::atexit(write_at_exit);
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true); });
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(sim.devices.size());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= static_cast<int>(sim.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<std::size_t>(length), "vgpusim simulated device %d", device);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr || attribute <= 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= static_cast<int>(sim.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 3; break;  // as the H100 reports
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:      // 110, as the H100 reports
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:  // 141
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:      // 145
      *value = 1;
      break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuDeviceTotalMem_v2");
  if (!sim.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= static_cast<int>(sim.devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = sim.devices[static_cast<std::size_t>(device)].memory_bytes;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorName& e : kErrors) {
    if (e.code == error) {
      *name = e.name;
      return CUDA_SUCCESS;
    }
  }
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorName& e : kErrors) {
    if (e.code == error) {
      *text = e.text;
      return CUDA_SUCCESS;
    }
  }
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetExportTable(const void** table, const CUuuid*) {
  if (table) *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;  // private tables are not simulated
}

SIM_EXPORT unsigned long long vgpusimHostTimeNs(void) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return static_cast<unsigned long long>(host_now(sim));
}

SIM_EXPORT unsigned long long vgpusimPhysicalPeak(int device, int reset) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (device < 0 || static_cast<std::size_t>(device) >= sim.devices.size()) return 0;
  Device& d = sim.devices[static_cast<std::size_t>(device)];
  const std::uint64_t peak = d.physical_peak;
  if (reset != 0) d.physical_peak = d.physical_now;
  return peak;
}

SIM_EXPORT CUresult vgpusimSetCostModel(const char* name) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (name != nullptr && std::strcmp(name, "calibrated") == 0) sim.cost_model = CostModel::calibrated;
  else if (name != nullptr && std::strcmp(name, "idle") == 0) sim.cost_model = CostModel::idle;
  else return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

SIM_EXPORT void vgpusimThreadDriverCalls(unsigned long long* vmm_calls, unsigned long long* pin_calls,
                                         unsigned long long* ns) {
  const ThreadDriverCalls& calls = thread_driver_calls();
  if (vmm_calls != nullptr) *vmm_calls = calls.vmm;
  if (pin_calls != nullptr) *pin_calls = calls.pin;
  if (ns != nullptr) *ns = static_cast<unsigned long long>(calls.ns);
}

SIM_EXPORT void vgpusimHostHandoffFor(unsigned long long ns, const char* why) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  advance_host(sim, static_cast<double>(ns), HostSpan::handoff, why);
}

SIM_EXPORT void vgpusimHostHandoff(unsigned long long ns) { vgpusimHostHandoffFor(ns, nullptr); }

SIM_EXPORT void vgpusimCopiedBytes(unsigned long long* to_device, unsigned long long* to_host) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (to_device != nullptr) *to_device = sim.stats.issued_h2d;
  if (to_host != nullptr) *to_host = sim.stats.issued_d2h;
}

SIM_EXPORT CUresult vgpusimWriteReport(const char* path) {
  if (path == nullptr) path = std::getenv("VGPUSIM_REPORT");
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.write_report(path);
  return CUDA_SUCCESS;
}
