#include "vmm/accounting.h"

#include <nlohmann/json.hpp>

#include "common/format_bytes.h"
#include "common/log.h"
#include "vmm/atomic_max.h"

namespace vgpumem::vmm {

Accounting::Accounting(std::function<std::uint64_t(int)> cap_for, MemoryObserver& observer)
    : ledger_(std::move(cap_for)), observer_(observer) {}

void Accounting::trace_counter(int device) {
  const DeviceUsage now = ledger_.usage(device);
  observer_.device_bytes(device, now.counted, now.cap);
}

bool Accounting::reserve(int device, std::uint64_t bytes, const char* api) {
  if (ledger_.charge(device, bytes)) return true;
  ooms_.fetch_add(1, std::memory_order_relaxed);
  const DeviceUsage now = ledger_.usage(device);
  observer_.refused(device, bytes, now.counted, now.cap, api);
  // Frameworks free their caches and retry on OOM, so this is routine: info,
  // not a warning. The summary counts them.
  VGPUMEM_LOG_INFO("{} of {} on device {} refused: {} of the {} cap in use", api, format_bytes(bytes), device,
                   format_bytes(now.counted), format_bytes(now.cap));
  return false;
}

void Accounting::abandon(int device, std::uint64_t bytes) { ledger_.refund(device, bytes); }

void Accounting::commit(AllocationKind kind, std::uint64_t key, int device, std::uint64_t bytes, const char* api) {
  registry_.insert(kind, key, Allocation{device, bytes, 1, true});
  observer_.allocated(device, key, bytes, api);
  trace_counter(device);
}

bool Accounting::adopt(AllocationKind kind, std::uint64_t key, int device, std::uint64_t bytes, const char* api) {
  if (!ledger_.charge_unconditionally(device, bytes)) {
    ledger_.refund(device, bytes);
    ooms_.fetch_add(1, std::memory_order_relaxed);
    const DeviceUsage now = ledger_.usage(device);
    observer_.refused(device, bytes, now.counted, now.cap, api);
    return false;
  }
  commit(kind, key, device, bytes, api);
  return true;
}

bool Accounting::grow(AllocationKind kind, std::uint64_t key, std::uint64_t extra, const char* api) {
  std::optional<Allocation> current = registry_.find(kind, key);
  if (!current) return false;
  if (!reserve(current->device, extra, api)) return false;
  current->bytes += extra;
  registry_.insert(kind, key, *current);
  trace_counter(current->device);
  return true;
}

void Accounting::commit_host(std::uint64_t key, std::uint64_t bytes, const char* api) {
  registry_.insert(AllocationKind::host, key, Allocation{-1, bytes, 1, false});
  const std::uint64_t now = host_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  raise_to(host_bytes_peak_, now);
  observer_.allocated(-1, key, bytes, api);
}

std::optional<Allocation> Accounting::forget(AllocationKind kind, std::uint64_t key, const char* api) {
  std::optional<Allocation> gone = registry_.remove(kind, key);
  if (!gone) return gone;
  observer_.freed(gone->device, key, gone->bytes, api);
  if (kind == AllocationKind::host) {
    host_bytes_.fetch_sub(gone->bytes, std::memory_order_relaxed);
  } else if (gone->counted) {
    ledger_.refund(gone->device, gone->bytes);
    trace_counter(gone->device);
  }
  return gone;
}

bool Accounting::retain(AllocationKind kind, std::uint64_t key) { return registry_.retain(kind, key); }

std::optional<Allocation> Accounting::release(AllocationKind kind, std::uint64_t key, const char* api) {
  std::optional<Allocation> gone = registry_.release(kind, key);
  if (!gone) return gone;
  observer_.freed(gone->device, key, gone->bytes, api);
  if (gone->counted) {
    ledger_.refund(gone->device, gone->bytes);
    trace_counter(gone->device);
  }
  return gone;
}

std::optional<Allocation> Accounting::find(AllocationKind kind, std::uint64_t key) const {
  return registry_.find(kind, key);
}

nlohmann::json Accounting::summary() const {
  auto& ledger = const_cast<CapLedger&>(ledger_);
  nlohmann::json devices = nlohmann::json::array();
  // The ledger's own peaks: the recorder's are read off its counter events,
  // which the pager's chunks (charged to the ledger directly) never make,
  // so under paging they came out empty (an H200 trace showed {}).
  nlohmann::json peaks = nlohmann::json::object();
  for (int device = 0; device < kMaxDevices; ++device) {
    if (!ledger.seen(device)) continue;
    const DeviceUsage u = ledger.usage(device);
    devices.push_back({{"device", device},
                       {"cap", u.cap == kUncapped ? nlohmann::json(nullptr) : nlohmann::json(u.cap)},
                       {"counted_at_exit", u.counted},
                       {"peak", u.peak}});
    if (u.peak != 0) peaks[std::to_string(device)] = u.peak;
  }
  return {{"devices", devices},
          {"peak_counted_bytes", peaks},
          {"ooms_returned", ooms_.load(std::memory_order_relaxed)},
          {"host_bytes_peak", host_bytes_peak_.load(std::memory_order_relaxed)},
          {"live_allocations_at_exit", registry_.size()}};
}

}  // namespace vgpumem::vmm
