// One operation that names many paged buffers at once, under a cap that may
// or may not hold them all: every byte exact, or CUDA_ERROR_OUT_OF_MEMORY
// before anything is enqueued and every buffer as it was.
//
//   wide_probe struct N   N buffers of 2 MiB, each filled with its index;
//                         one cuLaunchKernel whose single parameter is a
//                         struct, by value, holding all N addresses (as
//                         PyTorch's foreach and fused optimizers pass
//                         them). The kernel adds i + 1 to every int of
//                         buffer i. Before it, 24 more buffers are filled
//                         (48 MiB), which pushes the first ones out under
//                         a cap that holds the N but not all of them.
//   wide_probe ex N       the same through cuLaunchKernelEx.
//   wide_probe freed N    as struct, but the 24 others are freed before the
//                         launch (the N fit the cap then, though some were
//                         pushed out); afterwards one more launch of the
//                         kernel that names no buffer at all.
//   wide_probe copy MIB   two buffers of MIB MiB each; one cuMemcpyDtoD
//                         from one to the other.
//
// Prints "<mode> ok launched" when the operation ran and every buffer holds
// what it must, "<mode> ok refused" when it was refused with
// CUDA_ERROR_OUT_OF_MEMORY and every buffer holds what it held (exit 0);
// "<mode> mismatch ..." (exit 4) otherwise. A CUDA error elsewhere exits 3.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 2u << 20, kInts = kBufferBytes / sizeof(int);
constexpr std::size_t kMaxBuffers = 400;
constexpr unsigned kOthers = 24;

struct Buffers {
  unsigned count;
  CUdeviceptr address[kMaxBuffers];
};

// buffers.address[i][k] += i + 1 for every int k.
void add_index(void** params, const vgpusimLaunch*, void*) {
  Buffers buffers{};
  std::memcpy(&buffers, params[0], sizeof buffers);
  for (unsigned i = 0; i < buffers.count; ++i) {
    int* p = reinterpret_cast<int*>(buffers.address[i]);
    for (std::size_t k = 0; k < kInts; ++k) p[k] += static_cast<int>(i) + 1;
  }
}

// Whether every int of `buffer` is `expected`; prints the first that is not.
bool holds(const char* mode, CUdeviceptr buffer, unsigned index, int expected) {
  std::vector<int> back(kInts);
  CHECK(cuMemcpyDtoH(back.data(), buffer, kBufferBytes));
  for (std::size_t k = 0; k < kInts; ++k) {
    if (back[k] != expected) {
      std::printf("%s mismatch buffer %u int %zu: %d, expected %d\n", mode, index, k, back[k], expected);
      return false;
    }
  }
  return true;
}

int wide_launch(const char* mode, unsigned count, bool ex, bool free_others) {
  if (count == 0 || count > kMaxBuffers) return 2;
  CUfunction kernel = register_probe_kernel("probe_add_index", add_index, {sizeof(Buffers)});
  Buffers buffers{};
  buffers.count = count;
  for (unsigned i = 0; i < count; ++i) {
    CHECK(cuMemAlloc(&buffers.address[i], kBufferBytes));
    CHECK(cuMemsetD32(buffers.address[i], i, kInts));
  }
  std::vector<CUdeviceptr> others(kOthers);
  for (unsigned j = 0; j < kOthers; ++j) {
    CHECK(cuMemAlloc(&others[j], kBufferBytes));
    CHECK(cuMemsetD32(others[j], 1000 + j, kInts));
  }
  if (free_others) {
    for (CUdeviceptr& p : others) CHECK(cuMemFree(p));
    others.clear();
  }
  void* params[] = {&buffers};
  CUresult launched = CUDA_SUCCESS;
  if (ex) {
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    launched = cuLaunchKernelEx(&config, kernel, params, nullptr);
  } else {
    launched = cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
  }
  if (launched != CUDA_SUCCESS && launched != CUDA_ERROR_OUT_OF_MEMORY) stop_on_error(launched, "the wide launch");
  CHECK(cuCtxSynchronize());
  const bool refused = launched == CUDA_ERROR_OUT_OF_MEMORY;
  for (unsigned i = 0; i < count; ++i) {
    const int expected = static_cast<int>(i) + (refused ? 0 : static_cast<int>(i) + 1);
    if (!holds(mode, buffers.address[i], i, expected)) return 4;
  }
  for (unsigned j = 0; j < others.size(); ++j) {
    if (!holds(mode, others[j], kMaxBuffers + j, static_cast<int>(1000 + j))) return 4;
  }
  if (free_others) {
    Buffers none{};
    void* nothing[] = {&none};
    CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, nothing, nullptr));
    CHECK(cuCtxSynchronize());
  }
  for (unsigned i = 0; i < count; ++i) CHECK(cuMemFree(buffers.address[i]));
  for (CUdeviceptr p : others) CHECK(cuMemFree(p));
  std::printf("%s ok %s\n", mode, refused ? "refused" : "launched");
  return 0;
}

int wide_copy(unsigned mib) {
  const std::size_t bytes = std::size_t{mib} << 20, ints = bytes / sizeof(int);
  CUdeviceptr from = 0, to = 0;
  CHECK(cuMemAlloc(&from, bytes));
  CHECK(cuMemAlloc(&to, bytes));
  CHECK(cuMemsetD32(from, 7, ints));
  CHECK(cuMemsetD32(to, 9, ints));
  const CUresult copied = cuMemcpyDtoD(to, from, bytes);
  if (copied != CUDA_SUCCESS && copied != CUDA_ERROR_OUT_OF_MEMORY) stop_on_error(copied, "the copy");
  const bool refused = copied == CUDA_ERROR_OUT_OF_MEMORY;
  std::vector<int> back(ints);
  for (const auto& [buffer, expected] : {std::pair{from, 7}, std::pair{to, refused ? 9 : 7}}) {
    CHECK(cuMemcpyDtoH(back.data(), buffer, bytes));
    for (std::size_t k = 0; k < ints; ++k) {
      if (back[k] != expected) {
        std::printf("copy mismatch %s int %zu: %d, expected %d\n", buffer == from ? "source" : "destination", k,
                    back[k], expected);
        return 4;
      }
    }
  }
  CHECK(cuMemFree(from));
  CHECK(cuMemFree(to));
  std::printf("copy ok %s\n", refused ? "refused" : "launched");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: wide_probe struct|ex|freed N | wide_probe copy MIB\n");
    return 2;
  }
  use_primary_context();
  const std::string mode = argv[1];
  const auto number = static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10));
  if (mode == "struct" || mode == "ex" || mode == "freed") {
    return wide_launch(mode.c_str(), number, mode == "ex", mode == "freed");
  }
  if (mode == "copy") return wide_copy(number);
  return 2;
}
