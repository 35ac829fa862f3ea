// Kernels that reach their operands only through TMA tensor maps, as
// CUTLASS, cuBLASLt, cuDNN and Triton's host descriptors do on Hopper: no
// parameter holds an operand's address as a word (the simulated driver's
// maps hide it; the probe checks that). Between launches other buffers push
// the operands off the device (with a cap of 16 MiB). Each step copies a
// 4 MiB tensor, +1 per element, from one buffer to another through a pair of
// maps, and every byte of the result is checked:
//   1. tiled maps (cuTensorMapEncodeTiled, called directly and found through
//      cuGetProcAddress), two CUtensorMap parameters (kernelParams);
//   2. the same maps inside one parameter struct at 64-byte-aligned offsets,
//      launched with a packed `extra` buffer (CUTLASS's Params);
//   3. an im2col map (found with dlsym) as the source;
//   4. an im2col-wide map (found through cuGetProcAddress) as the source;
//   5. the tiled source map re-addressed to a third buffer
//      (cuTensorMapReplaceAddress, found with dlsym).
//
//   tma_probe   prints "tma ok" (exit 0); "tma wrong <step> at <i>: <got> not
//               <want>" (exit 4); "tma fault <step> <error>" when a launch
//               or the copy back failed (exit 5); "tma plain-address" when a
//               map holds its address as 8 plain bytes (exit 6). Any other
//               CUDA error exits 3.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 4u << 20, kInts = kBufferBytes / sizeof(int);
constexpr int kPressure = 6;

using Decode = CUresult (*)(const CUtensorMap*, vgpusimTensorMapInfo*);

Decode decoder() {
  static const auto decode = reinterpret_cast<Decode>(dlsym(RTLD_DEFAULT, "vgpusimTensorMapDecode"));
  if (decode == nullptr) std::exit(3);
  return decode;
}

// The address of element `flat` (dimension 0 fastest) of the map's tensor.
int* element(const vgpusimTensorMapInfo& map, std::uint64_t flat) {
  std::uint64_t offset = 0;
  for (unsigned d = 0; d < map.rank; ++d) {
    const std::uint64_t coordinate = flat % map.globalDim[d];
    flat /= map.globalDim[d];
    offset += d == 0 ? coordinate * map.elementBits / 8 : coordinate * map.globalStrides[d - 1];
  }
  return reinterpret_cast<int*>(map.globalAddress + offset);
}

// out[i] = in[i] + 1 for every element, both reached through their maps
// only. A map that does not decode stops the kernel with a fault (the
// simulator reports CUDA_ERROR_ILLEGAL_ADDRESS), as a bad descriptor would.
void copy_through(const void* in_bytes, const void* out_bytes) {
  vgpusimTensorMapInfo in{}, out{};
  if (decoder()(static_cast<const CUtensorMap*>(in_bytes), &in) != CUDA_SUCCESS ||
      decoder()(static_cast<const CUtensorMap*>(out_bytes), &out) != CUDA_SUCCESS) {
    static volatile std::uintptr_t unmapped = 8;  // volatile: the compiler cannot see it is never mapped
    *reinterpret_cast<volatile int*>(unmapped) = 0;
  }
  for (std::uint64_t i = 0; i < kInts; ++i) *element(out, i) = *element(in, i) + 1;
}

void copy_two_maps(void** params, const vgpusimLaunch*, void*) { copy_through(params[0], params[1]); }

// CUTLASS's mainloop Params: a map at offset 64 and one at 192.
struct Params {
  std::uint64_t tag;
  alignas(64) unsigned char in[sizeof(CUtensorMap)];
  alignas(64) unsigned char out[sizeof(CUtensorMap)];
};
static_assert(offsetof(Params, in) == 64 && offsetof(Params, out) == 192);
void copy_struct(void** params, const vgpusimLaunch*, void*) {
  const auto* p = static_cast<const Params*>(params[0]);
  copy_through(p->in, p->out);
}

CUfunction register_with_alignment(const char* name, vgpusimKernelFn body, std::vector<size_t> sizes,
                                   std::vector<size_t> alignments) {
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) std::exit(3);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = static_cast<unsigned>(sizes.size());
  desc.paramSizes = sizes.data();
  desc.paramAlignments = alignments.data();
  desc.durationNs = 10000;
  CUfunction kernel = nullptr;
  CHECK(reg(&desc, &kernel));
  return kernel;
}

template <typename Fn>
Fn proc_address(const char* name, int version) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  CHECK(cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  if (fn == nullptr) std::exit(3);
  return reinterpret_cast<Fn>(fn);
}
template <typename Fn>
Fn dl_symbol(const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
  if (fn == nullptr) std::exit(3);
  return fn;
}

// A map must not hold its address as 8 plain bytes anywhere, or the word
// scan alone could find it and this probe would prove nothing of the hooks.
void expect_hidden(const CUtensorMap& map, CUdeviceptr address) {
  for (std::size_t at = 0; at + sizeof address <= sizeof map; ++at) {
    CUdeviceptr word = 0;
    std::memcpy(&word, reinterpret_cast<const unsigned char*>(&map) + at, sizeof word);
    if (word == address) {
      std::printf("tma plain-address\n");
      std::exit(6);
    }
  }
}

struct World {
  CUdeviceptr a = 0, b = 0, c = 0;  // sources a and c, destination b
  std::vector<CUdeviceptr> pressure;
  CUfunction add = nullptr;
};

// Every other buffer touched: with a 16 MiB cap the operands go to the host.
void push_out(World& w) {
  for (CUdeviceptr& p : w.pressure) {
    void* params[] = {&p};
    CHECK(cuLaunchKernel(w.add, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
}

void fill(CUdeviceptr buffer, int seed) {
  std::vector<int> host(kInts);
  for (std::size_t i = 0; i < kInts; ++i) host[i] = static_cast<int>(i * 7) + seed;
  CHECK(cuMemcpyHtoD(buffer, host.data(), kBufferBytes));
}

// The launch went through and b holds source + 1, with the source filled
// with `seed`.
void expect_copied(const char* step, CUresult launched, CUdeviceptr b, int seed) {
  std::vector<int> host(kInts);
  CUresult result = launched;
  if (result == CUDA_SUCCESS) result = cuMemcpyDtoH(host.data(), b, kBufferBytes);
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(result, &name);
    std::printf("tma fault %s %s\n", step, name ? name : "?");
    std::exit(5);
  }
  for (std::size_t i = 0; i < kInts; ++i) {
    const int want = static_cast<int>(i * 7) + seed + 1;
    if (host[i] != want) {
      std::printf("tma wrong %s at %zu: %d not %d\n", step, i, host[i], want);
      std::exit(4);
    }
  }
}

}  // namespace

int main() {
  use_primary_context();
  World w;
  w.add = register_add_one("probe_add_one", kInts);
  CUfunction two_maps = register_with_alignment("probe_tma_copy", copy_two_maps, {sizeof(CUtensorMap), sizeof(CUtensorMap)},
                                                {64, 64});
  CUfunction in_struct = register_with_alignment("probe_tma_copy_struct", copy_struct, {sizeof(Params)}, {64});
  for (CUdeviceptr* p : {&w.a, &w.b, &w.c}) CHECK(cuMemAlloc(p, kBufferBytes));
  fill(w.a, 1000);
  fill(w.c, 5000);
  w.pressure.resize(kPressure);
  for (CUdeviceptr& p : w.pressure) {
    CHECK(cuMemAlloc(&p, kBufferBytes));
    CHECK(cuMemsetD32(p, 5, kInts));
  }

  // 1024 x 1024 ints, rows of 4 KiB, read in 32 x 8 boxes.
  const cuuint64_t dims[] = {1024, 1024}, strides[] = {4096};
  const cuuint32_t box[] = {32, 8}, ones[] = {1, 1, 1, 1, 1};
  CUtensorMap map_a{}, map_b{};
  CHECK(cuTensorMapEncodeTiled(&map_a, CU_TENSOR_MAP_DATA_TYPE_INT32, 2, reinterpret_cast<void*>(w.a), dims, strides,
                               box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  const auto encode_tiled = proc_address<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  CHECK(encode_tiled(&map_b, CU_TENSOR_MAP_DATA_TYPE_INT32, 2, reinterpret_cast<void*>(w.b), dims, strides, box, ones,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  expect_hidden(map_a, w.a);
  expect_hidden(map_b, w.b);

  // 1. Two map parameters.
  push_out(w);
  void* params[] = {&map_a, &map_b};
  expect_copied("tiled", cuLaunchKernel(two_maps, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), w.b, 1000);

  // 2. Both maps inside one struct, packed.
  CHECK(cuMemsetD32(w.b, 0, kInts));
  push_out(w);
  Params packed{};
  packed.tag = 42;
  std::memcpy(packed.in, &map_a, sizeof map_a);
  std::memcpy(packed.out, &map_b, sizeof map_b);
  std::size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  expect_copied("struct", cuLaunchKernel(in_struct, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra), w.b, 1000);

  // 3. An im2col source: NHWC, C 64, W 64, H 64, N 4.
  const cuuint64_t nhwc[] = {64, 64, 64, 4}, nhwc_strides[] = {256, 16384, 1048576};
  const int lower[] = {-1, -1}, upper[] = {-1, -1};
  CUtensorMap map_im2col{};
  CHECK(dl_symbol<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col")(
      &map_im2col, CU_TENSOR_MAP_DATA_TYPE_INT32, 4, reinterpret_cast<void*>(w.a), nhwc, nhwc_strides, lower, upper,
      32, 128, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  expect_hidden(map_im2col, w.a);
  CHECK(cuMemsetD32(w.b, 0, kInts));
  push_out(w);
  void* im2col_params[] = {&map_im2col, &map_b};
  expect_copied("im2col", cuLaunchKernel(two_maps, 1, 1, 1, 1, 1, 1, 0, nullptr, im2col_params, nullptr), w.b, 1000);

  // 4. An im2col-wide source: NWC, C 256, W 1024, N 4.
  const cuuint64_t nwc[] = {256, 1024, 4}, nwc_strides[] = {1024, 1048576};
  CUtensorMap map_wide{};
  CHECK(proc_address<PFN_cuTensorMapEncodeIm2colWide_v12080>("cuTensorMapEncodeIm2colWide", 12080)(
      &map_wide, CU_TENSOR_MAP_DATA_TYPE_INT32, 3, reinterpret_cast<void*>(w.a), nwc, nwc_strides, 0, 0, 32, 256,
      ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  expect_hidden(map_wide, w.a);
  CHECK(cuMemsetD32(w.b, 0, kInts));
  push_out(w);
  void* wide_params[] = {&map_wide, &map_b};
  expect_copied("im2col-wide", cuLaunchKernel(two_maps, 1, 1, 1, 1, 1, 1, 0, nullptr, wide_params, nullptr), w.b,
                1000);

  // 5. The tiled source map now over c.
  CHECK(dl_symbol<PFN_cuTensorMapReplaceAddress_v12000>("cuTensorMapReplaceAddress")(&map_a,
                                                                                      reinterpret_cast<void*>(w.c)));
  expect_hidden(map_a, w.c);
  push_out(w);
  expect_copied("replaced", cuLaunchKernel(two_maps, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), w.b, 5000);

  std::printf("tma ok\n");
  return 0;
}
