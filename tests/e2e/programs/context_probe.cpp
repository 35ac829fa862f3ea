// Paging with several contexts: each context has its own stream and
// buffers, and the current context switches between every two operations,
// so the pager must offload a buffer of one context while another is
// current (its users' streams are waited for in their own context).
//
//   context_probe contexts   two contexts of device 0 (cuCtxCreate)
//   context_probe devices    the primary contexts of devices 0 and 1
//   context_probe streams    one context, 70 streams made and destroyed in
//                            turn, each used for one round of kernels (more
//                            streams than the pager has bits)
//   context_probe frees      one context: a buffer freed while a 1 ms kernel
//                            runs on a stream of each kind (non-blocking,
//                            non-blocking with a priority, blocking, legacy,
//                            per-thread), with buffers paging around it
//
// Each context: four 4 MiB buffers and a non-blocking stream; three rounds
// of a kernel adding one to every buffer, on its context's stream, with the
// current context switched before each launch. Prints "<mode> ok" when
// every buffer holds its start value plus three (exit 0), "<mode> mismatch
// ..." (exit 4). A CUDA error exits 3.
#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / sizeof(int);
constexpr int kBuffers = 4, kRounds = 3;

struct Side {
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::vector<CUdeviceptr> buffers;
};

// Whether buffers[b] holds b + added in every int, after every stream is
// done; prints "<mode> mismatch ..." for the first that does not.
bool each_holds_its_index_plus(const std::vector<CUdeviceptr>& buffers, int added, const char* mode) {
  CHECK(cuCtxSynchronize());
  std::vector<int> back(kInts);
  for (int b = 0; b < static_cast<int>(buffers.size()); ++b) {
    CHECK(cuMemcpyDtoH(back.data(), buffers[b], kBufferBytes));
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != b + added) {
        std::printf("%s mismatch buffer %d int %zu: %d, expected %d\n", mode, b, k, back[k], b + added);
        return false;
      }
    }
  }
  return true;
}

int streams() {
  use_primary_context();
  CUfunction add = register_add_one("probe_add_one", kInts);
  std::vector<CUdeviceptr> buffers(kBuffers);
  for (int b = 0; b < kBuffers; ++b) {
    CHECK(cuMemAlloc(&buffers[b], kBufferBytes));
    CHECK(cuMemsetD32(buffers[b], static_cast<unsigned>(b), kInts));
  }
  constexpr int kStreams = 70;
  for (int s = 0; s < kStreams; ++s) {
    CUstream stream = nullptr;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (CUdeviceptr& p : buffers) {
      void* params[] = {&p};
      CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    }
    CHECK(cuStreamDestroy(stream));  // its work goes on; its handle may come back
  }
  if (!each_holds_its_index_plus(buffers, kStreams, "streams")) return 4;
  for (CUdeviceptr p : buffers) CHECK(cuMemFree(p));
  std::printf("streams ok\n");
  return 0;
}

// cuMemFree is a barrier for the program's work without vgpumem: with it too,
// whichever kind of stream the work is on. Prints "frees early on stream
// <i>" (exit 4) when a free returned with a kernel launched before it still
// running.
int frees() {
  use_primary_context();
  CUfunction add = register_add_one("probe_add_one", kInts);
  static const auto nothing = [](void**, const vgpusimLaunch*, void*) {};
  CUfunction busy = register_probe_kernel("probe_busy_1ms", nothing, {}, nullptr, 1e6);
  constexpr int kPaged = 6;  // 24 MiB under the 12 MiB cap: they page
  std::vector<CUdeviceptr> buffers(kPaged);
  for (int b = 0; b < kPaged; ++b) {
    CHECK(cuMemAlloc(&buffers[b], kBufferBytes));
    CHECK(cuMemsetD32(buffers[b], static_cast<unsigned>(b), kInts));
  }
  CUstream non_blocking = nullptr, prioritized = nullptr, blocking = nullptr;
  CHECK(cuStreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreateWithPriority(&prioritized, CU_STREAM_NON_BLOCKING, 0));
  CHECK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  const CUstream streams[] = {non_blocking, prioritized, blocking, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
  int round = 0;
  for (const CUstream stream : streams) {
    for (CUdeviceptr& p : buffers) {
      void* params[] = {&p};
      CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, non_blocking, params, nullptr));
    }
    CUdeviceptr freed = 0;
    CHECK(cuMemAlloc(&freed, 1u << 20));
    CHECK(cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    CHECK(cuMemFree(freed));
    if (cuStreamQuery(stream) != CUDA_SUCCESS) {
      std::printf("frees early on stream %d\n", round);
      return 4;
    }
    ++round;
  }
  if (!each_holds_its_index_plus(buffers, round, "frees")) return 4;
  for (CUstream stream : {non_blocking, prioritized, blocking}) CHECK(cuStreamDestroy(stream));
  for (CUdeviceptr p : buffers) CHECK(cuMemFree(p));
  std::printf("frees ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "contexts" && mode != "devices" && mode != "streams" && mode != "frees") {
    std::fprintf(stderr, "usage: context_probe contexts|devices|streams|frees\n");
    return 2;
  }
  if (mode == "streams") return streams();
  if (mode == "frees") return frees();
  CHECK(cuInit(0));
  Side sides[2];
  for (int s = 0; s < 2; ++s) {
    if (mode == "contexts") {
      CHECK(cuCtxCreate(&sides[s].context, nullptr, 0, 0));  // current from here
    } else {
      CHECK(cuDevicePrimaryCtxRetain(&sides[s].context, s));
      CHECK(cuCtxSetCurrent(sides[s].context));
    }
  }
  CUfunction add = register_add_one("probe_add_one", kInts);
  for (int s = 0; s < 2; ++s) {
    CHECK(cuCtxSetCurrent(sides[s].context));
    CHECK(cuStreamCreate(&sides[s].stream, CU_STREAM_NON_BLOCKING));
    for (int b = 0; b < kBuffers; ++b) {
      CUdeviceptr p = 0;
      CHECK(cuMemAlloc(&p, kBufferBytes));
      CHECK(cuMemsetD32(p, static_cast<unsigned>(100 * s + b), kInts));
      sides[s].buffers.push_back(p);
    }
  }
  for (int round = 0; round < kRounds; ++round) {
    for (int b = 0; b < kBuffers; ++b) {
      for (Side& side : sides) {
        CHECK(cuCtxSetCurrent(side.context));
        void* params[] = {&side.buffers[b]};
        CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, side.stream, params, nullptr));
      }
    }
  }
  std::vector<int> back(kInts);
  for (int s = 0; s < 2; ++s) {
    CHECK(cuCtxSetCurrent(sides[s].context));
    CHECK(cuStreamSynchronize(sides[s].stream));
    for (int b = 0; b < kBuffers; ++b) {
      CHECK(cuMemcpyDtoH(back.data(), sides[s].buffers[b], kBufferBytes));
      const int expected = 100 * s + b + kRounds;
      for (std::size_t k = 0; k < kInts; ++k) {
        if (back[k] != expected) {
          std::printf("%s mismatch context %d buffer %d int %zu: %d, expected %d\n", mode.c_str(), s, b, k, back[k],
                      expected);
          return 4;
        }
      }
    }
  }
  for (Side& side : sides) {
    CHECK(cuCtxSetCurrent(side.context));
    for (CUdeviceptr p : side.buffers) CHECK(cuMemFree(p));
    CHECK(cuStreamDestroy(side.stream));
  }
  if (mode == "contexts") {
    for (Side& side : sides) CHECK(cuCtxDestroy(side.context));
  }
  std::printf("%s ok\n", mode.c_str());
  return 0;
}
