// Internal state of the simulated driver. One process-wide Simulator holds
// devices, contexts, memory regions, kernels and counters; every exported
// entry point (exports_*.cpp) is a thin function over it.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vgpusim.h"

// cuda.h maps legacy names onto their newest variant; the simulator defines
// every variant by its exact exported name.
#undef cuGetProcAddress
#undef cuMemAlloc
#undef cuMemAllocPitch
#undef cuMemFree
#undef cuEventElapsedTime

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpusim {

inline constexpr std::uint64_t kGranularity = 2ull << 20;  // as on H100 (docs/gpu-facts.md)

struct Device {
  std::uint64_t memory_bytes = 16ull << 30;
  std::uint64_t physical_now = 0;
  std::uint64_t physical_peak = 0;
};

struct Context {
  int device = 0;
  CUresult sticky = CUDA_SUCCESS;  // set by an illegal access; every later call on the context returns it
  bool primary = false;
};

// A physical allocation (what cuMemCreate returns a handle to). Backed by a
// memfd so one handle can be mapped at several addresses, like device memory.
struct Physical {
  int device = 0;
  std::uint64_t size = 0;
  int fd = -1;
  int handle_refs = 1;  // the handle itself (create, retain)
  int mappings = 0;
  bool host_location = false;
};

// A range of simulated device address space: a reservation
// (cuMemAddressReserve) or an allocation made by cuMemAlloc & co., which the
// simulator implements as reserve + create + map + set access.
struct Region {
  std::uint64_t base = 0;
  std::uint64_t size = 0;
  int device = 0;
  enum class Kind { reservation, allocation, managed, pool } kind = Kind::reservation;
  std::uint64_t physical = 0;  // handle owned by an allocation
  // Mappings within a reservation: offset -> (size, handle, accessible)
  struct Mapping {
    std::uint64_t size;
    std::uint64_t handle;
    bool accessible;
  };
  std::map<std::uint64_t, Mapping> mappings;

  // True if [offset, offset + length) is exactly a run of whole mappings: the
  // only ranges cuMemSetAccess and cuMemUnmap accept.
  bool covered_by_whole_mappings(std::uint64_t offset, std::uint64_t length) const {
    for (std::uint64_t at = offset; at < offset + length;) {
      auto it = mappings.find(at);
      if (it == mappings.end() || at + it->second.size > offset + length) return false;
      at += it->second.size;
    }
    return true;
  }
};

struct Kernel {
  std::string name;
  vgpusimKernelDesc desc{};
  std::vector<std::size_t> sizes, offsets;
  std::size_t arg_bytes = 0;
};

struct Stats {
  std::map<std::string, std::uint64_t> calls;
  std::uint64_t kernels = 0, bytes_h2d = 0, bytes_d2h = 0, illegal = 0;
  std::uint64_t pinned_now = 0, pinned_peak = 0;
  std::vector<std::string> illegal_events;  // JSON objects
  std::vector<std::string> faults_injected;
  double sim_time_ns = 0;
};

class Simulator {
 public:
  static Simulator& get();

  std::mutex mutex;
  bool initialised = false;
  std::vector<Device> devices;
  std::map<CUcontext, Context> contexts;
  std::vector<CUcontext> primary;  // per device
  std::map<std::uint64_t, Region> regions;           // by base address
  std::map<std::uint64_t, Physical> physical;        // by handle
  std::uint64_t next_handle = 1;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::map<std::uint64_t, std::uint64_t> host_allocations;  // pointer -> bytes (pinned)
  Stats stats;
  double link_gbps = 55, device_copy_gbps = 1000;  // 55 GB/s per direction: measured on the H100 (docs/gpu-facts.md)

  // Count a call by its exported name (for the report). Takes its own lock:
  // entry points count before (or while) holding `mutex`.
  void count(const char* api);
  std::mutex calls_mutex;
  // Fault injection: true if this call of `operation` must fail.
  bool inject_fault(const std::string& operation);

  // Device memory accounting; false if the device is full.
  bool charge(int device, std::uint64_t bytes);
  void refund(int device, std::uint64_t bytes);

  // The region containing [address, address + size), or nullptr.
  Region* region_of(std::uint64_t address, std::uint64_t size = 1);
  // True if every byte of [address, address + size) is mapped and accessible.
  bool accessible(std::uint64_t address, std::uint64_t size);

  void write_report(const char* path);

  struct FaultRule {
    std::uint64_t nth;
    bool and_later;
    std::uint64_t seen = 0;
  };
  std::map<std::string, FaultRule> faults;
};

// The calling thread's context state (nullptr if none).
Context* current_context(Simulator& sim);
CUcontext current_handle();
void set_current(CUcontext context);

// Common checks at the top of an entry point: initialised, context present,
// no sticky error.
CUresult check_context(Simulator& sim, Context** out = nullptr);

std::uint64_t round_up(std::uint64_t value, std::uint64_t to);

// Reserve address space (never reused, so stale pointers fault).
std::uint64_t reserve_address_space(std::uint64_t size, std::uint64_t alignment);
// Make [address, address+size) inaccessible again.
void protect_none(std::uint64_t address, std::uint64_t size);

// Implemented in memory.cpp, used by several export files.
CUresult allocate_device(CUdeviceptr* out, std::uint64_t bytes, Region::Kind kind, const char* fault_name);
CUresult free_device(CUdeviceptr address);

// Runs a kernel body, turning a touch of inaccessible device memory into a
// sticky CUDA_ERROR_ILLEGAL_ADDRESS on `context` (kernels.cpp).
CUresult run_kernel(Kernel& kernel, void** params, const vgpusimLaunch& launch, CUcontext context);
CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, CUstream stream, void** params, void** extra);

CUresult copy(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, bool dst_device, bool src_device);
CUresult fill(std::uint64_t dst, std::uint64_t value, unsigned element, std::uint64_t count);

}  // namespace vgpusim
