#include "cli/driver_probe.h"

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>

#include <string>

namespace vgpumem::cli {
namespace {

using InitFn = CUresult (*)(unsigned int);
using IntOutFn = CUresult (*)(int*);
using DeviceGetFn = CUresult (*)(CUdevice*, int);
using DeviceGetNameFn = CUresult (*)(char*, int, CUdevice);
using DeviceTotalMemFn = CUresult (*)(size_t*, CUdevice);
using GetErrorNameFn = CUresult (*)(CUresult, const char**);

template <typename Fn>
Fn entry_point(void* driver, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(driver, name));
}

// The file the dynamic linker loaded for `driver` (a bare soname is looked up
// on the library path, so the name asked for may not say which one it was).
std::string file_of(void* driver, const std::string& asked_for) {
  link_map* map = nullptr;
  if (::dlinfo(driver, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return asked_for;
}

class Describer {
 public:
  explicit Describer(void* driver) : get_error_name_(entry_point<GetErrorNameFn>(driver, "cuGetErrorName")) {}
  // "cuInit returned CUDA_ERROR_NO_DEVICE (100)"
  std::string failure(const std::string& call, CUresult result) const {
    const char* name = nullptr;
    if (get_error_name_ == nullptr || get_error_name_(result, &name) != CUDA_SUCCESS || name == nullptr) {
      name = "an error";
    }
    return call + " returned " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
  }

 private:
  GetErrorNameFn get_error_name_;
};

}  // namespace

std::string format_driver_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

DriverReport probe_driver(const std::string& driver_path) {
  DriverReport report;
  // The driver stays loaded: unloading a CUDA driver mid-process is not
  // something it supports, and the process ends soon after.
  void* driver = ::dlopen(driver_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* why = ::dlerror();
    report.error = "cannot load " + driver_path + ": " + (why != nullptr ? why : "dlopen failed");
    return report;
  }
  report.loaded = true;
  report.loaded_from = file_of(driver, driver_path);

  const auto init = entry_point<InitFn>(driver, "cuInit");
  const auto get_version = entry_point<IntOutFn>(driver, "cuDriverGetVersion");
  const auto get_count = entry_point<IntOutFn>(driver, "cuDeviceGetCount");
  const auto get_device = entry_point<DeviceGetFn>(driver, "cuDeviceGet");
  const auto get_name = entry_point<DeviceGetNameFn>(driver, "cuDeviceGetName");
  auto total_mem = entry_point<DeviceTotalMemFn>(driver, "cuDeviceTotalMem_v2");
  if (total_mem == nullptr) total_mem = entry_point<DeviceTotalMemFn>(driver, "cuDeviceTotalMem");
  if (init == nullptr || get_version == nullptr || get_count == nullptr || get_device == nullptr ||
      get_name == nullptr || total_mem == nullptr) {
    report.error = report.loaded_from + " is not a CUDA driver: it lacks cuInit, cuDriverGetVersion, "
                   "cuDeviceGetCount, cuDeviceGet, cuDeviceGetName or cuDeviceTotalMem";
    return report;
  }
  const Describer describe(driver);
  if (const CUresult r = get_version(&report.version); r != CUDA_SUCCESS) {
    report.error = describe.failure("cuDriverGetVersion", r);
    return report;
  }
  if (const CUresult r = init(0); r != CUDA_SUCCESS) {
    report.error = describe.failure("cuInit", r);
    return report;
  }
  int count = 0;
  if (const CUresult r = get_count(&count); r != CUDA_SUCCESS) {
    report.error = describe.failure("cuDeviceGetCount", r);
    return report;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    DeviceInfo info;
    info.ordinal = ordinal;
    char name[256] = {};
    size_t bytes = 0;
    CUresult r = get_device(&device, ordinal);
    if (r == CUDA_SUCCESS) r = get_name(name, sizeof name, device);
    if (r == CUDA_SUCCESS) r = total_mem(&bytes, device);
    if (r != CUDA_SUCCESS) {
      report.error = describe.failure("querying device " + std::to_string(ordinal), r);
      return report;
    }
    info.name = name;
    info.total_bytes = bytes;
    report.devices.push_back(info);
  }
  return report;
}

}  // namespace vgpumem::cli
