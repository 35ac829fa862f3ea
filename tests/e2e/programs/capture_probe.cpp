// A CUDA graph under paging: two buffers are used by captured work, then
// other buffers are used enough to push everything else off the device, and
// the graph is replayed. Its buffers must have stayed resident (a graph
// launch is not seen buffer by buffer), and every buffer must hold what the
// program computed.
//
// Prints "capture ok" and exits 0; "capture mismatch ..." exits 4; a CUDA
// error exits 3.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stop_on_error.h"

#include "vgpusim.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / 4, kBuffers = 8;

void add_one(void** params, const vgpusimLaunch*, void*) {
  int* p = nullptr;
  std::memcpy(&p, params[0], sizeof p);
  for (std::size_t i = 0; i < kInts; ++i) p[i] += 1;
}

}  // namespace

int main() {
  CHECK(cuInit(0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, 0));
  CHECK(cuCtxSetCurrent(context));
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) return 3;
  const size_t sizes[] = {sizeof(CUdeviceptr)};
  vgpusimKernelDesc desc{};
  desc.name = "capture_add_one";
  desc.body = add_one;
  desc.paramCount = 1;
  desc.paramSizes = sizes;
  desc.durationNs = 10000;
  CUfunction kernel = nullptr;
  CHECK(reg(&desc, &kernel));

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
