#include "vmm/launch_args.h"

#include <cstring>

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

void LaunchArgs::load(CUfunction function, Layout* layout) const {
  layout->count = 0;
  bool as_kernel = false;
  for (std::size_t i = 0; i < kMaxParams; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult result = as_kernel ? driver_.kernel_param_info(reinterpret_cast<CUkernel>(function), i, &offset, &size)
                                : driver_.func_param_info(function, i, &offset, &size);
    if (result == CUDA_ERROR_INVALID_HANDLE && i == 0 && !as_kernel && driver_.kernel_param_info != nullptr) {
      as_kernel = true;  // a CUkernel passed as a CUfunction
      result = driver_.kernel_param_info(reinterpret_cast<CUkernel>(function), i, &offset, &size);
    }
    if (result == CUDA_ERROR_INVALID_VALUE) return;  // past the last parameter
    if (result != CUDA_SUCCESS) {
      layout->count = UINT32_MAX;
      return;
    }
    layout->size[layout->count++] = static_cast<std::uint32_t>(size);
  }
}

const LaunchArgs::Layout* LaunchArgs::cached(CUfunction function, Layout* scratch) {
  const std::size_t start = (reinterpret_cast<std::uintptr_t>(function) >> 4) % kSlots;
  for (std::size_t probe = 0; probe < 16; ++probe) {
    Slot& slot = slots_[(start + probe) % kSlots];
    CUfunction key = slot.key.load(std::memory_order_acquire);
    if (key == function) {
      if (const Layout* layout = slot.layout.load(std::memory_order_acquire)) return layout;
      break;  // another thread is loading it: load our own copy
    }
    if (key == nullptr && slot.key.compare_exchange_strong(key, function, std::memory_order_acq_rel)) {
      auto* layout = new Layout;  // once per kernel, kept for the process
      load(function, layout);
      slot.layout.store(layout, std::memory_order_release);
      return layout;
    }
    if (key == function) break;
  }
  load(function, scratch);  // table crowded here: uncached
  return scratch;
}

std::size_t LaunchArgs::scan(CUfunction function, void** params, void** extra, std::uint64_t* words,
                             std::size_t capacity) {
  std::size_t count = 0;
  if (params != nullptr) {
    Layout scratch;
    const Layout* layout = cached(function, &scratch);
    if (layout->count == UINT32_MAX) return kUnknownLayout;
    for (std::uint32_t i = 0; i < layout->count; ++i) {
      if (params[i] != nullptr) {
        take_words(static_cast<const unsigned char*>(params[i]), layout->size[i], words, capacity, &count);
      }
    }
    return count;
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
  if (buffer != nullptr) take_words(static_cast<const unsigned char*>(buffer), size, words, capacity, &count);
  return count;
}

}  // namespace vgpumem::vmm
