// Trace recorder: what the shim did, kept in memory and written at exit as a
// Chrome trace-event JSON (opens in Perfetto / chrome://tracing) with a
// summary object.
//
// The launch path calls record_launch(): it appends to a buffer owned by the
// calling thread (allocated once per thread, on its first event), takes no
// global lock and allocates nothing after that. Everything else (allocations,
// frees, OOMs, look-ups) is rare and may lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "vmm/memory_observer.h"

namespace vgpumem::trace {

// Nanoseconds on CLOCK_MONOTONIC; trace timestamps are relative to recorder start.
std::uint64_t now_ns();

enum class LookupPath : std::uint8_t { exported_symbol, dlsym, get_proc_address, get_proc_address_v2 };

class Recorder final : public vmm::MemoryObserver {
 public:
  explicit Recorder(std::uint64_t max_events);
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Hot path. `entry_point` is the exported name of the hook (static storage).
  void record_launch(const char* entry_point, const void* function, const void* stream);

  void record_alloc(int device, std::uint64_t address, std::uint64_t bytes, const char* api);
  void record_free(int device, std::uint64_t address, std::uint64_t bytes, const char* api);
  void record_oom(int device, std::uint64_t requested, std::uint64_t in_use, std::uint64_t cap,
                  const char* api);
  // Device-memory counter: bytes counted against the cap on `device`.
  void record_device_bytes(int device, std::uint64_t bytes, std::uint64_t cap);
  // Paging: a unit moved to the host (`to_host`) or back. Written as an async
  // slice "on host" per unit (id = its address), so each allocation's time
  // away from the device is a span in Perfetto.
  void record_residency(int device, std::uint64_t address, std::uint64_t bytes, bool to_host);
  // Paging: bytes resident on `device` against its cap (a counter track).
  void record_resident_bytes(int device, std::uint64_t bytes, std::uint64_t cap);
  // A look-up of a driver entry point by name; `hooked` tells whether the caller got our hook.
  void record_lookup(LookupPath path, std::string_view name, int version, std::uint64_t flags,
                     bool hooked);

  // What the memory manager reports, written down as the records above.
  void allocated(int device, std::uint64_t address, std::uint64_t bytes, const char* api) override {
    record_alloc(device, address, bytes, api);
  }
  void freed(int device, std::uint64_t address, std::uint64_t bytes, const char* api) override {
    record_free(device, address, bytes, api);
  }
  void refused(int device, std::uint64_t requested, std::uint64_t in_use, std::uint64_t cap,
               const char* api) override {
    record_oom(device, requested, in_use, cap, api);
  }
  void device_bytes(int device, std::uint64_t bytes, std::uint64_t cap) override {
    record_device_bytes(device, bytes, cap);
  }
  void moved(int device, std::uint64_t address, std::uint64_t bytes, bool to_host) override {
    record_residency(device, address, bytes, to_host);
  }
  void resident_bytes(int device, std::uint64_t bytes, std::uint64_t cap) override {
    record_resident_bytes(device, bytes, cap);
  }

  // Builds the full document: {"traceEvents": [...], "displayTimeUnit": "ns",
  // "vgpumem": summary}. `summary_extra` is merged into the summary object.
  nlohmann::json to_json(const nlohmann::json& summary_extra) const;
  // Writes to_json() to `path` atomically (temp file + rename). Returns false
  // and fills `error` on failure.
  bool write(const std::string& path, const nlohmann::json& summary_extra, std::string* error) const;

  // In a child after fork(): forget the parent's events.
  void reset_after_fork();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace vgpumem::trace
