// Device work in the right context: a scope that makes `context` current
// for the calling thread (pushed) and restores the thread's own (popped),
// and nothing at all when it is current already. The pager's work on device
// D runs in D's context whatever the program's thread has current; an event
// is recorded on a program stream in that stream's own context (the driver
// refuses an event and a stream of different contexts).
#pragma once

#include <cuda.h>

#include "vmm/driver_ops.h"

// Note [The pager's context]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The pager's device work for device *D* runs in *D*'s
// primary context (its copy stream, events and chunks live there), pushed
// and popped around each operation, whatever the program's thread has
// current.

namespace vgpumem::vmm {

class ContextScope {
 public:
  ContextScope(const DriverOps& driver, CUcontext context) : driver_(driver) {
    if (context == nullptr || driver.context_push == nullptr || driver.context_pop == nullptr) return;
    CUcontext current = nullptr;
    if (driver.context_get_current != nullptr && driver.context_get_current(&current) == CUDA_SUCCESS &&
        current == context) {
      return;
    }
    pushed_ = driver.context_push(context) == CUDA_SUCCESS;
  }
  ~ContextScope() {
    CUcontext popped = nullptr;
    if (pushed_) driver_.context_pop(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const DriverOps& driver_;
  bool pushed_ = false;
};

}  // namespace vgpumem::vmm
