// A CUDA graph under paging: two buffers are used by captured work, then
// other buffers are used enough to push everything else off the device, and
// the graph is replayed. Its buffers must have stayed resident (a graph
// launch is not seen buffer by buffer), and every buffer must hold what the
// program computed.
//
// Prints "capture ok" and exits 0; "capture mismatch ..." exits 4; a CUDA
// error exits 3.
//
// capture_probe free: frees while a capture is open. In a relaxed-mode
// capture, the captured work adds one to a buffer and then frees it
// stream-ordered (cuMemFreeAsync on the capturing stream), and an unrelated
// buffer is freed with cuMemFree. A buffer allocated after the capture must
// not be given the captured buffer's memory before the graph has run (its
// kernel would write there). Prints "free ok" or "free mismatch ...".
#include <cuda.h>

#include <cstdio>
#include <string>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / 4, kBuffers = 8;

}  // namespace

int frees_under_capture() {
  CUfunction kernel = register_add_one("capture_add_one", kInts);
  CUdeviceptr captured = 0, unrelated = 0;
  CHECK(cuMemAlloc(&captured, kBufferBytes));
  CHECK(cuMemAlloc(&unrelated, kBufferBytes));
  CHECK(cuMemsetD32(captured, 1, kInts));
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  void* params[] = {&captured};
  CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  CHECK(cuMemFreeAsync(captured, stream));  // freed when the graph runs
  CHECK(cuMemFree(unrelated));               // the program's own, during the capture
  CUgraph graph = nullptr;
  CHECK(cuStreamEndCapture(stream, &graph));
  CUgraphExec exec = nullptr;
  CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  std::vector<CUdeviceptr> later(3);
  for (CUdeviceptr& p : later) {
    CHECK(cuMemAlloc(&p, kBufferBytes));
    CHECK(cuMemsetD32(p, 7, kInts));
  }
  CHECK(cuGraphLaunch(exec, stream));
  CHECK(cuStreamSynchronize(stream));
  std::vector<int> back(kInts);
  for (std::size_t i = 0; i < later.size(); ++i) {
    CHECK(cuMemcpyDtoH(back.data(), later[i], kBufferBytes));
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != 7) {
        std::printf("free mismatch later buffer %zu int %zu: %d, expected 7\n", i, k, back[k]);
        return 4;
      }
    }
  }
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  for (CUdeviceptr p : later) CHECK(cuMemFree(p));
  CHECK(cuStreamDestroy(stream));
  std::printf("free ok\n");
  return 0;
}

int main(int argc, char** argv) {
  use_primary_context();
  if (argc > 1 && std::string(argv[1]) == "free") return frees_under_capture();
  CUfunction kernel = register_add_one("capture_add_one", kInts);

  std::vector<CUdeviceptr> buffers(kBuffers);
  for (std::size_t i = 0; i < kBuffers; ++i) {
    CHECK(cuMemAlloc(&buffers[i], kBufferBytes));
    CHECK(cuMemsetD32(buffers[i], static_cast<unsigned>(i), kInts));
  }
  auto launch = [&](std::size_t i, CUstream stream) {
    void* params[] = {&buffers[i]};
    CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  };

  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(0, stream);
  launch(1, stream);
  CUgraph graph = nullptr;
  CHECK(cuStreamEndCapture(stream, &graph));
  CUgraphExec exec = nullptr;
  CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));

  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t i = 2; i < kBuffers; ++i) launch(i, nullptr);
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphLaunch(exec, stream));
    CHECK(cuStreamSynchronize(stream));
  }
  for (std::size_t i = 0; i < kBuffers; ++i) {
    std::vector<int> back(kInts);
    CHECK(cuMemcpyDtoH(back.data(), buffers[i], kBufferBytes));
    const int expected = static_cast<int>(i) + kRounds;
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != expected) {
        std::printf("capture mismatch buffer %zu int %zu: %d, expected %d\n", i, k, back[k], expected);
        return 4;
      }
    }
  }
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  for (CUdeviceptr p : buffers) CHECK(cuMemFree(p));
  std::printf("capture ok\n");
  return 0;
}
