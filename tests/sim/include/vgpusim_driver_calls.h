/* C++ only: vgpusimThreadDriverCalls (vgpusim.h) as a value, for the
 * workloads and tests that count a thread's VMM and pinning calls and the
 * simulated time they took it: what a program's launch thread spends on
 * paging, as the driver sees it. */
#pragma once

#include "vgpusim.h"

namespace vgpusim {

struct DriverCalls {
  unsigned long long vmm = 0, pin = 0, ns = 0;

  static DriverCalls of_this_thread() {
    DriverCalls calls;
    vgpusimThreadDriverCalls(&calls.vmm, &calls.pin, &calls.ns);
    return calls;
  }
  DriverCalls since(const DriverCalls& before) const { return {vmm - before.vmm, pin - before.pin, ns - before.ns}; }
  DriverCalls& operator+=(const DriverCalls& other) {
    vmm += other.vmm;
    pin += other.pin;
    ns += other.ns;
    return *this;
  }
};

}  // namespace vgpusim
