// The real CUDA driver: found lazily, on the first call that needs it, never
// at library load (a process that never touches CUDA never loads it).
#pragma once

#include <atomic>
#include <utility>

#include "interpose/hook_table.h"

namespace vgpumem::interpose {

// glibc's own dlsym, found with dlvsym(RTLD_NEXT) so our dlsym override is
// never re-entered.
void* real_dlsym(void* handle, const char* name);

// Driver functions the shim calls for itself (not hooked).
struct DriverSupport {
  CUresult (*cuCtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuPointerGetAttribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
};

class RealDriver {
 public:
  // The loaded driver, or nullptr if it cannot be loaded (logged once).
  static RealDriver* get();
  // The driver if already loaded; never loads.
  static RealDriver* get_if_loaded();

  void* real(HookId id) const { return real_[static_cast<std::size_t>(id)]; }
  const DriverSupport& support() const { return support_; }
  void* handle() const { return handle_; }

  // The hook whose real function is at `address`, or HookId::count_. This is
  // how cuGetProcAddress results are routed: by what the driver returned.
  HookId hook_for_real_address(const void* address) const;

  // True if `address` lies inside the driver's shared object.
  bool owns(const void* address) const;

 private:
  RealDriver() = default;
  bool load(const char* path);

  void* handle_ = nullptr;
  const void* object_base_ = nullptr;
  void* real_[kHookCount] = {};
  // (real address, hook index) sorted by address, for entry_for_real_address.
  std::pair<const void*, std::size_t> by_address_[kHookCount] = {};
  std::size_t by_address_count_ = 0;
  DriverSupport support_;
};

// True while this thread is loading the driver: the driver's own look-ups
// during its initialisation must see the real functions.
bool loading_driver_on_this_thread();

// The device of the calling thread's current context, or -1 when the thread
// has none (never an uninitialised value).
int current_device();
// The device an allocation at `address` belongs to, or -1.
int device_of_pointer(std::uint64_t address);

// What a hook returns when the driver or this ABI variant is not available.
CUresult missing_driver_result(HookId id);

template <HookId id>
struct HookTraits;
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) \
  template <>                                             \
  struct HookTraits<HookId::symbol> {                     \
    using Fn = pfn;                                       \
  };
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK

// Calls the real driver's function for `id`, or returns a CUDA error if it is
// missing. Used through REAL(name)(args...).
template <HookId id>
struct Real {
  template <typename... Args>
  CUresult operator()(Args... args) const {
    RealDriver* driver = RealDriver::get();
    auto fn = driver ? reinterpret_cast<typename HookTraits<id>::Fn>(driver->real(id)) : nullptr;
    if (fn == nullptr) return missing_driver_result(id);
    return fn(args...);
  }
};

}  // namespace vgpumem::interpose

#define REAL(name) (::vgpumem::interpose::Real<::vgpumem::interpose::HookId::name>{})
