#include "interpose/real_driver.h"

#include <dlfcn.h>

#include <algorithm>

#include "shim/lifecycle.h"
#include "shim/log.h"

// Note [Loading the real driver lazily]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The real driver is loaded lazily (`real_driver.cpp`), by the first hook
// that forwards a call, from `VGPUMEM_DRIVER` (default `libcuda.so.1`).
// libvgpumem.so has no `NEEDED` entry on libcuda or libcudart, carries its own
// C++ runtime (static, hidden), and exports only the hooks and `dlsym`
// (`exports.map`, an anonymous version node so unversioned definitions still
// satisfy versioned references). While the driver is being loaded, its own
// look-ups pass straight through. No lock of ours is held across that
// `dlopen`: it takes the loader's lock, which a thread running a library
// constructor already holds — if that constructor calls a hook, it must not
// wait for a mutex held by a thread that waits for the loader. Each thread
// that finds the driver missing loads it (a second `dlopen` of a loaded
// object only takes a reference), the first to finish publishes it with a
// compare-and-swap, the others `dlclose` theirs. The pager is created after
// the driver is loaded, outside its own once-only initialisation, for the
// same reason.

namespace vgpumem::interpose {
namespace {

std::atomic<RealDriver*> g_driver{nullptr};
std::atomic<bool> g_load_failed{false};
thread_local bool t_loading = false;

}  // namespace

bool loading_driver_on_this_thread() { return t_loading; }

RealDriver* RealDriver::get_if_loaded() { return g_driver.load(std::memory_order_acquire); }

// No lock of ours is held across dlopen. dlopen takes the loader's lock, and
// a hook may first run inside a library constructor, where the loader's lock
// is already held: had a mutex of ours been held across dlopen by another
// thread, each would wait for the other. Instead every thread that finds the
// driver missing loads it itself (dlopen of an object already loaded only
// takes another reference), the first to finish publishes its RealDriver, and
// the others drop theirs (dlclose gives their reference back).
RealDriver* RealDriver::get() {
  if (RealDriver* driver = g_driver.load(std::memory_order_acquire)) return driver;
  if (g_load_failed.load(std::memory_order_relaxed) || t_loading) return nullptr;

  // Leaked on purpose once published: hooks may run during exit, after static
  // destructors.
  auto* driver = new RealDriver();
  bool ok = false;
  {
    struct Loading {
      Loading() { t_loading = true; }
      ~Loading() { t_loading = false; }
    } loading;
    ok = driver->load(process_config().driver_path.c_str());
  }
  if (!ok) {
    delete driver;
    g_load_failed.store(true, std::memory_order_relaxed);
    return g_driver.load(std::memory_order_acquire);  // another thread may have loaded it after all
  }
  RealDriver* expected = nullptr;
  if (!g_driver.compare_exchange_strong(expected, driver, std::memory_order_acq_rel, std::memory_order_acquire)) {
    dlclose(driver->handle_);
    delete driver;
    return expected;
  }
  return driver;
}

bool RealDriver::load(const char* path) {
  handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    VGPUMEM_LOG_ERROR("cannot load the CUDA driver '{}': {}", path, why ? why : "unknown error");
    return false;
  }
  for (std::size_t i = 0; i < kHookCount; ++i) {
    real_[i] = real_dlsym(handle_, hook_entry(i).symbol);
    if (real_[i] == nullptr) {
      VGPUMEM_LOG_DEBUG("driver '{}' does not export {}", path, hook_entry(i).symbol);
      continue;
    }
    by_address_[by_address_count_++] = {real_[i], i};
  }
  std::sort(by_address_, by_address_ + by_address_count_);

  support_.cuCtxGetDevice = reinterpret_cast<decltype(support_.cuCtxGetDevice)>(real_dlsym(handle_, "cuCtxGetDevice"));
  support_.cuDeviceGetCount = reinterpret_cast<decltype(support_.cuDeviceGetCount)>(real_dlsym(handle_, "cuDeviceGetCount"));
  support_.cuPointerGetAttribute =
      reinterpret_cast<decltype(support_.cuPointerGetAttribute)>(real_dlsym(handle_, "cuPointerGetAttribute"));
  support_.cuGetErrorName = reinterpret_cast<decltype(support_.cuGetErrorName)>(real_dlsym(handle_, "cuGetErrorName"));

  Dl_info info{};
  void* probe = real_dlsym(handle_, "cuInit");
  if (probe == nullptr || dladdr(probe, &info) == 0) {
    VGPUMEM_LOG_ERROR("'{}' is not a CUDA driver: it does not export cuInit", path);
    dlclose(handle_);
    handle_ = nullptr;
    return false;
  }
  object_base_ = info.dli_fbase;
  VGPUMEM_LOG_DEBUG("loaded CUDA driver {} ({} of {} hooked entry points present)", info.dli_fname,
                    by_address_count_, kHookCount);
  return true;
}

HookId RealDriver::hook_for_real_address(const void* address) const {
  const auto* end = by_address_ + by_address_count_;
  const auto* it = std::lower_bound(by_address_, end, address,
                                    [](const auto& item, const void* key) { return item.first < key; });
  if (it == end || it->first != address) return HookId::count_;
  return static_cast<HookId>(it->second);
}

bool RealDriver::owns(const void* address) const {
  Dl_info info{};
  return address != nullptr && dladdr(address, &info) != 0 && info.dli_fbase == object_base_;
}

CUresult missing_driver_result(HookId id) {
  // A missing driver looks like no driver at all to the caller; a missing ABI
  // variant (an older driver) is "not supported".
  return RealDriver::get_if_loaded() ? CUDA_ERROR_NOT_SUPPORTED
                                     : (static_cast<void>(id), CUDA_ERROR_NOT_INITIALIZED);
}

int current_device() {
  RealDriver* driver = RealDriver::get();
  if (driver == nullptr || driver->support().cuCtxGetDevice == nullptr) return -1;
  CUdevice device = -1;
  if (driver->support().cuCtxGetDevice(&device) != CUDA_SUCCESS) return -1;
  return device;
}

int device_of_pointer(std::uint64_t address) {
  RealDriver* driver = RealDriver::get();
  if (driver == nullptr || driver->support().cuPointerGetAttribute == nullptr) return -1;
  int ordinal = -1;
  if (driver->support().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                               static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS) {
    return -1;
  }
  return ordinal;
}

}  // namespace vgpumem::interpose
