// What a simulated kernel body of the workloads reads its parameters with:
// params[i] points at parameter i's bytes (vgpusim.h), copied out whole so
// that no alignment is assumed.
#pragma once

#include <cuda.h>

#include <cstring>

namespace workload {

template <typename T>
T arg(void** params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof(T));
  return value;
}

// A device pointer parameter, as the host pointer the simulator maps it at.
template <typename T>
T* ptr(void** params, int i) {
  return reinterpret_cast<T*>(arg<CUdeviceptr>(params, i));
}

}  // namespace workload
