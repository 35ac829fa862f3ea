// Allocations from memory pools under paging (run with two devices).
//
// Six 4 MiB buffers come from the default pool and from a pool the program
// made, on a stream; then one from an exportable pool and one from a pool
// device 1 may access, which paged memory could not honour. Kernels and
// memsets run over all of them, and every buffer is checked. One paged and
// the two unpaged buffers are left allocated at exit, for the trace to show
// which kind each was.
//
// Prints "pool ok" and exits 0; "pool mismatch ..." exits 4; a CUDA error
// exits 3.
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / 4;

CUmemoryPool make_pool(CUmemAllocationHandleType handles) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = handles;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CHECK(cuMemPoolCreate(&pool, &props));
  return pool;
}

}  // namespace

int main() {
  use_primary_context();
  CUfunction kernel = register_add_one("pool_add_one", kInts);

  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUmemoryPool default_pool = nullptr;
  CHECK(cuDeviceGetDefaultMemPool(&default_pool, 0));
  CUmemoryPool own_pool = make_pool(CU_MEM_HANDLE_TYPE_NONE);
  CUmemoryPool exportable_pool = make_pool(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemoryPool shared_pool = make_pool(CU_MEM_HANDLE_TYPE_NONE);
  CUmemAccessDesc peer{};
  peer.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  peer.location.id = 1;
  peer.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemPoolSetAccess(shared_pool, &peer, 1));

  std::vector<CUdeviceptr> buffers;
  auto allocate = [&](CUmemoryPool pool) {
    CUdeviceptr p = 0;
    CHECK(cuMemAllocFromPoolAsync(&p, kBufferBytes, pool, stream));
    CHECK(cuMemsetD32Async(p, static_cast<unsigned>(buffers.size()), kInts, stream));
    buffers.push_back(p);
  };
  for (int i = 0; i < 3; ++i) {
    allocate(default_pool);
    allocate(own_pool);
  }
  auto add_to_all = [&] {
    for (CUdeviceptr& p : buffers) {
      void* params[] = {&p};
      CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    }
  };
  add_to_all();
  allocate(exportable_pool);  // not paged: room is made by offloading
  allocate(shared_pool);
  add_to_all();
  CHECK(cuStreamSynchronize(stream));

  for (std::size_t i = 0; i < buffers.size(); ++i) {
    std::vector<int> back(kInts);
    CHECK(cuMemcpyDtoH(back.data(), buffers[i], kBufferBytes));
    const int expected = static_cast<int>(i) + (i < 6 ? 2 : 1);
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != expected) {
        std::printf("pool mismatch buffer %zu int %zu: %d, expected %d\n", i, k, back[k], expected);
        return 4;
      }
    }
  }
  // Buffer 0 (paged) and the two unpaged ones stay allocated.
  for (std::size_t i = 1; i < 6; ++i) CHECK(cuMemFreeAsync(buffers[i], stream));
  CHECK(cuStreamSynchronize(stream));
  std::printf("pool ok\n");
  return 0;
}
