#include "vmm/launch_args.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "vmm/kernel_name.h"

namespace vgpumem::vmm {
namespace {

void take_words(const unsigned char* bytes, std::size_t size, std::uint64_t* words, std::size_t capacity,
                std::size_t* count) {
  for (std::size_t at = 0; at + sizeof(std::uint64_t) <= size; at += sizeof(std::uint64_t)) {
    if (*count < capacity) std::memcpy(&words[*count], bytes + at, sizeof(std::uint64_t));
    ++*count;
  }
}

}  // namespace

// The shim's own never goes (it is leaked with the runtime); a test's does.
LaunchArgs::~LaunchArgs() {
  for (Slot& slot : slots_) delete slot.kernel.load(std::memory_order_acquire);
  for (Kernel* kernel : replaced_) delete kernel;
}

// Once per kernel (and again after a module unload), off the steady path.
LaunchArgs::Kernel* LaunchArgs::load(CUfunction function) const {
  auto* kernel = new Kernel;  // kept for the process: launches on other threads may be reading it
  kernel->generation = generation_.load(std::memory_order_acquire);
  bool as_kernel = false;
  kernel->readable = true;
  for (std::size_t i = 0; i < kMaxParams; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult result = as_kernel ? driver_.kernel_param_info(reinterpret_cast<CUkernel>(function), i, &offset, &size)
                                : driver_.func_param_info(function, i, &offset, &size);
    if (result == CUDA_ERROR_INVALID_HANDLE && i == 0 && !as_kernel && driver_.kernel_param_info != nullptr) {
      as_kernel = true;  // a CUkernel passed as a CUfunction
      result = driver_.kernel_param_info(reinterpret_cast<CUkernel>(function), i, &offset, &size);
    }
    if (result == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    if (result != CUDA_SUCCESS) {
      kernel->readable = false;
      kernel->sizes.clear();
      break;
    }
    kernel->sizes.push_back(static_cast<std::uint32_t>(size));
  }
  kernel->name = kernel_name(driver_, function);
  return kernel;
}

LaunchArgs::Kernel* LaunchArgs::cached(CUfunction function) {
  const std::size_t start = (reinterpret_cast<std::uintptr_t>(function) >> 4) % kSlots;
  for (std::size_t probe = 0; probe < 16; ++probe) {
    Slot& slot = slots_[(start + probe) % kSlots];
    CUfunction key = slot.key.load(std::memory_order_acquire);
    if (key == nullptr && slot.key.compare_exchange_strong(key, function, std::memory_order_acq_rel)) {
      Kernel* kernel = load(function);
      slot.kernel.store(kernel, std::memory_order_release);
      return kernel;
    }
    if (key != function) continue;
    Kernel* kernel = slot.kernel.load(std::memory_order_acquire);
    if (kernel == nullptr) return nullptr;  // another thread is loading it
    if (kernel->generation == generation_.load(std::memory_order_acquire)) return kernel;
    // A module was unloaded since: the handle may name another kernel now.
    Kernel* fresh = load(function);
    if (slot.kernel.compare_exchange_strong(kernel, fresh, std::memory_order_acq_rel)) {
      std::lock_guard lock(replaced_mutex_);
      replaced_.push_back(kernel);
      return fresh;
    }
    delete fresh;  // another thread replaced it first
    return kernel;
  }
  return nullptr;  // the table is crowded here
}

LaunchArgs::Scan LaunchArgs::scan(CUfunction function, void** params, void** extra, std::uint64_t* words,
                                  std::size_t capacity) {
  Scan scan;
  scan.kernel = cached(function);
  if (params != nullptr) {
    // Not in the table (crowded, or being loaded by another thread): read
    // for this launch alone, the rare slow way.
    Kernel* once = scan.kernel == nullptr ? load(function) : nullptr;
    const Kernel& kernel = once != nullptr ? *once : *scan.kernel;
    scan.readable = kernel.readable;
    for (std::size_t i = 0; scan.readable && i < kernel.sizes.size(); ++i) {
      if (params[i] != nullptr) {
        take_words(static_cast<const unsigned char*>(params[i]), kernel.sizes[i], words, capacity, &scan.count);
      }
    }
    delete once;
    return scan;
  }
  // The packed form: {CU_LAUNCH_PARAM_BUFFER_POINTER, p, CU_LAUNCH_PARAM_BUFFER_SIZE, &n, CU_LAUNCH_PARAM_END}.
  const void* buffer = nullptr;
  std::size_t size = 0;
  for (std::size_t i = 0; extra != nullptr && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      std::memcpy(&size, extra[i + 1], sizeof size);
    }
  }
  if (buffer != nullptr) take_words(static_cast<const unsigned char*>(buffer), size, words, capacity, &scan.count);
  return scan;
}

nlohmann::json LaunchArgs::audit() const {
  nlohmann::json kernels = nlohmann::json::object();
  for (const Slot& slot : slots_) {
    const Kernel* kernel = slot.kernel.load(std::memory_order_acquire);
    if (kernel == nullptr) continue;
    const std::uint64_t without = kernel->without_paged_words.load(std::memory_order_relaxed);
    const std::uint64_t unscannable = kernel->unscannable.load(std::memory_order_relaxed);
    if (without == 0 && unscannable == 0) continue;
    nlohmann::json& entry = kernels[kernel->name];  // one name may have several handles: summed
    if (!entry.is_object()) entry = nlohmann::json::object();
    entry["launches_without_paged_words"] = entry.value("launches_without_paged_words", std::uint64_t{0}) + without;
    entry["unscannable_launches"] = entry.value("unscannable_launches", std::uint64_t{0}) + unscannable;
  }
  return kernels;
}

}  // namespace vgpumem::vmm
