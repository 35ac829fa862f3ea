// Stream memory operations and peer copies under paging: ten 4 MiB buffers
// (40 MiB, over twice a 16 MiB cap), each step touching buffers only
// through one entry point, kernels over every buffer in between (so under a
// small cap, and at once under torture, what a step names is on the host):
//
//   cuStreamWriteValue32, cuStreamWriteValue64: one word of each buffer
//   cuStreamWaitValue32/64: a word each, whose value the wait asks for
//   cuStreamBatchMemOp: one batch writing a word of three buffers and
//                       waiting on a fourth
//   cuMemcpyPeer(Async), cuMemcpy3DPeer(Async): buffer to buffer
//   cuMemcpyDtoA, cuMemcpyAtoD: a buffer through a CUarray into another
//   cuMemcpyBatchAsync: one batch of buffer to buffer, host to buffer and
//                       buffer to host copies
//   cuMemcpy3DBatchAsync: rows of a buffer into a 2D array, then back
//                       into another buffer with a pointer-to-pointer copy
//                       in the same batch
//   cuTexObjectCreate:  a kernel sums a buffer through a texture object
//                       (its parameters hold the object, not the address)
//   cuMemGetHandleForAddressRange: 2 MiB of a buffer handed out as a
//                       dma-buf, read through it (as a NIC would) after
//                       kernels over every buffer
//   cuMulticastBindAddr, cuMulticastBindMem: 2 MiB of a buffer and a 2 MiB
//                       handle of the program's bound to multicast objects,
//                       written through them (as another GPU would) after
//                       kernels over every buffer
//
// A host mirror of every buffer is kept; all are checked at the end. Prints
// "memop ok"; a wrong int prints "memop mismatch ..." and exits 4; a CUDA
// error exits 3. (Each wait asks for the value its word holds; the
// simulator counts a wait that finds otherwise as "stream_waits_unmet".)
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kMiB = 1u << 20, kBytes = 4 * kMiB, kInts = kBytes / 4;
constexpr int kBuffers = 10;

struct Buffers {
  std::vector<CUdeviceptr> device;
  std::vector<std::vector<std::uint32_t>> mirror;
};

Buffers make_buffers(CUstream stream) {
  Buffers b;
  for (int i = 0; i < kBuffers; ++i) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, kBytes));
    CHECK(cuMemsetD32Async(p, static_cast<unsigned>(i * 1000), kInts, stream));
    b.device.push_back(p);
    b.mirror.emplace_back(kInts, static_cast<std::uint32_t>(i * 1000));
  }
  return b;
}

// A kernel adds one to every int of every buffer: each is resident in turn,
// the others pushed out.
void pressure(Buffers& b, CUfunction add, CUstream stream) {
  for (int i = 0; i < kBuffers; ++i) {
    void* params[] = {&b.device[static_cast<std::size_t>(i)]};
    CHECK(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    for (std::uint32_t& v : b.mirror[static_cast<std::size_t>(i)]) ++v;
  }
}

void words(Buffers& b, CUfunction add, CUstream stream) {
  for (int i = 0; i < kBuffers; ++i) {
    auto& m = b.mirror[static_cast<std::size_t>(i)];
    const CUdeviceptr p = b.device[static_cast<std::size_t>(i)];
    CHECK(cuStreamWriteValue32(stream, p + 4 * 7, 0xA000u + static_cast<unsigned>(i), 0));
    m[7] = 0xA000u + static_cast<unsigned>(i);
  }
  pressure(b, add, stream);
  for (int i = 0; i < kBuffers; ++i) {
    auto& m = b.mirror[static_cast<std::size_t>(i)];
    const std::uint64_t wide = 0xB000'0000'0000ull + static_cast<std::uint64_t>(i);
    CHECK(cuStreamWriteValue64(stream, b.device[static_cast<std::size_t>(i)] + 8 * 5, wide, 0));
    std::memcpy(&m[10], &wide, sizeof wide);
  }
  pressure(b, add, stream);
  for (int i = 0; i < kBuffers; ++i) {
    const auto& m = b.mirror[static_cast<std::size_t>(i)];
    const CUdeviceptr p = b.device[static_cast<std::size_t>(i)];
    CHECK(cuStreamWaitValue32(stream, p + 4 * 7, m[7], CU_STREAM_WAIT_VALUE_EQ));
    std::uint64_t wide = 0;
    std::memcpy(&wide, &m[10], sizeof wide);
    CHECK(cuStreamWaitValue64(stream, p + 8 * 5, wide, CU_STREAM_WAIT_VALUE_EQ));
  }
  pressure(b, add, stream);
  // One batch: writes to buffers 1, 4 and 8, a wait on buffer 6.
  CUstreamBatchMemOpParams ops[4]{};
  const int written[3] = {1, 4, 8};
  for (int k = 0; k < 3; ++k) {
    ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[k].writeValue.address = b.device[static_cast<std::size_t>(written[k])] + 4 * 100;
    ops[k].writeValue.value = 0xC000u + static_cast<unsigned>(k);
    b.mirror[static_cast<std::size_t>(written[k])][100] = 0xC000u + static_cast<unsigned>(k);
  }
  ops[3].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[3].waitValue.address = b.device[6] + 4 * 7;
  ops[3].waitValue.value = b.mirror[6][7];
  ops[3].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  CHECK(cuStreamBatchMemOp(stream, 4, ops, 0));
  pressure(b, add, stream);
}

void peers(Buffers& b, CUfunction add, CUstream stream) {
  CUcontext context = nullptr;
  CHECK(cuCtxGetCurrent(&context));
  // The synchronous copies run on the legacy stream, which the program's
  // non-blocking stream does not wait for: its work is finished first.
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyPeer(b.device[2], context, b.device[9], context, kBytes));
  b.mirror[2] = b.mirror[9];
  pressure(b, add, stream);
  CHECK(cuMemcpyPeerAsync(b.device[5], context, b.device[0], context, kBytes / 2, stream));
  std::copy(b.mirror[0].begin(), b.mirror[0].begin() + kInts / 2, b.mirror[5].begin());
  pressure(b, add, stream);
  // 3D: 64 rows of 4 KiB from buffer 3 (row pitch 16 KiB) into buffer 7
  // (rows packed), in two slices of 32 rows.
  for (int async = 0; async < 2; ++async) {
    CUDA_MEMCPY3D_PEER c{};
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = b.device[3];
    c.srcContext = context;
    c.srcPitch = 16384;
    c.srcHeight = 32;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = b.device[7];
    c.dstContext = context;
    c.dstXInBytes = async * 262144u * 2;
    c.dstPitch = 4096;
    c.dstHeight = 32;
    c.WidthInBytes = 4096;
    c.Height = 32;
    c.Depth = 2;
    if (async) {
      CHECK(cuMemcpy3DPeerAsync(&c, stream));
    } else {
      CHECK(cuStreamSynchronize(stream));
      CHECK(cuMemcpy3DPeer(&c));
    }
    for (std::size_t row = 0; row < 64; ++row) {
      std::memcpy(b.mirror[7].data() + (c.dstXInBytes + row * 4096) / 4, b.mirror[3].data() + row * 16384 / 4, 4096);
    }
    pressure(b, add, stream);
  }
}

void through_array(Buffers& b, CUfunction add, CUstream stream) {
  constexpr std::size_t kArrayBytes = kMiB;
  CUDA_ARRAY_DESCRIPTOR shape{};
  shape.Width = kArrayBytes / 4;
  shape.Height = 0;
  shape.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  shape.NumChannels = 1;
  CUarray array = nullptr;
  CHECK(cuArrayCreate(&array, &shape));
  CHECK(cuStreamSynchronize(stream));  // the array copies run on the legacy stream
  CHECK(cuMemcpyDtoA(array, 0, b.device[4], kArrayBytes));
  const std::vector<std::uint32_t> in_array(b.mirror[4].begin(), b.mirror[4].begin() + kArrayBytes / 4);
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemcpyAtoD(b.device[6] + 64 * 1024, array, 0, kArrayBytes));
  std::copy(in_array.begin(), in_array.end(), b.mirror[6].begin() + 64 * 1024 / 4);
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuArrayDestroy(array));
}

// One batch: buffer 1 into buffer 8, host ints into buffer 3, buffer 0 out
// to the host (checked once the stream is done).
bool batch(Buffers& b, CUfunction add, CUstream stream) {
  std::vector<std::uint32_t> from_host(kInts / 8), to_host(kInts / 16, 0);
  for (std::size_t i = 0; i < from_host.size(); ++i) from_host[i] = 0xD0000u + static_cast<std::uint32_t>(i);
  CUdeviceptr dsts[3] = {b.device[8] + kMiB, b.device[3], reinterpret_cast<CUdeviceptr>(to_host.data())};
  CUdeviceptr srcs[3] = {b.device[1], reinterpret_cast<CUdeviceptr>(from_host.data()), b.device[0] + 4096};
  size_t sizes[3] = {kMiB, from_host.size() * 4, to_host.size() * 4};
  CUmemcpyAttributes order{};
  order.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t first = 0;
  CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &order, &first, 1, stream));
  std::copy(b.mirror[1].begin(), b.mirror[1].begin() + kMiB / 4, b.mirror[8].begin() + kMiB / 4);
  std::copy(from_host.begin(), from_host.end(), b.mirror[3].begin());
  const std::vector<std::uint32_t> expected(b.mirror[0].begin() + 1024, b.mirror[0].begin() + 1024 + to_host.size());
  CHECK(cuStreamSynchronize(stream));
  if (to_host != expected) {
    std::printf("memop mismatch: a batch copy to the host\n");
    return false;
  }
  pressure(b, add, stream);
  return true;
}

// A 2D array of 256 x 64 ints: 128 x 32 of them written from rows of
// buffer 5 (1024-int rows, starting 128 KiB in), with another batch reading
// them back into buffer 9 (packed, 2 MiB in) and copying 8 KiB-wide rows of
// buffer 1 into buffer 4 (pointer to pointer: extents in bytes).
void batch_3d(Buffers& b, CUfunction add, CUstream stream) {
  constexpr std::size_t kWidth = 256, kHeight = 64, kCopyWidth = 128, kCopyHeight = 32;
  CUDA_ARRAY3D_DESCRIPTOR shape{};
  shape.Width = kWidth;
  shape.Height = kHeight;
  shape.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  shape.NumChannels = 1;
  CUarray array = nullptr;
  CHECK(cuArray3DCreate(&array, &shape));
  CUDA_MEMCPY3D_BATCH_OP in{};
  in.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  in.src.op.ptr.ptr = b.device[5] + 128 * 1024;
  in.src.op.ptr.rowLength = 1024;
  in.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  in.dst.op.array.array = array;
  in.dst.op.array.offset = {16, 8, 0};
  in.extent = {kCopyWidth, kCopyHeight, 1};
  in.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CHECK(cuMemcpy3DBatchAsync(1, &in, 0, stream));
  std::vector<std::uint32_t> rows(kCopyWidth * kCopyHeight);  // what the array now holds there
  for (std::size_t y = 0; y < kCopyHeight; ++y) {
    std::copy_n(b.mirror[5].begin() + 32 * 1024 + y * 1024, kCopyWidth, rows.begin() + y * kCopyWidth);
  }
  pressure(b, add, stream);
  CUDA_MEMCPY3D_BATCH_OP out[2]{};
  out[0].src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  out[0].src.op.array.array = array;
  out[0].src.op.array.offset = {16, 8, 0};
  out[0].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  out[0].dst.op.ptr.ptr = b.device[9] + 2 * kMiB;
  out[0].extent = {kCopyWidth, kCopyHeight, 1};
  out[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  out[1].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  out[1].src.op.ptr.ptr = b.device[1];
  out[1].src.op.ptr.rowLength = 16384;
  out[1].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  out[1].dst.op.ptr.ptr = b.device[4] + kMiB;
  out[1].extent = {8192, 16, 1};
  out[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CHECK(cuMemcpy3DBatchAsync(2, out, 0, stream));
  std::copy(rows.begin(), rows.end(), b.mirror[9].begin() + 2 * kMiB / 4);
  for (std::size_t y = 0; y < 16; ++y) {
    std::copy_n(b.mirror[1].begin() + y * 16384 / 4, 8192 / 4, b.mirror[4].begin() + (kMiB + y * 8192) / 4);
  }
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuArrayDestroy(array));
}

// out[0] = the sum of the ints of a linear texture's memory.
void sum_texture(void** params, const vgpusimLaunch*, void*) {
  using Resource = CUresult (*)(CUtexObject, CUDA_RESOURCE_DESC*);
  static const auto resource_of = reinterpret_cast<Resource>(dlsym(RTLD_DEFAULT, "vgpusimTexObjectResource"));
  CUtexObject texture = 0;
  std::int64_t* out = nullptr;
  std::memcpy(&texture, params[0], sizeof texture);
  std::memcpy(&out, params[1], sizeof out);
  CUDA_RESOURCE_DESC resource{};
  if (resource_of == nullptr || resource_of(texture, &resource) != CUDA_SUCCESS) {
    *out = -1;
    return;
  }
  const auto* ints = reinterpret_cast<const std::uint32_t*>(resource.res.linear.devPtr);
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < resource.res.linear.sizeInBytes / 4; ++i) sum += ints[i];
  *out = sum;
}

// Buffer 2 read through a texture object after everything else has pushed
// it out, twice, then the object destroyed (the buffer pages again).
bool texture(Buffers& b, CUfunction add, CUstream stream) {
  static const CUfunction sum = register_probe_kernel("memop_sum_texture", sum_texture, {8, 8});
  CUDA_RESOURCE_DESC resource{};
  resource.resType = CU_RESOURCE_TYPE_LINEAR;
  resource.res.linear.devPtr = b.device[2];
  resource.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
  resource.res.linear.numChannels = 1;
  resource.res.linear.sizeInBytes = kBytes;
  CUDA_TEXTURE_DESC sampling{};
  sampling.flags = CU_TRSF_READ_AS_INTEGER;
  // Read first, so the buffer is on the device when the object is made:
  // only the object can keep it there for the kernels after.
  std::uint32_t first = 0;
  CHECK(cuMemcpyDtoHAsync(&first, b.device[2], sizeof first, stream));
  CHECK(cuStreamSynchronize(stream));
  CUtexObject object = 0;
  CHECK(cuTexObjectCreate(&object, &resource, &sampling, nullptr));
  CUdeviceptr out = 0;
  CHECK(cuMemAlloc(&out, sizeof(std::int64_t)));
  for (int round = 0; round < 2; ++round) {
    pressure(b, add, stream);
    void* params[] = {&object, &out};
    CHECK(cuLaunchKernel(sum, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    std::int64_t got = 0;
    CHECK(cuMemcpyDtoHAsync(&got, out, sizeof got, stream));
    CHECK(cuStreamSynchronize(stream));
    std::int64_t expected = 0;
    for (std::uint32_t v : b.mirror[2]) expected += v;
    if (got != expected) {
      std::printf("memop mismatch: the sum through a texture is %lld, expected %lld\n", static_cast<long long>(got),
                  static_cast<long long>(expected));
      return false;
    }
  }
  CHECK(cuTexObjectDestroy(object));
  CHECK(cuMemFree(out));
  pressure(b, add, stream);
  return true;
}

bool dma_buf(Buffers& b, CUfunction add, CUstream stream) {
  using Read = CUresult (*)(int, unsigned long long, void*, size_t);
  static const auto read = reinterpret_cast<Read>(dlsym(RTLD_DEFAULT, "vgpusimDmaBufRead"));
  // Read first, so the buffer is on the device when it is exported: only the
  // export can keep its pages for the kernels after.
  std::uint32_t first = 0;
  CHECK(cuMemcpyDtoHAsync(&first, b.device[9], sizeof first, stream));
  CHECK(cuStreamSynchronize(stream));
  int fd = -1;
  CHECK(cuMemGetHandleForAddressRange(&fd, b.device[9] + kMiB, 2 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  pressure(b, add, stream);
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  std::vector<std::uint32_t> seen(2 * kMiB / 4);
  if (read == nullptr || read(fd, 0, seen.data(), 2 * kMiB) != CUDA_SUCCESS) {
    std::printf("memop mismatch: the dma-buf cannot be read\n");
    return false;
  }
  ::close(fd);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] != b.mirror[9][kMiB / 4 + i]) {
      std::printf("memop mismatch: the dma-buf reads %#x at int %zu, the buffer holds %#x\n", seen[i], i,
                  b.mirror[9][kMiB / 4 + i]);
      return false;
    }
  }
  return true;
}

bool multicast(Buffers& b, CUfunction add, CUstream stream) {
  using Write = CUresult (*)(CUmemGenericAllocationHandle, unsigned long long, const void*, size_t);
  static const auto write = reinterpret_cast<Write>(dlsym(RTLD_DEFAULT, "vgpusimMulticastWrite"));
  CUmulticastObjectProp team{};
  team.numDevices = 1;
  team.size = 2 * kMiB;
  CUmemGenericAllocationHandle by_address = 0, by_handle = 0;
  CHECK(cuMulticastCreate(&by_address, &team));
  CHECK(cuMulticastAddDevice(by_address, 0));
  CHECK(cuMulticastCreate(&by_handle, &team));
  CHECK(cuMulticastAddDevice(by_handle, 0));
  std::uint32_t first = 0;  // buffer 8 on the device when it is bound
  CHECK(cuMemcpyDtoHAsync(&first, b.device[8], sizeof first, stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMulticastBindAddr(by_address, 0, b.device[8] + 2 * kMiB, 2 * kMiB, 0));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle own = 0;
  CHECK(cuMemCreate(&own, 2 * kMiB, &prop, 0));
  CUdeviceptr mapped = 0;
  CHECK(cuMemAddressReserve(&mapped, 2 * kMiB, 0, 0, 0));
  CHECK(cuMemMap(mapped, 2 * kMiB, 0, own, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(mapped, 2 * kMiB, &access, 1));
  CHECK(cuMemsetD32Async(mapped, 0x5A5Au, 2 * kMiB / 4, stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMulticastBindMem(by_handle, 0, own, 0, 2 * kMiB, 0));
  pressure(b, add, stream);
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  // Another GPU of the team writes 1 KiB through each object.
  const std::vector<std::uint32_t> words(256, 0xC0FFEEu);
  if (write == nullptr || write(by_address, 4096, words.data(), 1024) != CUDA_SUCCESS ||
      write(by_handle, 8192, words.data(), 1024) != CUDA_SUCCESS) {
    std::printf("memop mismatch: a multicast write found nothing bound\n");
    return false;
  }
  std::fill_n(b.mirror[8].begin() + (2 * kMiB + 4096) / 4, 256, 0xC0FFEEu);
  pressure(b, add, stream);
  CHECK(cuStreamSynchronize(stream));
  std::vector<std::uint32_t> seen(2 * kMiB / 4);
  CHECK(cuMemcpyDtoH(seen.data(), mapped, 2 * kMiB));
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const std::uint32_t expected = i >= 2048 && i < 2048 + 256 ? 0xC0FFEEu : 0x5A5Au;
    if (seen[i] != expected) {
      std::printf("memop mismatch: the bound handle holds %#x at int %zu, expected %#x\n", seen[i], i, expected);
      return false;
    }
  }
  CHECK(cuMulticastUnbind(by_address, 0, 0, 2 * kMiB));
  CHECK(cuMulticastUnbind(by_handle, 0, 0, 2 * kMiB));
  CHECK(cuMemUnmap(mapped, 2 * kMiB));
  CHECK(cuMemRelease(own));
  CHECK(cuMemAddressFree(mapped, 2 * kMiB));
  return true;
}

bool check(const Buffers& b) {
  std::vector<std::uint32_t> back(kInts);
  for (int i = 0; i < kBuffers; ++i) {
    CHECK(cuMemcpyDtoH(back.data(), b.device[static_cast<std::size_t>(i)], kBytes));
    const auto& m = b.mirror[static_cast<std::size_t>(i)];
    for (std::size_t k = 0; k < kInts; ++k) {
      if (back[k] != m[k]) {
        std::printf("memop mismatch buffer %d int %zu: %#x, expected %#x\n", i, k, back[k], m[k]);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int main() {
  use_primary_context();
  const CUfunction add = register_add_one("memop_add_one", kInts);
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  Buffers buffers = make_buffers(stream);
  pressure(buffers, add, stream);
  words(buffers, add, stream);
  peers(buffers, add, stream);
  through_array(buffers, add, stream);
  if (!batch(buffers, add, stream)) return 4;
  batch_3d(buffers, add, stream);
  if (!texture(buffers, add, stream)) return 4;
  if (!dma_buf(buffers, add, stream)) return 4;
  if (!multicast(buffers, add, stream)) return 4;
  CHECK(cuStreamSynchronize(stream));
  if (!check(buffers)) return 4;
  for (CUdeviceptr p : buffers.device) CHECK(cuMemFree(p));
  std::printf("memop ok\n");
  return 0;
}
