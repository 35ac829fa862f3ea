// The runtime's Platform in the preloaded library: the pager's driver calls
// bound to the real driver (paging_driver.cpp), the devices it sees, glibc's
// own dlsym for CUPTI, and the call counts of the hooks and library hooks.
#include "interpose/runtime_platform.h"

#include <nlohmann/json.hpp>

#include "interpose/library_call.h"
#include "interpose/paging_driver.h"
#include "interpose/real_driver.h"

namespace vgpumem::interpose {
namespace {

class InterposePlatform final : public Platform {
 public:
  const vmm::DriverOps* driver_ops() override {
    if (RealDriver::get() == nullptr) return nullptr;
    return paging_driver_ops();
  }

  int device_count() override {
    RealDriver* driver = RealDriver::get();
    if (driver == nullptr || driver->support().cuDeviceGetCount == nullptr) return -1;
    int count = 0;
    return driver->support().cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : -1;
  }

  CUresult device_total_memory(int device, std::size_t* bytes) override {
    return REAL(cuDeviceTotalMem_v2)(bytes, static_cast<CUdevice>(device));
  }

  cupti::SymbolLookup symbol_lookup() override { return &real_dlsym; }

  void describe_calls(nlohmann::json& summary) const override {
    nlohmann::json calls = nlohmann::json::object();
    for (std::size_t i = 0; i < kHookCount; ++i) {
      if (const std::uint64_t n = hook_calls(static_cast<HookId>(i)); n > 0) calls[hook_entry(i).symbol] = n;
    }
    summary["calls_by_api"] = std::move(calls);
    nlohmann::json library = nlohmann::json::object();
    for (std::size_t i = 0; i < kLibraryHookCount; ++i) {
      if (const std::uint64_t n = library_calls(i); n > 0) library[kLibraryHooks[i]] = n;
    }
    summary["library_calls"] = std::move(library);
  }

  void forget_calls_after_fork() override {
    for (auto& calls : g_hook_calls) calls.store(0, std::memory_order_relaxed);
  }
};

}  // namespace

Runtime& make_runtime() {
  // Leaked on purpose, like the runtime: hooks run during exit, after static destructors.
  static Platform* const platform = new InterposePlatform();
  Runtime::install_platform(*platform);
  return Runtime::get();
}

}  // namespace vgpumem::interpose
