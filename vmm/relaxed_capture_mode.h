// While a stream capture is open anywhere in the process, the pager's own
// driver calls run in relaxed capture mode: in the default (global) mode a
// query, synchronisation or host allocation from any thread invalidates the
// program's capture (docs/gpu-facts.md §8.9). cuCtxSynchronize stays
// forbidden in every mode; the pager avoids it while a capture is open.
#pragma once

#include <cuda.h>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode(const DriverOps& driver, bool needed) : driver_(driver) {
    if (!needed || driver.exchange_capture_mode == nullptr) return;
    saved_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    active_ = driver.exchange_capture_mode(&saved_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (active_) driver_.exchange_capture_mode(&saved_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const DriverOps& driver_;
  CUstreamCaptureMode saved_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
  bool active_ = false;
};

}  // namespace vgpumem::vmm
