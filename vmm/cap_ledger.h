// Per-device accounting of device memory against the cap.
//
// charge() is a compare-and-swap on the device's counter, so concurrent
// allocations from many threads can never together exceed the cap: each one
// reserves its bytes before the real allocation is made and gives them back
// if that fails.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>

namespace vgpumem::vmm {

inline constexpr int kMaxDevices = 64;
inline constexpr std::uint64_t kUncapped = UINT64_MAX;

struct DeviceUsage {
  std::uint64_t counted;  // bytes charged now
  std::uint64_t peak;     // most bytes charged at once
  std::uint64_t cap;      // kUncapped when no cap applies
};

class CapLedger {
 public:
  // `cap_for(device)` gives the cap in bytes (kUncapped for none); it is asked
  // once per device, on that device's first charge or query.
  explicit CapLedger(std::function<std::uint64_t(int)> cap_for);

  // Reserves `bytes` on `device`; false if that would exceed its cap. Devices
  // outside [0, kMaxDevices) are refused.
  bool charge(int device, std::uint64_t bytes);
  // Charges even beyond the cap (memory that already exists, e.g. found after
  // the fact); returns false if the cap is now exceeded.
  bool charge_unconditionally(int device, std::uint64_t bytes);
  void refund(int device, std::uint64_t bytes);

  DeviceUsage usage(int device);
  std::uint64_t cap(int device);
  // Devices that were ever charged or queried.
  bool seen(int device) const;

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> counted{0};
    std::atomic<std::uint64_t> peak{0};
    std::atomic<std::uint64_t> cap{0};
    std::atomic<int> cap_state{0};  // 0 unknown, 1 resolving, 2 known
  };
  Slot* slot(int device);
  std::uint64_t resolve_cap(Slot& slot, int device);
  static void raise_peak(Slot& slot, std::uint64_t counted);

  std::function<std::uint64_t(int)> cap_for_;
  std::array<Slot, kMaxDevices> slots_;
};

}  // namespace vgpumem::vmm
