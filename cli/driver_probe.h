// What the CUDA driver says about this machine, asked the way the shim asks:
// dlopen the driver the configuration names (VGPUMEM_DRIVER, default
// libcuda.so.1), then cuInit, cuDriverGetVersion, cuDeviceGetCount and, for
// each device, its name and total memory. Used by `vgpumem doctor`; needs no
// shim in the process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vgpumem::cli {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::uint64_t total_bytes = 0;
};

struct DriverReport {
  bool loaded = false;        // dlopen succeeded
  std::string loaded_from;    // the file the dynamic linker picked
  std::string error;          // set when something failed: what, and the driver's answer
  int version = 0;            // cuDriverGetVersion, e.g. 12040
  std::vector<DeviceInfo> devices;
};

DriverReport probe_driver(const std::string& driver_path);

// 12040 -> "12.4"
std::string format_driver_version(int version);

}  // namespace vgpumem::cli
