// Device memory a hook cannot see being used, under paging.
//
//   pointer_probe table   two buffers are reached only through a table of
//                         pointers the program uploads; six others push
//                         everything off the device; a kernel then reads
//                         through the table. Prints "table ok" (exit 0), or
//                         "table mismatch ..." (exit 4).
//   pointer_probe ipc     asks for a legacy IPC handle of a cuMemAlloc
//                         buffer. Prints "ipc ok" (exit 0), or "ipc refused
//                         <error>" (exit 5).
// A CUDA error elsewhere exits 3.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "stop_on_error.h"

#include "vgpusim.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / 4;
constexpr int kTargets = 2, kPressure = 6;

// out[i] = the first int of the buffer table[i] points to: the pointers
// are read from device memory, as a batched library kernel reads them.
void gather_first(void** params, const vgpusimLaunch*, void*) {
  const int* const* table = nullptr;
  int count = 0;
  int* out = nullptr;
  std::memcpy(&table, params[0], sizeof table);
  std::memcpy(&count, params[1], sizeof count);
  std::memcpy(&out, params[2], sizeof out);
  for (int i = 0; i < count; ++i) out[i] = table[i][0];
}

void add_one(void** params, const vgpusimLaunch*, void*) {
  int* p = nullptr;
  std::memcpy(&p, params[0], sizeof p);
  for (std::size_t i = 0; i < kInts; ++i) p[i] += 1;
}

CUfunction register_kernel(const char* name, vgpusimKernelFn body, std::vector<size_t> sizes) {
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) std::exit(3);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = static_cast<unsigned>(sizes.size());
  desc.paramSizes = sizes.data();
  desc.durationNs = 10000;
  CUfunction kernel = nullptr;
  CHECK(reg(&desc, &kernel));
  return kernel;
}

int table() {
  CUfunction gather = register_kernel("probe_gather_first", gather_first, {8, 4, 8});
  CUfunction add = register_kernel("probe_add_one", add_one, {8});
  CUdeviceptr targets[kTargets] = {};
  for (int i = 0; i < kTargets; ++i) {
    CHECK(cuMemAlloc(&targets[i], kBufferBytes));
    CHECK(cuMemsetD32(targets[i], 100u + static_cast<unsigned>(i), kInts));
  }
  CUdeviceptr table = 0, out = 0;
  CHECK(cuMemAlloc(&table, sizeof targets));
  CHECK(cuMemAlloc(&out, kTargets * sizeof(int)));
  CHECK(cuMemcpyHtoD(table, targets, sizeof targets));  // the only place the targets' addresses go

  std::vector<CUdeviceptr> pressure(kPressure);
  for (int i = 0; i < kPressure; ++i) {
    CHECK(cuMemAlloc(&pressure[i], kBufferBytes));
    CHECK(cuMemsetD32(pressure[i], static_cast<unsigned>(i), kInts));
  }
  for (int round = 0; round < 2; ++round) {
    for (CUdeviceptr& p : pressure) {
      void* params[] = {&p};
      CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    }
  }
  int count = kTargets;
  void* params[] = {&table, &count, &out};
  CHECK(cuLaunchKernel(gather, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  int seen[kTargets] = {};
  CHECK(cuMemcpyDtoH(seen, out, sizeof seen));
  for (int i = 0; i < kTargets; ++i) {
    if (seen[i] != 100 + i) {
      std::printf("table mismatch target %d: %d, expected %d\n", i, seen[i], 100 + i);
      return 4;
    }
  }
  for (CUdeviceptr p : pressure) CHECK(cuMemFree(p));
  for (CUdeviceptr p : targets) CHECK(cuMemFree(p));
  CHECK(cuMemFree(table));
  CHECK(cuMemFree(out));
  std::printf("table ok\n");
  return 0;
}

int ipc() {
  CUdeviceptr buffer = 0;
  CHECK(cuMemAlloc(&buffer, kBufferBytes));
  CUipcMemHandle handle{};
  const CUresult result = cuIpcGetMemHandle(&handle, buffer);
  CHECK(cuMemFree(buffer));
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(result, &name);
    std::printf("ipc refused %s\n", name ? name : "?");
    return 5;
  }
  std::printf("ipc ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "table" && mode != "ipc") {
    std::fprintf(stderr, "usage: pointer_probe table|ipc\n");
    return 2;
  }
  CHECK(cuInit(0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, 0));
  CHECK(cuCtxSetCurrent(context));
  return mode == "table" ? table() : ipc();
}
