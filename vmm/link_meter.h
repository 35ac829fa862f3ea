// The host link's rate in each direction, measured on the pager's own
// copies: a sample of offloads and fetches is timed by two events around
// the copy on its copy stream (the second copy stream's work and the waits
// ahead of a copy fall outside them), read once completed. The scheduler
// plans with it (PagerControl::link_bytes_per_ns): a PCIe 4 machine moves
// half what an H100's link does, a simulated link what it is set to.
//
// Guarded by the pager's lock, but for the rates, which any thread reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <cuda.h>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class LinkMeter {
 public:
  static constexpr int kToHost = 0, kToDevice = 1;

  explicit LinkMeter(const DriverOps& driver) : driver_(driver) {}
  ~LinkMeter();
  LinkMeter(const LinkMeter&) = delete;
  LinkMeter& operator=(const LinkMeter&) = delete;

  // Events to time the next copy in `direction` with, recorded by the
  // caller before and after it on its stream; false if this copy is not
  // sampled (or events cannot be had).
  bool begin(int direction, CUevent* before, CUevent* after);
  // (`context`: the events', current while they are read.)
  // The copy they bracket moved `bytes` (call after both are recorded);
  // `recorded` false: they were not, and go back.
  void end(int direction, CUcontext context, CUevent before, CUevent after, std::uint64_t bytes, bool recorded);
  // Reads the samples whose copies are done (never waits).
  void poll();

  // Bytes a nanosecond over the samples so far (the sum of bytes over the
  // sum of times, so large copies weigh most); 0 before any.
  double bytes_per_ns(int direction) const { return rate_[direction].load(std::memory_order_relaxed); }

 private:
  struct Sample {
    int direction;
    CUcontext context;
    CUevent before, after;
    std::uint64_t bytes;
  };
  static constexpr std::uint64_t kFirst = 32, kEvery = 64;  // the first copies each way, then one in kEvery
  static constexpr std::size_t kPending = 16;

  const DriverOps& driver_;
  std::uint64_t copies_[2] = {0, 0};
  double bytes_[2] = {0, 0}, ns_[2] = {0, 0};
  std::atomic<double> rate_[2] = {0.0, 0.0};
  std::vector<Sample> pending_;
};

}  // namespace vgpumem::vmm
