// The simulated driver's other objects: regular contexts and the context
// stack, stream capture and graphs (with the H100's invalidation rules, gpu-facts
// §8.9), memory pools, and 2D/3D copies and memsets.
#include <functional>
#include <thread>

#include "sim_test_support.h"

namespace {

using namespace simtest;

void add_body(void** params, const vgpusimLaunch*, void*) { *param<int*>(params, 0) += param<int>(params, 1); }

CUfunction add_kernel() {
  static CUfunction f = register_kernel("objects_add", add_body, {8, 4}, 1000);
  return f;
}

int read_int(CUdeviceptr p) {
  int value = -1;
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyDtoH(&value, p, 4), CUDA_SUCCESS);
  return value;
}

std::size_t free_bytes() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  return free;
}

// ---- contexts ------------------------------------------------------------------------------
using Contexts = Simulator;

TEST_F(Contexts, CreatedContextIsCurrentOwnsItsMemoryAndIsFreedWithIt) {
  const std::size_t free_before = free_bytes();
  CUcontext own = nullptr;
  ASSERT_EQ(cuCtxCreate(&own, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_NE(own, context_);
  CUcontext current = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, own) << "a new context is pushed as current";
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(free_before - free_bytes(), 64 * kMiB);
  CUcontext owner = nullptr;
  ASSERT_EQ(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS);
  EXPECT_EQ(owner, own);

  ASSERT_EQ(cuCtxPushCurrent(context_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, context_);
  CUcontext popped = nullptr;
  ASSERT_EQ(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, context_);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, own);

  ASSERT_EQ(cuCtxDestroy(own), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_NE(current, own) << "a destroyed context is no thread's current context";
  ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes(), free_before) << "destroying a context frees its memory";
  EXPECT_EQ(cuCtxDestroy(own), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxDestroy(context_), CUDA_ERROR_INVALID_CONTEXT) << "the primary context is released, not destroyed";
  EXPECT_EQ(cuCtxPushCurrent(own), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(Contexts, StreamsBelongToTheirContext) {
  CUcontext own = nullptr;
  ASSERT_EQ(cuCtxCreate(&own, nullptr, 0, 0), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxDestroy(own), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE) << "destroyed with its context";
}

// ---- capture and graphs ----------------------------------------------------------------
class Capture : public Simulator {
 protected:
  void SetUp() override {
    Simulator::SetUp();
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc(&counter_, 4), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD32(counter_, 0, 1), CUDA_SUCCESS);
  }
  void TearDown() override {
    CUstreamCaptureStatus status{};
    EXPECT_EQ(cuStreamIsCapturing(stream_, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE) << "every test ends its capture";
    EXPECT_EQ(cuStreamDestroy(stream_), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(counter_), CUDA_SUCCESS);
  }
  CUresult add_one(CUstream stream) {
    int one = 1;
    return launch(add_kernel(), stream, {&counter_, &one});
  }
  // Runs `body` on another thread with the context current, in `mode`.
  void on_other_thread(CUstreamCaptureMode mode, const std::function<void()>& body) {
    std::thread t([&] {
      ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
      CUstreamCaptureMode m = mode;
      ASSERT_EQ(cuThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
      body();
    });
    t.join();
  }
  CUresult end_capture() {
    CUgraph graph = nullptr;
    const CUresult result = cuStreamEndCapture(stream_, &graph);
    if (graph != nullptr) {
      EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
    }
    return result;
  }
  CUstream stream_ = nullptr;
  CUdeviceptr counter_ = 0;
};

TEST_F(Capture, CapturedWorkRunsOnlyWhenTheGraphIsLaunched) {
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamIsCapturing(stream_, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_EQ(add_one(stream_), CUDA_SUCCESS);
  ASSERT_EQ(add_one(stream_), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  EXPECT_EQ(read_int(counter_), 0) << "capturing records, it does not run";
  std::size_t nodes = 0;
  ASSERT_EQ(cuGraphGetNodes(graph, nullptr, &nodes), CUDA_SUCCESS);
  EXPECT_EQ(nodes, 2u);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(read_int(counter_), 4);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST_F(Capture, SynchronisingOnTheCapturingStreamInvalidatesIt) {
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamIsCapturing(stream_, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(add_one(stream_), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(end_capture(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

TEST_F(Capture, AnotherThreadInGlobalModeMayMapButNotAllocateOrSynchronise) {
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  on_other_thread(CU_STREAM_CAPTURE_MODE_GLOBAL, [] {
    // The VMM calls and cuMemGetInfo do not invalidate (H100, gpu-facts §8.9).
    const CUmemAllocationProp prop = device_memory();
    const CUmemAccessDesc access = read_write();
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle handle = 0;
    EXPECT_EQ(cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemMap(va, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
    EXPECT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, 2 * kMiB), CUDA_SUCCESS);
    std::size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  });
  EXPECT_EQ(add_one(stream_), CUDA_SUCCESS);
  EXPECT_EQ(end_capture(), CUDA_SUCCESS);

  for (int which = 0; which < 3; ++which) {
    ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    on_other_thread(CU_STREAM_CAPTURE_MODE_GLOBAL, [which] {
      CUdeviceptr p = 0;
      void* host = nullptr;
      CUstream own = nullptr;
      ASSERT_EQ(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
      const CUresult r = which == 0   ? cuMemAlloc(&p, 4)
                         : which == 1 ? cuMemHostAlloc(&host, 4096, 0)
                                      : cuStreamSynchronize(own);
      EXPECT_EQ(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) << "call " << which;
      ASSERT_EQ(cuStreamDestroy(own), CUDA_SUCCESS);
    });
    EXPECT_EQ(end_capture(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << "call " << which;
  }
}

TEST_F(Capture, RelaxedThreadMayAllocateButNeverSynchroniseTheContext) {
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  on_other_thread(CU_STREAM_CAPTURE_MODE_RELAXED, [] {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc(&p, 4), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  });
  EXPECT_EQ(end_capture(), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  on_other_thread(CU_STREAM_CAPTURE_MODE_RELAXED,
                  [] { EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); });
  EXPECT_EQ(end_capture(), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

TEST_F(Capture, LegacyStreamWorkWhileABlockingStreamCapturesIsImplicitSynchronisation) {
  CUstream blocking = nullptr;
  ASSERT_EQ(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_EQ(add_one(nullptr), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  CUgraph graph = nullptr;
  EXPECT_EQ(cuStreamEndCapture(blocking, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(cuStreamDestroy(blocking), CUDA_SUCCESS);
}

TEST_F(Capture, AnEventJoinsAnotherStreamToTheCapture) {
  CUstream side = nullptr;
  CUevent fork = nullptr, join = nullptr;
  ASSERT_EQ(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(fork, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(side, fork, 0), CUDA_SUCCESS);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamIsCapturing(side, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_EQ(add_one(side), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(join, side), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamWaitEvent(stream_, join, 0), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(read_int(counter_), 1);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamIsCapturing(side, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_EQ(cuEventDestroy(fork), CUDA_SUCCESS);
  ASSERT_EQ(cuEventDestroy(join), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamDestroy(side), CUDA_SUCCESS);
}

// ---- pools -----------------------------------------------------------------------------
TEST_F(Simulator, PoolsCountTheirMemoryAndKeepTheirAttributes) {
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  auto attribute = [](CUmemoryPool p, CUmemPool_attribute a) {
    cuuint64_t value = 0;
    EXPECT_EQ(cuMemPoolGetAttribute(p, a, &value), CUDA_SUCCESS);
    return value;
  };
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAllocAsync(&p, 4 * kMiB, stream), CUDA_SUCCESS);
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * kMiB);
  ASSERT_EQ(cuMemsetD8Async(p, 7, 4 * kMiB, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS) << "the memset ran before the free took the memory";
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 4 * kMiB);
  cuuint64_t zero = 0, threshold = 64 * kMiB;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0u);
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), CUDA_SUCCESS);
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), threshold);

  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool own = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&own, &props), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocFromPoolAsync(&p, kMiB, own, stream), CUDA_SUCCESS);
  EXPECT_EQ(attribute(own, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), kMiB);
  EXPECT_EQ(attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_EQ(cuMemFreeAsync(p, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolDestroy(own), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE) << "the default pool cannot be destroyed";
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

// ---- 2D and 3D copies and memsets ------------------------------------------------------
TEST_F(Simulator, PitchedCopiesAndMemsetsMoveExactlyTheirRows) {
  constexpr std::size_t kWidth = 100, kHeight = 8;
  CUdeviceptr d = 0;
  std::size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch(&d, &pitch, kWidth, kHeight, 4), CUDA_SUCCESS);
  ASSERT_GE(pitch, kWidth);
  ASSERT_EQ(cuMemsetD8(d, 0, pitch * kHeight), CUDA_SUCCESS);
  std::vector<unsigned char> host(kWidth * kHeight);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);

  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcPitch = kWidth;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = d;
  up.dstPitch = pitch;
  up.WidthInBytes = kWidth;
  up.Height = kHeight;
  ASSERT_EQ(cuMemcpy2D(&up), CUDA_SUCCESS);
  // Bytes 10..14 of rows 1..3 become 0xAB.
  ASSERT_EQ(cuMemsetD2D8(d + pitch + 10, pitch, 0xAB, 5, 3), CUDA_SUCCESS);

  std::vector<unsigned char> back(128 * kHeight, 0xEE);
  CUDA_MEMCPY2D down{};
  down.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  down.srcDevice = d;
  down.srcPitch = pitch;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = 128;
  down.WidthInBytes = kWidth;
  down.Height = kHeight;
  ASSERT_EQ(cuMemcpy2D(&down), CUDA_SUCCESS);
  for (std::size_t y = 0; y < kHeight; ++y) {
    for (std::size_t x = 0; x < 128; ++x) {
      const bool filled = y >= 1 && y <= 3 && x >= 10 && x < 15;
      const unsigned expected = x >= kWidth ? 0xEE : filled ? 0xAB : host[y * kWidth + x];
      ASSERT_EQ(back[y * 128 + x], expected) << "row " << y << " byte " << x;
    }
  }

  // A 3D copy of a 20x4 window at (2, 1) into linear device memory.
  CUdeviceptr window = 0;
  ASSERT_EQ(cuMemAlloc(&window, 80), CUDA_SUCCESS);
  CUDA_MEMCPY3D cut{};
  cut.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cut.srcDevice = d;
  cut.srcPitch = pitch;
  cut.srcHeight = kHeight;
  cut.srcXInBytes = 2;
  cut.srcY = 1;
  cut.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cut.dstDevice = window;
  cut.dstPitch = 20;
  cut.dstHeight = 4;
  cut.WidthInBytes = 20;
  cut.Height = 4;
  cut.Depth = 1;
  ASSERT_EQ(cuMemcpy3D(&cut), CUDA_SUCCESS);
  std::vector<unsigned char> got(80);
  ASSERT_EQ(cuMemcpyDtoH(got.data(), window, 80), CUDA_SUCCESS);
  for (std::size_t y = 0; y < 4; ++y) {
    for (std::size_t x = 0; x < 20; ++x) ASSERT_EQ(got[y * 20 + x], back[(y + 1) * 128 + x + 2]);
  }

  EXPECT_EQ(cuMemsetD16(d + 1, 0, 4), CUDA_ERROR_INVALID_VALUE) << "misaligned 16-bit memset";
  EXPECT_EQ(cuMemsetD2D32(d, 8, 0, 4, 2), CUDA_ERROR_INVALID_VALUE) << "pitch smaller than a row";
  up.dstPitch = kWidth - 1;
  EXPECT_EQ(cuMemcpy2D(&up), CUDA_ERROR_INVALID_VALUE) << "pitch smaller than the width";
  ASSERT_EQ(cuMemFree(window), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

TEST_F(Simulator, ThirtyTwoBitMemsetsFillEveryElement) {
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 64), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(d, 0x01020304u, 16), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD16(d + 8, 0xBEEF, 2), CUDA_SUCCESS);
  std::vector<std::uint32_t> back(16);
  ASSERT_EQ(cuMemcpyDtoH(back.data(), d, 64), CUDA_SUCCESS);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(back[i], i == 2 ? 0xBEEFBEEFu : 0x01020304u) << i;
  }
  ASSERT_EQ(cuMemFree(d), CUDA_SUCCESS);
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
