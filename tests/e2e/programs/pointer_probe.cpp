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
//   pointer_probe range   asks where allocations start and end (address
//                         range, pointer attributes) from inside them, one
//                         of them offloaded, and again after a free. Prints
//                         "range ok" (exit 0), or "range wrong ..." (exit 4).
// A CUDA error elsewhere exits 3.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "probe_kernels.h"

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

int table() {
  CUfunction gather = register_probe_kernel("probe_gather_first", gather_first, {8, 4, 8});
  CUfunction add = register_add_one("probe_add_one", kInts);
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

bool range_is(CUdeviceptr p, std::size_t bytes) {
  const CUdeviceptr inside = p + (bytes > 100 ? 100 : bytes - 1);
  CUdeviceptr base = 0, start = 0, start_too = 0;
  size_t size = 0, range_size = 0, range_size_too = 0;
  int ordinal = -1, ordinal_too = -1;
  CHECK(cuMemGetAddressRange(&base, &size, inside));
  CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside));
  CHECK(cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside));
  CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside));
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&start_too, &ordinal_too, &range_size_too};
  CHECK(cuPointerGetAttributes(3, attributes, data, inside));
  const bool right = base == p && size == bytes && start == p && range_size == bytes && ordinal == 0 &&
                     start_too == p && range_size_too == bytes && ordinal_too == 0;
  if (!right) {
    std::printf("range wrong for %zu bytes at %#llx: range %#llx+%zu, attribute %#llx+%zu on %d, attributes "
                "%#llx+%zu on %d\n",
                bytes, static_cast<unsigned long long>(p), static_cast<unsigned long long>(base), size,
                static_cast<unsigned long long>(start), range_size, ordinal, static_cast<unsigned long long>(start_too),
                range_size_too, ordinal_too);
  }
  return right;
}

int range() {
  // Two small buffers (packed together under paging) and three of 4 MiB,
  // written in turn: under an 8 MiB cap the first big one is offloaded.
  const std::size_t sizes[] = {512, 700, kBufferBytes, kBufferBytes, kBufferBytes};
  std::vector<CUdeviceptr> buffers;
  for (std::size_t bytes : sizes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, bytes));
    CHECK(cuMemsetD8(p, 7, bytes));
    buffers.push_back(p);
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (!range_is(buffers[i], sizes[i])) return 4;
  }
  CHECK(cuMemFree(buffers[0]));
  CUdeviceptr base = 0;
  size_t size = 0;
  if (cuMemGetAddressRange(&base, &size, buffers[0]) == CUDA_SUCCESS) {
    std::printf("range wrong: a freed buffer still has a range %#llx+%zu\n", static_cast<unsigned long long>(base),
                size);
    return 4;
  }
  for (std::size_t i = 1; i < buffers.size(); ++i) CHECK(cuMemFree(buffers[i]));
  CUdeviceptr start = 0;
  if (cuMemGetAddressRange(&base, &size, buffers[2]) == CUDA_SUCCESS ||
      cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, buffers[2]) == CUDA_SUCCESS) {
    std::printf("range wrong: freed memory still has a range (%#llx+%zu, start %#llx)\n",
                static_cast<unsigned long long>(base), size, static_cast<unsigned long long>(start));
    return 4;
  }
  std::printf("range ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "table" && mode != "ipc" && mode != "range") {
    std::fprintf(stderr, "usage: pointer_probe table|ipc|range\n");
    return 2;
  }
  use_primary_context();
  if (mode == "range") return range();
  return mode == "table" ? table() : ipc();
}
