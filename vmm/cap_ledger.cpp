#include "vmm/cap_ledger.h"

#include <thread>

#include "vmm/atomic_max.h"

namespace vgpumem::vmm {

CapLedger::CapLedger(std::function<std::uint64_t(int)> cap_for) : cap_for_(std::move(cap_for)) {}

CapLedger::Slot* CapLedger::slot(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  return &slots_[static_cast<std::size_t>(device)];
}

std::uint64_t CapLedger::resolve_cap(Slot& s, int device) {
  int state = s.cap_state.load(std::memory_order_acquire);
  if (state == 2) return s.cap.load(std::memory_order_relaxed);
  int expected = 0;
  if (s.cap_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    s.cap.store(cap_for_(device), std::memory_order_relaxed);
    s.cap_state.store(2, std::memory_order_release);
  } else {
    // Another thread is asking the driver for the device size: a one-off wait.
    while (s.cap_state.load(std::memory_order_acquire) != 2) std::this_thread::yield();
  }
  return s.cap.load(std::memory_order_relaxed);
}

void CapLedger::raise_peak(Slot& s, std::uint64_t counted) { raise_to(s.peak, counted); }

bool CapLedger::charge(int device, std::uint64_t bytes) {
  Slot* s = slot(device);
  if (s == nullptr) return false;
  const std::uint64_t cap = resolve_cap(*s, device);
  std::uint64_t counted = s->counted.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    if (bytes > cap || counted > cap - bytes) return false;
    next = counted + bytes;
  } while (!s->counted.compare_exchange_weak(counted, next, std::memory_order_acq_rel));
  raise_peak(*s, next);
  return true;
}

bool CapLedger::charge_unconditionally(int device, std::uint64_t bytes) {
  Slot* s = slot(device);
  if (s == nullptr) return false;
  const std::uint64_t cap = resolve_cap(*s, device);
  const std::uint64_t next = s->counted.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
  raise_peak(*s, next);
  return next <= cap;
}

void CapLedger::refund(int device, std::uint64_t bytes) {
  if (Slot* s = slot(device)) s->counted.fetch_sub(bytes, std::memory_order_acq_rel);
}

DeviceUsage CapLedger::usage(int device) {
  Slot* s = slot(device);
  if (s == nullptr) return {0, 0, kUncapped};
  const std::uint64_t cap = resolve_cap(*s, device);
  return {s->counted.load(std::memory_order_acquire), s->peak.load(std::memory_order_relaxed), cap};
}

std::uint64_t CapLedger::cap(int device) {
  Slot* s = slot(device);
  return s ? resolve_cap(*s, device) : kUncapped;
}

bool CapLedger::seen(int device) const {
  if (device < 0 || device >= kMaxDevices) return false;
  return slots_[static_cast<std::size_t>(device)].cap_state.load(std::memory_order_acquire) == 2;
}

}  // namespace vgpumem::vmm
