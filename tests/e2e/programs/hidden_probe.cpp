// A pointer no hook can see: one kernel writes the addresses of two buffers
// into a table in device memory, other work pushes the two buffers off the
// device, and a second kernel, handed only the table, reads through it.
// Under VGPUMEM_CHECK=strict or torture that read must fault
// (CUDA_ERROR_ILLEGAL_ADDRESS), never return another buffer's bytes.
//
//   hidden_probe [far|near]
//     far (default): 18 launches on the stream between the two kernels,
//       more than the grace (VGPUMEM_GRACE_LAUNCHES) covers
//     near: two, as a prepare kernel and its consumer sit (the grace keeps
//       the buffers the writer named resident until the reader has run)
//   prints "hidden ok" when the read saw the two buffers'
//                  own values (exit 0), "hidden wrong A B" when it saw
//                  other bytes (exit 4), "hidden fault <error>" when the
//                  read faulted (exit 5). A CUDA error elsewhere exits 3.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / sizeof(int);
constexpr int kPressure = 6;

// table[0] = a, table[1] = b: built on the device, as a prepare kernel builds
// the pointer arrays of a grouped GEMM.
void write_table(void** params, const vgpusimLaunch*, void*) {
  CUdeviceptr table = 0, a = 0, b = 0;
  std::memcpy(&table, params[0], sizeof table);
  std::memcpy(&a, params[1], sizeof a);
  std::memcpy(&b, params[2], sizeof b);
  auto* entries = reinterpret_cast<CUdeviceptr*>(table);
  entries[0] = a;
  entries[1] = b;
}

// out[i] = the first int of the buffer table[i] points to.
void read_through(void** params, const vgpusimLaunch*, void*) {
  CUdeviceptr table = 0, out = 0;
  std::memcpy(&table, params[0], sizeof table);
  std::memcpy(&out, params[1], sizeof out);
  const auto* entries = reinterpret_cast<const CUdeviceptr*>(table);
  auto* seen = reinterpret_cast<int*>(out);
  for (int i = 0; i < 2; ++i) seen[i] = reinterpret_cast<const int*>(entries[i])[0];
}

}  // namespace

int main(int argc, char** argv) {
  const bool near = argc > 1 && std::strcmp(argv[1], "near") == 0;
  if (argc > 1 && !near && std::strcmp(argv[1], "far") != 0) {
    std::fprintf(stderr, "usage: hidden_probe [far|near]\n");
    return 2;
  }
  use_primary_context();
  CUfunction writer = register_probe_kernel("probe_write_table", write_table, {8, 8, 8});
  CUfunction reader = register_probe_kernel("probe_read_through", read_through, {8, 8});
  CUfunction add = register_add_one("probe_add_one", kInts);
  CUdeviceptr a = 0, b = 0, table = 0, out = 0;
  CHECK(cuMemAlloc(&a, kBufferBytes));
  CHECK(cuMemAlloc(&b, kBufferBytes));
  CHECK(cuMemsetD32(a, 11, kInts));
  CHECK(cuMemsetD32(b, 22, kInts));
  CHECK(cuMemAlloc(&table, 2 * sizeof(CUdeviceptr)));
  CHECK(cuMemAlloc(&out, 2 * sizeof(int)));
  // The pressure buffers are made before the writer runs, so that only the
  // launches below come between writer and reader.
  std::vector<CUdeviceptr> pressure(kPressure);
  for (CUdeviceptr& p : pressure) {
    CHECK(cuMemAlloc(&p, kBufferBytes));
    CHECK(cuMemsetD32(p, 5, kInts));
  }
  void* write_params[] = {&table, &a, &b};
  auto press = [&](CUdeviceptr& p) {
    void* params[] = {&p};
    CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  };
  CHECK(cuLaunchKernel(writer, 1, 1, 1, 1, 1, 1, 0, nullptr, write_params, nullptr));
  if (near) {
    press(pressure[0]);  // each brings a buffer back under the 16 MiB cap
    press(pressure[1]);
  } else {
    for (int round = 0; round < 3; ++round) {
      for (CUdeviceptr& p : pressure) press(p);
    }
  }
  void* read_params[] = {&table, &out};
  CUresult result = cuLaunchKernel(reader, 1, 1, 1, 1, 1, 1, 0, nullptr, read_params, nullptr);
  int seen[2] = {};
  if (result == CUDA_SUCCESS) result = cuMemcpyDtoH(seen, out, sizeof seen);
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(result, &name);
    std::printf("hidden fault %s\n", name ? name : "?");
    return 5;
  }
  if (seen[0] != 11 || seen[1] != 22) {
    std::printf("hidden wrong %d %d\n", seen[0], seen[1]);
    return 4;
  }
  std::printf("hidden ok\n");
  return 0;
}
