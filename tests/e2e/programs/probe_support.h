// For the e2e probe programs: CHECK(call) prints "CUDA_ERROR <name> at <call>"
// and exits with status 3 when a driver call fails; use_primary_context()
// makes device 0's primary context current, as the CUDA runtime would.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

inline void stop_on_error(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(result, &name);
  std::printf("CUDA_ERROR %s at %s\n", name ? name : "?", what);
  std::exit(3);
}
#define CHECK(call) stop_on_error((call), #call)

inline CUcontext use_primary_context() {
  CHECK(cuInit(0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, 0));
  CHECK(cuCtxSetCurrent(context));
  return context;
}
