#include "vmm/stream_registry.h"

#include "vmm/context_scope.h"

namespace vgpumem::vmm {

std::uint64_t StreamRegistry::bit_for(CUstream stream, bool per_thread, CUcontext current) {
  if (stream == CU_STREAM_PER_THREAD || (stream == nullptr && per_thread)) {
    note_context(current);
    return kUnnamedBit;
  }
  if ((stream == nullptr || stream == CU_STREAM_LEGACY) && current == nullptr) return unnamed_other();
  const std::uintptr_t key = key_of(stream, current);
  for (unsigned i = 0; i < kNamed; ++i) {
    if (slots_[i].key.load(std::memory_order_acquire) == key) return std::uint64_t{1} << i;
  }
  CUcontext context = current;
  if (stream != nullptr && stream != CU_STREAM_LEGACY) {
    if (driver_.stream_get_context == nullptr || driver_.stream_get_context(stream, &context) != CUDA_SUCCESS) {
      return unnamed_other();  // not a stream the driver knows: nothing to record on
    }
  }
  return insert(key, stream == nullptr ? CU_STREAM_LEGACY : stream, context);
}

std::uint64_t StreamRegistry::insert(std::uintptr_t key, CUstream stream, CUcontext context) {
  note_context(context);
  const int device = device_of(context);
  std::lock_guard lock(mutex_);
  unsigned free_slot = kNamed;
  for (unsigned i = 0; i < kNamed; ++i) {
    const std::uintptr_t seen = slots_[i].key.load(std::memory_order_acquire);
    if (seen == key) return std::uint64_t{1} << i;  // another thread named it first
    if (seen == 0 && free_slot == kNamed) free_slot = i;
  }
  if (free_slot == kNamed) return unnamed_other();
  Slot& slot = slots_[free_slot];
  slot.stream = stream;
  slot.context = context;
  slot.device = device;
  slot.key.store(key, std::memory_order_release);
  return std::uint64_t{1} << free_slot;
}

StreamRegistry::Named StreamRegistry::named(unsigned bit) const {
  if (bit >= kNamed || slots_[bit].key.load(std::memory_order_acquire) == 0) return {};
  return Named{slots_[bit].stream, slots_[bit].context, slots_[bit].device};
}

void StreamRegistry::note_context(CUcontext context) {
  if (context == nullptr) return;
  const unsigned count = context_count_.load(std::memory_order_acquire);
  for (unsigned i = 0; i < count; ++i) {
    if (contexts_[i].context.load(std::memory_order_acquire) == context) return;
  }
  const int device = device_of(context);
  std::lock_guard lock(mutex_);
  const unsigned now = context_count_.load(std::memory_order_acquire);
  unsigned free_entry = kMaxContexts;
  for (unsigned i = 0; i < now; ++i) {
    const CUcontext seen = contexts_[i].context.load(std::memory_order_acquire);
    if (seen == context) return;
    if (seen == nullptr && free_entry == kMaxContexts) free_entry = i;
  }
  if (free_entry == kMaxContexts) {
    if (now == kMaxContexts) return;  // full: its work is still found by a synchronisation of the device's others
    free_entry = now;
    context_count_.store(now + 1, std::memory_order_release);
  }
  contexts_[free_entry].device = device;
  contexts_[free_entry].context.store(context, std::memory_order_release);
}

int StreamRegistry::device_of(CUcontext context) const {
  if (context == nullptr || driver_.context_get_device == nullptr) return -1;
  ContextScope in(driver_, context);
  CUdevice device = -1;
  return driver_.context_get_device(&device) == CUDA_SUCCESS ? device : -1;
}

std::uint64_t StreamRegistry::find(CUstream stream) const {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return 0;
  const auto key = reinterpret_cast<std::uintptr_t>(stream);
  for (unsigned i = 0; i < kNamed; ++i) {
    if (slots_[i].key.load(std::memory_order_acquire) == key) return std::uint64_t{1} << i;
  }
  return 0;
}

std::uint64_t StreamRegistry::retire_stream(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return 0;
  std::lock_guard lock(mutex_);
  const auto key = reinterpret_cast<std::uintptr_t>(stream);
  for (unsigned i = 0; i < kNamed; ++i) {
    if (slots_[i].key.load(std::memory_order_acquire) == key) {
      slots_[i].key.store(0, std::memory_order_release);
      return std::uint64_t{1} << i;
    }
  }
  return 0;
}

std::uint64_t StreamRegistry::retire_context(CUcontext context) {
  std::lock_guard lock(mutex_);
  std::uint64_t bits = 0;
  for (unsigned i = 0; i < kNamed; ++i) {
    if (slots_[i].key.load(std::memory_order_acquire) != 0 && slots_[i].context == context) {
      slots_[i].key.store(0, std::memory_order_release);
      bits |= std::uint64_t{1} << i;
    }
  }
  const unsigned count = context_count_.load(std::memory_order_acquire);
  for (unsigned i = 0; i < count; ++i) {
    CUcontext seen = context;
    contexts_[i].context.compare_exchange_strong(seen, nullptr, std::memory_order_acq_rel);
  }
  return bits;
}

}  // namespace vgpumem::vmm
