// Allocates three 4 MiB buffers, one after another; the shim is run with
// VGPUMEMTEST_FAIL_ALLOCATIONS=cuMemAlloc_v2#2, so every allocation the shim
// itself makes during the second call fails (interpose/fault_injection.cpp).
// That call must come back as CUDA_ERROR_OUT_OF_MEMORY -- not as an
// exception unwinding into this program's frames -- and the process must go
// on working: the first and third buffers keep what was written to them.
//
// Prints "boundary second <result>" then "boundary ok"; a CUDA error exits 3.
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "probe_support.h"

int main() {
  constexpr std::size_t kBytes = 4u << 20, kInts = kBytes / 4;
  use_primary_context();
  CUdeviceptr first = 0, second = 0, third = 0;
  CHECK(cuMemAlloc(&first, kBytes));
  const CUresult result = cuMemAlloc(&second, kBytes);
  std::printf("boundary second %d\n", static_cast<int>(result));
  CHECK(cuMemAlloc(&third, kBytes));
  CHECK(cuMemsetD32(first, 1u, kInts));
  CHECK(cuMemsetD32(third, 3u, kInts));
  std::vector<unsigned> back(kInts);
  for (auto [buffer, value] : {std::pair{first, 1u}, std::pair{third, 3u}}) {
    CHECK(cuMemcpyDtoH(back.data(), buffer, kBytes));
    for (unsigned v : back) {
      if (v != value) {
        std::printf("boundary lost data\n");
        return 4;
      }
    }
    CHECK(cuMemFree(buffer));
  }
  if (result == CUDA_SUCCESS) CHECK(cuMemFree(second));
  std::printf("boundary ok\n");
  return 0;
}
