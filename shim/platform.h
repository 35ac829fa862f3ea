// shim::Platform — what the runtime needs from the layer above it.
//
// The runtime (shim/runtime.h) composes vmm/, scheduler/ and cupti/; it never
// names a symbol and never includes interpose/. What only the layer that
// finds the real driver can answer comes through this interface:
// interpose/runtime_platform.cpp gives the preloaded library's, bound to the
// real libcuda.so.1 and the hooks' call counts; a test gives a stand-in over
// the simulated driver (tests/unit/runtime_test.cpp). So the runtime links,
// and is tested, without the preload library.
#pragma once

#include <cuda.h>

#include <cstddef>

#include <nlohmann/json_fwd.hpp>

#include "cupti/cupti_library.h"
#include "vmm/driver_ops.h"

namespace vgpumem {

class Platform {
 public:
  virtual ~Platform() = default;

  // The driver calls the pager makes, or nullptr when the driver lacks one
  // of them (paging then stays off). May load the driver: the runtime calls
  // it outside its own once (the loader's lock, see Runtime::create_pager).
  virtual const vmm::DriverOps* driver_ops() = 0;
  // How many devices the process sees, or -1 if the driver cannot say.
  virtual int device_count() = 0;
  // The memory of `device`, in bytes, into `*bytes`; the driver's answer.
  virtual CUresult device_total_memory(int device, std::size_t* bytes) = 0;
  // How CUPTI's functions are looked up (past any dlsym of ours).
  virtual cupti::SymbolLookup symbol_lookup() = 0;
  // Adds to the trace summary what the program's calls reached: the entry
  // points it called and how often (`calls_by_api`, `library_calls`).
  virtual void describe_calls(nlohmann::json& summary) const = 0;
  // In a child forked after the runtime existed: the parent's counts are
  // not the child's (the child's own calls pass through, uncounted).
  virtual void forget_calls_after_fork() = 0;
};

// A platform with no driver: no paging, no device sizes, no calls to
// describe. The runtime uses it when none was installed.
Platform& platform_without_driver();

}  // namespace vgpumem
