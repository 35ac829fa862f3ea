// A driver that does nothing, as fast as possible: the baseline the launch
// hook is measured against (bench/launch_hook_bench.cpp). Only what the shim
// needs to load it (cuInit, cuGetProcAddress_v2) and what is measured.
#include <cuda.h>

#define NULL_EXPORT extern "C" __attribute__((visibility("default")))

NULL_EXPORT CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
NULL_EXPORT CUresult cuGetProcAddress_v2(const char*, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult*) {
  if (pfn) *pfn = nullptr;
  return CUDA_SUCCESS;
}
NULL_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
