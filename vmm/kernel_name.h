// A kernel's name as the driver gives it (cuFuncGetName, or cuKernelGetName
// for a CUkernel passed as a CUfunction), or its handle when the driver has
// none to give. For logs and the trace's launch audit; never on a hot path.
#pragma once

#include <string>

#include <fmt/format.h>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

inline std::string kernel_name(const DriverOps& driver, CUfunction function) {
  const char* name = nullptr;
  if (driver.func_get_name == nullptr || driver.func_get_name(&name, function) != CUDA_SUCCESS) name = nullptr;
  if (name == nullptr && (driver.kernel_get_name == nullptr ||
                          driver.kernel_get_name(&name, reinterpret_cast<CUkernel>(function)) != CUDA_SUCCESS)) {
    name = nullptr;
  }
  return name != nullptr ? std::string(name) : fmt::format("{}", static_cast<const void*>(function));
}

}  // namespace vgpumem::vmm
