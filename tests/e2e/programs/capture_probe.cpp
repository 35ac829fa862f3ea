// A CUDA graph under paging: two buffers are used by captured work, then
// other buffers are used enough to push everything else off the device, and
// the graph is replayed. Its buffers must have stayed resident (a graph
// launch is not seen buffer by buffer), and every buffer must hold what the
// program computed.
//
// Prints "capture ok" and exits 0; "capture mismatch ..." exits 4; a CUDA
// error exits 3.
#include <cuda.h>

#include <cstdio>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / 4, kBuffers = 8;

}  // namespace

int main() {
  use_primary_context();
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
