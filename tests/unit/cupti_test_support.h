// What the tests of CUPTI timing share (kernel_times_test.cpp,
// step_times_test.cpp): KernelTimes over the simulated CUPTI with a few small
// buffers (the tests time a handful of kernels), and kernels of a given
// simulated duration.
#pragma once

#include <cuda.h>

#include "tests/sim/cupti/simulated_cupti_options.h"
#include "vgpusim.h"

inline vgpumem::cupti::KernelTimesOptions test_cupti_options() {
  vgpumem::cupti::KernelTimesOptions options = simulated_cupti_options(VGPUMEM_TEST_SIM_CUPTI);
  options.buffer_count = 4;
  options.buffer_bytes = 64 * 1024;
  return options;
}

inline void empty_kernel(void**, const vgpusimLaunch*, void*) {}

// A kernel that takes `duration_ns` on the simulated clock, registered once
// per process under `name` (a later test finds the earlier registration).
inline CUfunction simulated_kernel(const char* name, double duration_ns) {
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = empty_kernel;
  desc.durationNs = duration_ns;
  CUfunction function = nullptr;
  if (vgpusimRegisterKernel(&desc, &function) != CUDA_SUCCESS) {
    CUmodule module = nullptr;
    cuModuleLoadData(&module, VGPUSIM_MODULE_IMAGE);
    cuModuleGetFunction(&function, module, name);  // registered by an earlier test
  }
  return function;
}
