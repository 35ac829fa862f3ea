// A graph built node by node under paging: twelve 2 MiB buffers (24 MiB
// under a 16 MiB cap). A graph of a kernel node, a memcpy node and a memset
// node (their own entry points) and a kernel and a memset node added through
// cuGraphAddNode, naming buffers 0 to 5, is launched three times, kernels
// over buffers 6 to 11 paging through the rest of the cap in between; then
// the kernel node is pointed at buffer 1 in the graph
// (cuGraphKernelNodeSetParams) and at buffer 3 in the instantiation
// (cuGraphExecKernelNodeSetParams), and the graph launched again. Then,
// buffers 0 to 5 freed, a graph of one batch memory operation node writes a
// word of buffer 6 and waits on one of buffer 7, launched between kernels
// over buffers 8 to 11. A host
// mirror of every buffer is kept and all are checked at the end. Prints
// "graph ok"; a wrong int prints "graph mismatch ..." and exits 4; a CUDA
// error exits 3.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kMiB = 1u << 20, kBytes = 2 * kMiB, kInts = kBytes / 4;
constexpr int kBuffers = 12;

struct Buffers {
  std::vector<CUdeviceptr> device;
  std::vector<std::vector<std::uint32_t>> mirror;

  void add_one(std::size_t i) {
    for (std::uint32_t& v : mirror[i]) ++v;
  }
};

CUDA_KERNEL_NODE_PARAMS add_one_node(CUfunction add, CUdeviceptr* buffer) {
  static void* params[kBuffers][1];
  static int next = 0;
  void** slot = params[next++ % kBuffers];
  slot[0] = buffer;
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = add;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = slot;
  return p;
}

// Kernels over buffers `first` to 11 only: everything else is pushed out.
void pressure(Buffers& b, CUfunction add, CUstream stream, std::size_t first = 6) {
  for (std::size_t i = first; i < kBuffers; ++i) {
    void* params[] = {&b.device[i]};
    CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    b.add_one(i);
  }
}

// Whether buffers `first` to 11 hold what their mirrors say (prints the first difference).
bool exact(const Buffers& b, std::size_t first) {
  std::vector<std::uint32_t> back(kInts);
  for (std::size_t i = first; i < kBuffers; ++i) {
    CHECK(cuMemcpyDtoH(back.data(), b.device[i], kBytes));
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != b.mirror[i][k]) {
        std::printf("graph mismatch buffer %zu int %zu: %u, expected %u\n", i, k, back[k], b.mirror[i][k]);
        return false;
      }
    }
  }
  return true;
}

// Reads a word of `buffer`: the buffer is on the device afterwards.
void touch(CUdeviceptr buffer) {
  std::uint32_t word = 0;
  CHECK(cuMemcpyDtoH(&word, buffer, sizeof word));
}

}  // namespace

int main() {
  use_primary_context();
  const CUfunction add = register_add_one("graph_add_one", kInts);
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  Buffers b;
  for (int i = 0; i < kBuffers; ++i) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, kBytes));
    CHECK(cuMemsetD32Async(p, static_cast<unsigned>(i * 1000), kInts, stream));
    b.device.push_back(p);
    b.mirror.emplace_back(kInts, static_cast<std::uint32_t>(i * 1000));
  }

  CUgraph graph = nullptr;
  CHECK(cuGraphCreate(&graph, 0));
  CUgraphNode kernel = nullptr, copy = nullptr, fill = nullptr, generic_kernel = nullptr, generic_fill = nullptr;
  const CUDA_KERNEL_NODE_PARAMS on_0 = add_one_node(add, &b.device[0]);
  CHECK(cuGraphAddKernelNode(&kernel, graph, nullptr, 0, &on_0));
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = b.device[1];
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = b.device[2] + kMiB;
  c.WidthInBytes = kMiB;
  c.Height = 1;
  c.Depth = 1;
  CUcontext context = nullptr;
  CHECK(cuCtxGetCurrent(&context));
  // Each node is added with what it names on the device (a copy that names
  // it first): only the node's own pin can keep it there for the launches.
  CHECK(cuMemcpyDtoDAsync(b.device[2] + kMiB, b.device[1], 4, stream));  // the node overwrites it first thing
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuGraphAddMemcpyNode(&copy, graph, &kernel, 1, &c, context));
  CUDA_MEMSET_NODE_PARAMS m{};
  m.dst = b.device[3] + 4096;
  m.value = 77;
  m.elementSize = 4;
  m.width = 1024;
  m.height = 1;
  touch(b.device[3]);
  CHECK(cuGraphAddMemsetNode(&fill, graph, &copy, 1, &m, context));
  CUgraphNodeParams generic{};
  generic.type = CU_GRAPH_NODE_TYPE_KERNEL;
  const CUDA_KERNEL_NODE_PARAMS on_4 = add_one_node(add, &b.device[4]);
  generic.kernel.func = on_4.func;
  generic.kernel.gridDimX = generic.kernel.gridDimY = generic.kernel.gridDimZ = 1;
  generic.kernel.blockDimX = generic.kernel.blockDimY = generic.kernel.blockDimZ = 1;
  generic.kernel.kernelParams = on_4.kernelParams;
  CHECK(cuGraphAddNode(&generic_kernel, graph, &fill, nullptr, 1, &generic));
  CUgraphNodeParams generic_set{};
  generic_set.type = CU_GRAPH_NODE_TYPE_MEMSET;
  generic_set.memset.dst = b.device[5];
  generic_set.memset.value = 5;
  generic_set.memset.elementSize = 4;
  generic_set.memset.width = 2048;
  generic_set.memset.height = 1;
  touch(b.device[5]);
  CHECK(cuGraphAddNode(&generic_fill, graph, &generic_kernel, nullptr, 1, &generic_set));

  CUgraphExec exec = nullptr;
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  // What one launch of the graph does to the mirror, with the kernel node on `first`.
  auto launch = [&](std::size_t first) {
    pressure(b, add, stream);
    CHECK(cuGraphLaunch(exec, stream));
    b.add_one(first);
    std::copy_n(b.mirror[1].begin(), kMiB / 4, b.mirror[2].begin() + kMiB / 4);
    std::fill_n(b.mirror[3].begin() + 1024, 1024, 77u);
    b.add_one(4);
    std::fill_n(b.mirror[5].begin(), 2048, 5u);
  };
  for (int round = 0; round < 3; ++round) launch(0);

  // The kernel node moved to buffer 1 in the graph (a new instantiation sees
  // it), then to buffer 3 in that instantiation only.
  const CUDA_KERNEL_NODE_PARAMS on_1 = add_one_node(add, &b.device[1]);
  CHECK(cuGraphKernelNodeSetParams(kernel, &on_1));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  launch(1);
  const CUDA_KERNEL_NODE_PARAMS on_3 = add_one_node(add, &b.device[3]);
  CHECK(cuGraphExecKernelNodeSetParams(exec, kernel, &on_3));
  launch(3);
  launch(3);
  CHECK(cuStreamSynchronize(stream));

  if (!exact(b, 0)) return 4;
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  for (std::size_t i = 0; i < 6; ++i) CHECK(cuMemFree(b.device[i]));

  // A batch memory operation node: a word of buffer 6 written, a word of
  // buffer 7 waited on (for the value it holds then).
  touch(b.device[7]);  // both on the device when the node is added (one copy names both)
  CHECK(cuMemcpyDtoDAsync(b.device[6] + 64, b.device[7] + 64, 4, stream));
  CHECK(cuStreamSynchronize(stream));
  b.mirror[6][16] = b.mirror[7][16];
  CHECK(cuGraphCreate(&graph, 0));
  CUstreamBatchMemOpParams ops[2]{};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = b.device[6] + 4 * 100;
  ops[0].writeValue.value = 0xBA7Cu;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = b.device[7];
  ops[1].waitValue.value = 0;  // GEQ 0 always holds: the wait reads the word, whatever it is
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  CUDA_BATCH_MEM_OP_NODE_PARAMS batch{};
  batch.ctx = context;
  batch.count = 2;
  batch.paramArray = ops;
  CUgraphNode words = nullptr;
  CHECK(cuGraphAddBatchMemOpNode(&words, graph, nullptr, 0, &batch));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 2; ++round) {
    pressure(b, add, stream, 8);
    CHECK(cuGraphLaunch(exec, stream));
    b.mirror[6][100] = 0xBA7Cu;
  }
  pressure(b, add, stream, 8);
  CHECK(cuStreamSynchronize(stream));
  if (!exact(b, 6)) return 4;
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  for (std::size_t i = 6; i < kBuffers; ++i) CHECK(cuMemFree(b.device[i]));
  std::printf("graph ok\n");
  return 0;
}
