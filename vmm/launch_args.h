// The words of a launch's arguments that may be device pointers, and what
// the shim knows of each kernel.
//
// A kernel's parameter layout comes from cuFuncGetParamInfo (or
// cuKernelGetParamInfo: a CUkernel cast to CUfunction is refused by the
// former, docs/gpu-facts.md §8.4) once per function and is cached in a
// lock-free, insert-only table, with the kernel's name and two audit
// counters. Every 8-byte-aligned word of every parameter is a candidate,
// from `kernelParams` or from the packed `extra` buffer; the pager's granule
// index tells which of them are paged. A layout read before a module was
// unloaded is read again (the function's handle may now be another's).
#pragma once

#include <atomic>
#include <mutex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vmm/driver_ops.h"

// Note [Launch words]
// ~~~~~~~~~~~~~~~~~~~
// The candidate pointer words of a launch: every
// 8-byte-aligned word of every parameter, with the layout from
// `cuFuncGetParamInfo` (or `cuKernelGetParamInfo` when a `CUkernel` is passed
// as a `CUfunction`, gpu-facts §8.4), cached per function in a lock-free
// insert-only table; or every word of the packed `extra` buffer.

namespace vgpumem::vmm {

class LaunchArgs {
 public:
  // One kernel, kept for the process.
  struct Kernel {
    bool readable = false;  // the driver described its parameters
    std::uint32_t generation = 0;       // module unloads seen when it was read
    std::vector<std::uint32_t> sizes;   // each parameter's bytes
    std::string name;                   // as the driver names it, or its handle
    // Launches that named no paged memory (with paging on: a kernel that
    // reaches paged memory only through pointers no hook sees shows here).
    std::atomic<std::uint64_t> without_paged_words{0};
    // Launches whose parameters could not be read (handled conservatively:
    // everything paged on the device is made resident for them).
    std::atomic<std::uint64_t> unscannable{0};
  };
  struct Scan {
    Kernel* kernel = nullptr;  // null only for a packed `extra` launch the table had no room for
    std::size_t count = 0;     // candidate words in all (more than the capacity: call again with room)
    bool readable = true;      // false: `kernelParams` used and the driver cannot describe the kernel
  };

  explicit LaunchArgs(const DriverOps& driver) : driver_(driver) {}
  ~LaunchArgs();
  LaunchArgs(const LaunchArgs&) = delete;
  LaunchArgs& operator=(const LaunchArgs&) = delete;

  // Writes up to `capacity` candidate words of the launch to `words`.
  Scan scan(CUfunction function, void** params, void** extra, std::uint64_t* words, std::size_t capacity);
  // cuModuleUnload or cuLibraryUnload: every layout is checked again on its
  // next launch.
  void module_unloaded() { generation_.fetch_add(1, std::memory_order_acq_rel); }
  // {"<kernel name>": {"launches_without_paged_words": n, "unscannable_launches": m}, ...}
  // for each kernel with a count. No driver call (it runs at exit).
  nlohmann::json audit() const;

 private:
  static constexpr std::size_t kMaxParams = 32764;  // CUDA's limit on parameter bytes; at least one byte each
  struct Slot {
    std::atomic<CUfunction> key{nullptr};
    std::atomic<Kernel*> kernel{nullptr};
  };
  static constexpr std::size_t kSlots = 8192;

  Kernel* cached(CUfunction function);
  Kernel* load(CUfunction function) const;

  const DriverOps& driver_;
  std::atomic<std::uint32_t> generation_{0};
  Slot slots_[kSlots];
  std::mutex replaced_mutex_;
  std::vector<Kernel*> replaced_;  // records a re-read replaced: launches may still be reading them
};

}  // namespace vgpumem::vmm
