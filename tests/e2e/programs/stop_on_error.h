// For the e2e probe programs: CHECK(call) prints "CUDA_ERROR <name> at <call>"
// and exits with status 3 when a driver call fails.
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
