// The words of a launch's arguments that may be device pointers.
//
// A kernel's parameter layout comes from cuFuncGetParamInfo (or
// cuKernelGetParamInfo: a CUkernel cast to CUfunction is refused by the
// former, docs/gpu-facts.md §8.4) once per function and is cached in a
// lock-free, insert-only table. Every 8-byte-aligned word of every parameter
// is a candidate, from `kernelParams` or from the packed `extra` buffer; the
// pager's granule index tells which of them are paged.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class LaunchArgs {
 public:
  static constexpr std::size_t kUnknownLayout = SIZE_MAX;

  explicit LaunchArgs(const DriverOps& driver) : driver_(driver) {}

  // Writes up to `capacity` candidate words of the launch to `words` and
  // returns how many there are in all (more than `capacity`: call again with
  // room for them), or kUnknownLayout when `kernelParams` is used and the
  // driver cannot describe the kernel.
  std::size_t scan(CUfunction function, void** params, void** extra, std::uint64_t* words, std::size_t capacity);

 private:
  static constexpr std::size_t kMaxParams = 256;
  struct Layout {
    std::uint32_t count = 0;  // UINT32_MAX: unknown
    std::uint32_t size[kMaxParams] = {};
  };
  struct Slot {
    std::atomic<CUfunction> key{nullptr};
    std::atomic<const Layout*> layout{nullptr};
  };
  static constexpr std::size_t kSlots = 8192;

  const Layout* cached(CUfunction function, Layout* scratch);
  void load(CUfunction function, Layout* layout) const;

  const DriverOps& driver_;
  Slot slots_[kSlots];
};

}  // namespace vgpumem::vmm
