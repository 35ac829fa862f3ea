// The simulated driver on its own (no shim): memory model, VMM lifecycle,
// illegal access, kernels, resolver rules, fault injection, report.
#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <cudaTypedefs.h>

#include "sim_test_support.h"

extern "C" CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                       CUstream, void**, void**);

namespace {

using namespace simtest;

TEST_F(Simulator, AllocationIsChargedAndPeakIsKept) {
  std::size_t free0 = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 256 * kMiB);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 100 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, 100 * kMiB), CUDA_SUCCESS);
  CUdeviceptr c = 0;
  EXPECT_EQ(cuMemAlloc(&c, 100 * kMiB), CUDA_ERROR_OUT_OF_MEMORY) << "the device has 256 MiB";
  std::size_t free1 = 0;
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0 - free1, 200 * kMiB);
  EXPECT_EQ(cuMemGetInfo(nullptr, &total), CUDA_ERROR_INVALID_VALUE);
  // Device memory is usable memory.
  std::vector<int> in(1000, 7), out(1000, 0);
  ASSERT_EQ(cuMemcpyHtoD(a, in.data(), 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoD(b, a, 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), b, 4000), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cuMemFree(a), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE) << "double free";
  // A freed range is no longer device memory a copy may touch.
  EXPECT_EQ(cuMemcpyHtoD(a, in.data(), 4), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Simulator, VmmRangeIsInaccessibleUntilMappedAndGranted) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  std::size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  EXPECT_EQ(granularity, 2 * kMiB);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressReserve(&va, 3 * kMiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE) << "not a granularity multiple";
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  int value = 42;
  EXPECT_EQ(cuMemcpyHtoD(va, &value, 4), CUDA_ERROR_INVALID_VALUE) << "reserved, not mapped";
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(va, &value, 4), CUDA_ERROR_INVALID_VALUE) << "mapped, no access yet";
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(va, &value, 4), CUDA_SUCCESS);
  // A copy from pageable memory may still be in flight when the call returns
  // (CUDA's documented contract, which the simulator takes literally).
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  // Unmap and map again at the same address: the handle kept the data.
  EXPECT_EQ(cuMemUnmap(va, kMiB), CUDA_ERROR_INVALID_VALUE) << "partial unmap";
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(va, &value, 4), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va + 2 * kMiB, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  int back = 0;
  ASSERT_EQ(cuMemcpyDtoH(&back, va + 2 * kMiB, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 42);
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 2 * kMiB)), CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  ASSERT_EQ(cuMemRelease(retained), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va + 2 * kMiB, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemAddressFree(va, 4 * kMiB), CUDA_SUCCESS);
}

// cuMemGetAccess reads back what cuMemSetAccess granted each device, only
// where a handle is mapped; cuMemAlloc memory is not a mapping to ask about,
// nor to retain a handle of.
TEST_F(Simulator, VmmAccessIsWhatWasGrantedAndOnlyWhereMapped) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  unsigned long long flags = 99;
  EXPECT_EQ(cuMemGetAccess(&flags, &prop.location, va), CUDA_ERROR_INVALID_VALUE) << "reserved, not mapped";
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetAccess(&flags, &prop.location, va + kMiB), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE) << "mapped, not granted";
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetAccess(&flags, &prop.location, va + kMiB), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetAccess(&flags, &prop.location, va), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemLocation other = prop.location;
  other.id = 1;
  ASSERT_EQ(cuMemGetAccess(&flags, &other, va), CUDA_SUCCESS);
  EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE) << "granted to device 0 only";
  EXPECT_EQ(cuMemGetAccess(&flags, &prop.location, va + 2 * kMiB), CUDA_ERROR_INVALID_VALUE) << "past the mapping";
  EXPECT_EQ(cuMemGetAccess(nullptr, &prop.location, va), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemGetAccess(&flags, nullptr, va), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr allocated = 0;
  ASSERT_EQ(cuMemAlloc(&allocated, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemGetAccess(&flags, &prop.location, allocated), CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle retained = 0;
  EXPECT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(allocated)), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(allocated), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemGetAccess(&flags, &prop.location, va), CUDA_ERROR_INVALID_VALUE) << "unmapped again";
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 4 * kMiB), CUDA_SUCCESS);
}

// A graph built node by node runs its nodes, in the order they were added,
// each time it is launched; a node's parameters can be set in the graph and
// in an instantiation; node kinds the simulator does not run are refused.
TEST_F(Simulator, AGraphBuiltNodeByNodeRunsItsNodesAtEachLaunch) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, kMiB), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUDA_MEMSET_NODE_PARAMS fill{};
  fill.dst = a;
  fill.value = 7;
  fill.elementSize = 4;
  fill.width = kMiB / 4;
  fill.height = 1;
  CUgraphNode set = nullptr, copy = nullptr;
  ASSERT_EQ(cuGraphAddMemsetNode(&set, graph, nullptr, 0, &fill, nullptr), CUDA_SUCCESS);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = a;
  c.dstDevice = b;
  c.WidthInBytes = kMiB;
  c.Height = c.Depth = 1;
  ASSERT_EQ(cuGraphAddMemcpyNode(&copy, graph, &set, 1, &c, nullptr), CUDA_SUCCESS);
  CUgraphNodeParams host{};
  host.type = CU_GRAPH_NODE_TYPE_HOST;
  CUgraphNode refused = nullptr;
  EXPECT_EQ(cuGraphAddNode(&refused, graph, nullptr, nullptr, 0, &host), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuGraphAddMemsetNode(nullptr, graph, nullptr, 0, &fill, nullptr), CUDA_ERROR_INVALID_VALUE);
  fill.elementSize = 3;
  EXPECT_EQ(cuGraphAddMemsetNode(&refused, graph, nullptr, 0, &fill, nullptr), CUDA_ERROR_INVALID_VALUE);
  fill.elementSize = 4;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  fill.value = 9;
  ASSERT_EQ(cuGraphExecMemsetNodeSetParams(exec, set, &fill, nullptr), CUDA_SUCCESS);  // the instantiation only
  std::uint32_t back = 0;
  ASSERT_EQ(cuMemsetD32(b, 0, kMiB / 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&back, b, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 0u) << "nothing runs before a launch";
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&back, b + kMiB - 4, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 9u) << "memset, then the copy of what it wrote";
  fill.value = 11;
  ASSERT_EQ(cuGraphMemsetNodeSetParams(set, &fill), CUDA_SUCCESS);  // the graph: a new instantiation sees it
  CUgraphExec second = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&second, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(second, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(&back, b, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 11u);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphExecDestroy(second), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphMemsetNodeSetParams(set, &fill), CUDA_ERROR_INVALID_VALUE) << "its graph is gone";
  ASSERT_EQ(cuMemFree(a), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(b), CUDA_SUCCESS);
}

// A dma-buf reads the pages that were mapped when it was made, even after
// the range is unmapped and mapped to other memory.
TEST_F(Simulator, ADmaBufKeepsThePagesMappedWhenItWasMade) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle first = 0, second = 0;
  ASSERT_EQ(cuMemCreate(&first, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&second, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, first, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(va, 0x1111, kMiB / 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);  // a memset runs when the host waits
  int fd = -1;
  EXPECT_EQ(cuMemGetHandleForAddressRange(&fd, va + 100, 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
            CUDA_ERROR_INVALID_VALUE) << "not page aligned";
  EXPECT_EQ(cuMemGetHandleForAddressRange(&fd, va, 4 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
            CUDA_ERROR_INVALID_VALUE) << "half of it not mapped";
  ASSERT_EQ(cuMemGetHandleForAddressRange(&fd, va + kMiB, kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, second, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, 2 * kMiB, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(va, 0x2222, kMiB / 2), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  std::uint32_t seen = 0;
  ASSERT_EQ(vgpusimDmaBufRead(fd, kMiB - 4, &seen, 4), CUDA_SUCCESS);
  EXPECT_EQ(seen, 0x1111u) << "the first handle's pages, not what is mapped there now";
  EXPECT_EQ(vgpusimDmaBufRead(fd, kMiB - 2, &seen, 4), CUDA_ERROR_INVALID_VALUE) << "past its end";
  ::close(fd);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(first), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(second), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 4 * kMiB), CUDA_SUCCESS);
}

// Texture objects keep the resource they describe; linear memory must be
// mapped device memory, and a surface takes arrays only.
TEST_F(Simulator, TextureObjectsKeepTheirResourceUntilDestroyed) {
  CUdeviceptr memory = 0;
  ASSERT_EQ(cuMemAlloc(&memory, kMiB), CUDA_SUCCESS);
  CUDA_RESOURCE_DESC resource{};
  resource.resType = CU_RESOURCE_TYPE_LINEAR;
  resource.res.linear.devPtr = memory;
  resource.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
  resource.res.linear.numChannels = 1;
  resource.res.linear.sizeInBytes = kMiB;
  CUDA_TEXTURE_DESC sampling{};
  CUtexObject texture = 0;
  EXPECT_EQ(cuTexObjectCreate(&texture, &resource, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE) << "no sampling";
  ASSERT_EQ(cuTexObjectCreate(&texture, &resource, &sampling, nullptr), CUDA_SUCCESS);
  CUDA_RESOURCE_DESC back{};
  ASSERT_EQ(vgpusimTexObjectResource(texture, &back), CUDA_SUCCESS);
  EXPECT_EQ(back.res.linear.devPtr, memory);
  ASSERT_EQ(cuTexObjectGetResourceDesc(&back, texture), CUDA_SUCCESS);
  EXPECT_EQ(back.res.linear.sizeInBytes, kMiB);
  CUsurfObject surface = 0;
  EXPECT_EQ(cuSurfObjectCreate(&surface, &resource), CUDA_ERROR_INVALID_VALUE) << "surfaces take arrays only";
  CUDA_RESOURCE_DESC past = resource;
  past.res.linear.sizeInBytes = 2 * kMiB;
  CUtexObject beyond = 0;
  EXPECT_EQ(cuTexObjectCreate(&beyond, &past, &sampling, nullptr), CUDA_ERROR_INVALID_VALUE) << "past the allocation";
  ASSERT_EQ(cuTexObjectDestroy(texture), CUDA_SUCCESS);
  EXPECT_EQ(cuTexObjectDestroy(texture), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(vgpusimTexObjectResource(texture, &back), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFree(memory), CUDA_SUCCESS);
}

// As on CUDA 13: a mapping may start at an offset into the handle (a
// granularity multiple), and sees the handle's bytes from there; the
// properties given to cuMemCreate are the ones read back.
// cuda.h (CUDA 13.0) on cuMemMap's offset: "currently must be zero". A
// handle maps from its start only, at as many addresses as wanted.
TEST_F(Simulator, VmmMapsAHandleFromItsStartOnlyAtAnyNumberOfAddresses) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUmemAllocationProp back_prop{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&back_prop, handle), CUDA_SUCCESS);
  EXPECT_EQ(back_prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(cuMemMap(va, 2 * kMiB, 2 * kMiB, handle, 0), CUDA_ERROR_INVALID_VALUE) << "an offset, though aligned";
  EXPECT_EQ(cuMemMap(va, 2 * kMiB, kMiB, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemMap(va, 6 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE) << "past the handle's end";
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + 4 * kMiB, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS) << "the same handle again";
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(cuMemSetAccess(va, 8 * kMiB, &access, 1), CUDA_SUCCESS);
  int value = 7;
  ASSERT_EQ(cuMemcpyHtoD(va + 2 * kMiB, &value, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  int back = 0;
  ASSERT_EQ(cuMemcpyDtoH(&back, va + 6 * kMiB, 4), CUDA_SUCCESS);
  EXPECT_EQ(back, 7) << "both mappings see the same bytes";
  ASSERT_EQ(cuMemUnmap(va, 8 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
}

struct Probe {
  static void body(void** params, const vgpusimLaunch*, void*) {
    int* p = nullptr;
    std::memcpy(&p, params[0], sizeof p);
    int add = 0;
    std::memcpy(&add, params[1], sizeof add);
    *p += add;
  }
};

CUfunction register_probe(const char* name) {
  const std::size_t sizes[] = {8, 4, 8, 1};
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = Probe::body;
  desc.paramCount = 4;
  desc.paramSizes = sizes;
  desc.durationNs = 1000;
  CUfunction f = nullptr;
  EXPECT_EQ(vgpusimRegisterKernel(&desc, &f), CUDA_SUCCESS);
  return f;
}

TEST_F(Simulator, KernelsTakeParamsOrAPackedBufferAndReportTheirLayout) {
  CUfunction f = register_probe("probe_add");
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(p, 5, 1), CUDA_SUCCESS);
  int add = 3;
  double unused_d = 0;
  char unused_c = 0;
  void* params[] = {&p, &add, &unused_d, &unused_c};
  ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  // Layout by natural alignment: 8@0, 4@8, 8@16, 1@24.
  const std::size_t expected[][2] = {{0, 8}, {8, 4}, {16, 8}, {24, 1}};
  for (std::size_t i = 0; i < 4; ++i) {
    std::size_t offset = 0, size = 0;
    ASSERT_EQ(cuFuncGetParamInfo(f, i, &offset, &size), CUDA_SUCCESS);
    EXPECT_EQ(offset, expected[i][0]);
    EXPECT_EQ(size, expected[i][1]);
  }
  std::size_t offset = 0, size = 0;
  EXPECT_EQ(cuFuncGetParamInfo(f, 4, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  // The packed form.
  char buffer[32] = {};
  std::memcpy(buffer, &p, 8);
  std::memcpy(buffer + 8, &add, 4);
  std::size_t buffer_size = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &buffer_size, CU_LAUNCH_PARAM_END};
  ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  int result = 0;
  ASSERT_EQ(cuMemcpyDtoH(&result, p, 4), CUDA_SUCCESS);
  EXPECT_EQ(result, 11);
  // CUkernel and CUfunction are different handles; a CUkernel is not a
  // CUfunction for cuFuncGetParamInfo (as on the H100).
  CUlibrary library = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&library, VGPUSIM_MODULE_IMAGE, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel kernel = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, library, "probe_add"), CUDA_SUCCESS);
  EXPECT_NE(reinterpret_cast<void*>(kernel), reinterpret_cast<void*>(f));
  EXPECT_EQ(cuFuncGetParamInfo(reinterpret_cast<CUfunction>(kernel), 0, &offset, &size), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(cuKernelGetParamInfo(kernel, 1, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 8u);
  CUfunction from_kernel = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&from_kernel, kernel), CUDA_SUCCESS);
  EXPECT_EQ(from_kernel, f);
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  CUmodule module = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, VGPUSIM_MODULE_IMAGE), CUDA_SUCCESS);
  CUfunction by_name = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&by_name, module, "probe_add"), CUDA_SUCCESS);
  EXPECT_EQ(by_name, f);
  EXPECT_EQ(cuModuleGetFunction(&by_name, module, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(Simulator, HostCopiesAdvanceTheClockAtTheMeasuredLinkBandwidth) {
  CUdeviceptr p = 0;
  const std::size_t bytes = 55'000'000;  // 1 ms at 55 GB/s
  ASSERT_EQ(cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  void* pinned = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&pinned, bytes, 0), CUDA_SUCCESS);
  unsigned long long before = vgpusimHostTimeNs();
  ASSERT_EQ(cuMemcpyHtoD(p, pinned, bytes), CUDA_SUCCESS);
  unsigned long long elapsed = vgpusimHostTimeNs() - before;
  EXPECT_GE(elapsed, 1'000'000u);
  EXPECT_LE(elapsed, 1'010'000u);
  // From pageable memory the driver stages: 8 GB/s, the host busy all along.
  std::vector<char> pageable(bytes, 1);
  before = vgpusimHostTimeNs();
  ASSERT_EQ(cuMemcpyHtoD(p, pageable.data(), bytes), CUDA_SUCCESS);
  elapsed = vgpusimHostTimeNs() - before;
  EXPECT_GE(elapsed, 6'800'000u);
  EXPECT_LE(elapsed, 6'900'000u);
  ASSERT_EQ(cuMemFreeHost(pinned), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(Simulator, AttributesMatchTheH100) {
  int value = -1;
  for (CUdevice_attribute a : {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                               CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED}) {
    ASSERT_EQ(cuDeviceGetAttribute(&value, a, 0), CUDA_SUCCESS);
    EXPECT_EQ(value, 1) << "attribute " << a;
  }
  ASSERT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 0), CUDA_SUCCESS);
  EXPECT_EQ(value, 3);
}

TEST_F(Simulator, ResolverFollowsVersionAndFlags) {
  auto resolved = [](const char* name, int version, cuuint64_t flags) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    EXPECT_EQ(cuGetProcAddress_v2(name, &fn, version, flags, &status), CUDA_SUCCESS);
    return fn;
  };
  EXPECT_EQ(resolved("cuMemAlloc", 3020, 0), reinterpret_cast<void*>(&cuMemAlloc_v2));
  EXPECT_EQ(resolved("cuLaunchKernel", 4000, 0), reinterpret_cast<void*>(&cuLaunchKernel));
  EXPECT_EQ(resolved("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            reinterpret_cast<void*>(&cuLaunchKernel_ptsz));
  EXPECT_EQ(resolved("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM), reinterpret_cast<void*>(&cuLaunchKernel));
  // No per-thread variant: the legacy one.
  EXPECT_EQ(resolved("cuMemCreate", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), reinterpret_cast<void*>(&cuMemCreate));
  EXPECT_EQ(resolved("cuGetProcAddress", 12000, 0), reinterpret_cast<void*>(&cuGetProcAddress_v2));
  EXPECT_EQ(resolved("", 0, 0), nullptr) << "the empty-name probe: success, no function (as on the H100)";
  EXPECT_EQ(resolved("cuNoSuchThing", 13000, 0), nullptr);
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  ASSERT_EQ(cuGetProcAddress_v2("cuMemCreate", &fn, 9000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &fn, 99000, 0, &status), CUDA_ERROR_INVALID_VALUE);
}

// The rows where an earlier simulator differed from the H100 (gpu-facts §8.2).
TEST_F(Simulator, ResolverMatchesTheH100WhereItOnceDiffered) {
  auto exported = [](const char* symbol) { return dlsym(RTLD_DEFAULT, symbol); };
  auto look_up = [](const char* name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
    void* fn = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(cuGetProcAddress_v2(name, &fn, version, flags, status), CUDA_SUCCESS) << name << "@" << version;
    return fn;
  };
  CUdriverProcAddressQueryResult status{};
  // Flags 2 below the version that brought the per-thread variant: nothing.
  for (auto [name, version] : {std::pair{"cuLaunchKernel", 4000}, {"cuMemcpyAsync", 4000}, {"cuMemcpyHtoD", 3020}}) {
    EXPECT_EQ(look_up(name, version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status), nullptr) << name;
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) << name;
  }
  // Version 2000 gets the legacy 32-bit exports.
  EXPECT_EQ(look_up("cuMemcpyHtoD", 2000, 0, &status), exported("cuMemcpyHtoD"));
  EXPECT_EQ(look_up("cuMemGetInfo", 2000, 0, &status), exported("cuMemGetInfo"));
  EXPECT_NE(exported("cuMemGetInfo"), exported("cuMemGetInfo_v2"));
  // Capture with per-thread semantics has its own export.
  EXPECT_EQ(look_up("cuStreamBeginCapture", 11030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            exported("cuStreamBeginCapture_v2_ptsz"));
  EXPECT_EQ(look_up("cuStreamBeginCapture", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            exported("cuStreamBeginCapture_ptsz"));
  EXPECT_EQ(look_up("cuMemAlloc_v2", 13000, 0, &status), nullptr) << "variant names are not looked up";
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  // Bad flags or version: INVALID_VALUE, and *pfn left as it was.
  void* untouched = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &untouched, 13000, 4, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &untouched, 13010, 0, &status), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(untouched, reinterpret_cast<void*>(0x1234));
  // The legacy four-argument ABI says NOT_FOUND where _v2 reports a status.
  auto legacy = reinterpret_cast<PFN_cuGetProcAddress_v11030>(exported("cuGetProcAddress"));
  ASSERT_NE(legacy, nullptr);
  void* fn = nullptr;
  EXPECT_EQ(legacy("", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(legacy("cuMemAlloc", &fn, 3020, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, exported("cuMemAlloc_v2"));
}

TEST(SimulatorProcess, IllegalAccessIsStickyAndReported) {
  const std::string report = ::testing::TempDir() + "/vgpusim-illegal.json";
  EXPECT_EQ(run_child("illegal", {"VGPUSIM_REPORT=" + report}), 0);
  std::ifstream in(report);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"illegal_accesses\":1"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"kernel\":\"toucher\""), std::string::npos) << text.str();
}

TEST(SimulatorProcess, FaultInjectionFailsTheNthCall) {
  EXPECT_EQ(run_child("faults", {"VGPUSIM_FAULTS=cuMemCreate:2,hostalloc:1,memcpy:1+,cuMemAlloc:3"}), 0);
}

TEST(SimulatorProcess, MalformedSettingsStopAtInit) {
  EXPECT_EQ(run_child("init", {"VGPUSIM_DEVICE_MEMORY=lots"}), 2);
  EXPECT_EQ(run_child("init", {"VGPUSIM_FAULTS=cuMemCreate"}), 2);
  EXPECT_EQ(run_child("init", {"VGPUSIM_DEVICES=0"}), 2);
}

// ---- child scenarios (exit 0 on success) -------------------------------------------------
int child_illegal() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUdeviceptr va = 0;
  if (cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 0)) return 11;
  const std::size_t sizes[] = {8};
  vgpusimKernelDesc desc{};
  desc.name = "toucher";
  desc.paramCount = 1;
  desc.paramSizes = sizes;
  desc.body = [](void** params, const vgpusimLaunch*, void*) {
    volatile int* p = nullptr;
    std::memcpy(const_cast<int**>(&p), params[0], sizeof p);
    *p = 1;  // reserved, never mapped
  };
  CUfunction f = nullptr;
  if (vgpusimRegisterKernel(&desc, &f)) return 12;
  void* params[] = {&va};
  // As on the H100: the launch succeeds, the next synchronisation reports it.
  if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS) return 13;
  if (cuStreamSynchronize(nullptr) != CUDA_ERROR_ILLEGAL_ADDRESS) return 19;
  // Sticky: everything on the context fails the same way afterwards.
  CUdeviceptr p = 0;
  if (cuCtxSynchronize() != CUDA_ERROR_ILLEGAL_ADDRESS) return 14;
  if (cuMemAlloc(&p, 4) != CUDA_ERROR_ILLEGAL_ADDRESS) return 15;
  if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_ERROR_ILLEGAL_ADDRESS) return 16;
  // No recovery inside the process, as on the H100: the reset "succeeds".
  if (cuDevicePrimaryCtxReset(0) != CUDA_SUCCESS) return 17;
  if (cuMemAlloc(&p, 4) != CUDA_ERROR_ILLEGAL_ADDRESS) return 18;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_ERROR_ILLEGAL_ADDRESS) return 20;
  CUcontext own = nullptr;
  if (cuCtxCreate(&own, nullptr, 0, 0) != CUDA_ERROR_ILLEGAL_ADDRESS) return 21;
  // Physical memory can still be created, as on the H100.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle handle = 0;
  if (cuMemCreate(&handle, 2 * kMiB, &prop, 0) != CUDA_SUCCESS) return 22;
  return 0;
}

int child_faults() {
  CUcontext ctx = nullptr;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 10;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle h = 0;
  if (cuMemCreate(&h, 2 * kMiB, &prop, 0) != CUDA_SUCCESS) return 11;
  if (cuMemCreate(&h, 2 * kMiB, &prop, 0) != CUDA_ERROR_OUT_OF_MEMORY) return 12;
  if (cuMemCreate(&h, 2 * kMiB, &prop, 0) != CUDA_SUCCESS) return 13;
  void* host = nullptr;
  if (cuMemHostAlloc(&host, 4096, 0) != CUDA_ERROR_OUT_OF_MEMORY) return 14;
  if (cuMemHostAlloc(&host, 4096, 0) != CUDA_SUCCESS) return 15;
  CUdeviceptr a = 0, b = 0, c = 0;
  if (cuMemAlloc(&a, 64) || cuMemAlloc(&b, 64)) return 16;
  if (cuMemAlloc(&c, 64) != CUDA_ERROR_OUT_OF_MEMORY) return 17;
  int v = 1;
  if (cuMemcpyHtoD(a, &v, 4) == CUDA_SUCCESS || cuMemcpyHtoD(a, &v, 4) == CUDA_SUCCESS) return 18;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 3 && std::string(argv[1]) == "--child") {
    const std::string name = argv[2];
    if (name == "illegal") return child_illegal();
    if (name == "faults") return child_faults();
    if (name == "init") return cuInit(0) == CUDA_SUCCESS ? 0 : 1;
    return 99;
  }
  setenv("VGPUSIM_DEVICE_MEMORY", "256MiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
