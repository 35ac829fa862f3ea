// The simulated driver's TMA tensor maps on their own: arguments refused as
// cuda.h documents, a map that decodes to what was encoded, and an address
// never stored as 8 plain bytes (what makes the shim's e2e test prove its
// encode hooks rather than its word scan).
#include <cudaTypedefs.h>

#include <cstring>

#include "sim_test_support.h"

namespace {

using namespace simtest;

constexpr cuuint32_t kOnes[] = {1, 1, 1, 1, 1};

struct Tiled {
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  cuuint32_t rank = 2;
  std::uintptr_t address = 0x7f00'1234'5670;
  cuuint64_t dims[5] = {256, 64, 1, 1, 1};
  cuuint64_t strides[4] = {1024, 65536, 65536, 65536};
  cuuint32_t box[5] = {32, 8, 1, 1, 1};
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;

  CUresult encode(CUtensorMap* map) const {
    return cuTensorMapEncodeTiled(map, type, rank, reinterpret_cast<void*>(address), dims, strides, box,
                                  element_strides, interleave, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, oob);
  }
};

bool holds_plain(const CUtensorMap& map, std::uint64_t address) {
  for (std::size_t at = 0; at + 8 <= sizeof map; ++at) {
    std::uint64_t word = 0;
    std::memcpy(&word, reinterpret_cast<const unsigned char*>(&map) + at, 8);
    if (word == address) return true;
  }
  return false;
}

TEST(SimTensorMaps, ATiledMapDecodesToWhatWasEncoded) {
  Tiled t;
  CUtensorMap map{};
  ASSERT_EQ(t.encode(&map), CUDA_SUCCESS);
  vgpusimTensorMapInfo info{};
  ASSERT_EQ(vgpusimTensorMapDecode(&map, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.kind, VGPUSIM_TENSOR_MAP_TILED);
  EXPECT_EQ(info.dataType, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(info.elementBits, 32u);
  EXPECT_EQ(info.rank, 2u);
  EXPECT_EQ(info.globalAddress, t.address);
  EXPECT_EQ(info.globalDim[0], 256u);
  EXPECT_EQ(info.globalDim[1], 64u);
  EXPECT_EQ(info.globalStrides[0], 1024u);
  EXPECT_EQ(info.boxDim[0], 32u);
  EXPECT_EQ(info.boxDim[1], 8u);
  EXPECT_EQ(info.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
}

TEST(SimTensorMaps, TheAddressIsNeverEightPlainBytesOfAMap) {
  for (std::uintptr_t address : {std::uintptr_t{0x10}, std::uintptr_t{0x7f00'0000'0000}, std::uintptr_t{0x5555'aaaa'0000},
                                  std::uintptr_t{0x7fff'ffff'fff0}}) {
    for (cuuint32_t rank = 1; rank <= 5; ++rank) {
      Tiled t;
      t.address = address;
      t.rank = rank;
      CUtensorMap map{};
      ASSERT_EQ(t.encode(&map), CUDA_SUCCESS) << rank;
      EXPECT_FALSE(holds_plain(map, address)) << std::hex << address << " rank " << rank;
      vgpusimTensorMapInfo info{};
      ASSERT_EQ(vgpusimTensorMapDecode(&map, &info), CUDA_SUCCESS);
      EXPECT_EQ(info.globalAddress, address);
    }
  }
}

TEST(SimTensorMaps, ReplacingTheAddressChangesOnlyTheAddress) {
  Tiled t;
  CUtensorMap map{};
  ASSERT_EQ(t.encode(&map), CUDA_SUCCESS);
  vgpusimTensorMapInfo before{}, after{};
  ASSERT_EQ(vgpusimTensorMapDecode(&map, &before), CUDA_SUCCESS);
  ASSERT_EQ(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(0x6000'0000'0100)), CUDA_SUCCESS);
  ASSERT_EQ(vgpusimTensorMapDecode(&map, &after), CUDA_SUCCESS);
  EXPECT_EQ(after.globalAddress, 0x6000'0000'0100u);
  after.globalAddress = before.globalAddress;
  EXPECT_EQ(std::memcmp(&before, &after, sizeof before), 0);
  EXPECT_EQ(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(0x6000'0000'0108)), CUDA_ERROR_INVALID_VALUE)
      << "16-byte alignment";
  EXPECT_EQ(cuTensorMapReplaceAddress(&map, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUtensorMap garbage{};
  EXPECT_EQ(cuTensorMapReplaceAddress(&garbage, reinterpret_cast<void*>(0x6000'0000'0100)), CUDA_ERROR_INVALID_VALUE);
}

TEST(SimTensorMaps, AMapChangedByHandOrNeverEncodedDoesNotDecode) {
  Tiled t;
  CUtensorMap map{};
  ASSERT_EQ(t.encode(&map), CUDA_SUCCESS);
  map.opaque[11] ^= 0x100;
  vgpusimTensorMapInfo info{};
  EXPECT_EQ(vgpusimTensorMapDecode(&map, &info), CUDA_ERROR_INVALID_VALUE);
  const CUtensorMap zero{};
  EXPECT_EQ(vgpusimTensorMapDecode(&zero, &info), CUDA_ERROR_INVALID_VALUE);
}

TEST(SimTensorMaps, TiledEncodeRefusesWhatTheDriverRefuses) {
  CUtensorMap map{};
  ASSERT_EQ(Tiled{}.encode(&map), CUDA_SUCCESS);
  auto refused = [&](auto change) {
    Tiled t;
    change(t);
    return t.encode(&map) == CUDA_ERROR_INVALID_VALUE;
  };
  EXPECT_TRUE(refused([](Tiled& t) { t.address += 8; })) << "global address 16-byte aligned";
  EXPECT_TRUE(refused([](Tiled& t) { t.address = 0; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.rank = 0; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.rank = 6; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.dims[1] = 0; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.dims[0] = (1ull << 32) + 1; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.strides[0] = 1000; })) << "strides multiples of 16";
  EXPECT_TRUE(refused([](Tiled& t) { t.strides[0] = 1ull << 40; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.box[1] = 0; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.box[1] = 257; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.box[0] = 3; })) << "inner box a multiple of 16 bytes";
  EXPECT_TRUE(refused([](Tiled& t) { t.box[0] = 64; })) << "256 bytes wider than the 128-byte swizzle";
  EXPECT_TRUE(refused([](Tiled& t) { t.element_strides[1] = 9; }));
  EXPECT_TRUE(refused([](Tiled& t) { t.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; })) << "rank 2 interleaved";
  EXPECT_TRUE(refused([](Tiled& t) { t.type = CU_TENSOR_MAP_DATA_TYPE_INT32;
                                     t.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA; }));
  EXPECT_TRUE(refused([](Tiled& t) {  // 32-byte interleave: 32-byte address and the 32-byte swizzle
    t.rank = 3;
    t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    t.address = 0x7f00'1234'5610;  // 16 bytes past a 32-byte boundary
  }));
  Tiled interleaved;  // the same, 32-byte aligned: accepted
  interleaved.rank = 3;
  interleaved.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
  interleaved.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  interleaved.address = 0x7f00'1234'5620;
  EXPECT_EQ(interleaved.encode(&map), CUDA_SUCCESS);
  // A data type past the enum's last value is not asked: forming one is
  // undefined in C++ (its values fit in four bits), and UBSan says so.
  alignas(128) unsigned char storage[sizeof(CUtensorMap) + 64];
  Tiled t;
  EXPECT_EQ(t.encode(reinterpret_cast<CUtensorMap*>(storage + 32)), CUDA_ERROR_INVALID_VALUE) << "64-byte aligned map";
  EXPECT_EQ(t.encode(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(SimTensorMaps, Im2colMapsAreCheckedAndDecode) {
  const cuuint64_t nhwc[] = {64, 32, 32, 2}, strides[] = {128, 4096, 131072};
  const int lower[] = {-1, -1}, upper[] = {1, 1};
  void* address = reinterpret_cast<void*>(0x7f00'0000'0000);
  CUtensorMap map{};
  ASSERT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, address, nhwc, strides, lower, upper, 64,
                                    128, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  vgpusimTensorMapInfo info{};
  ASSERT_EQ(vgpusimTensorMapDecode(&map, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.kind, VGPUSIM_TENSOR_MAP_IM2COL);
  EXPECT_EQ(info.rank, 4u);
  EXPECT_EQ(info.globalAddress, 0x7f00'0000'0000u);
  EXPECT_EQ(info.globalStrides[2], 131072u);
  EXPECT_EQ(info.pixelBoxLowerCorner[1], -1);
  EXPECT_EQ(info.pixelBoxUpperCorner[0], 1);
  EXPECT_EQ(info.channelsPerPixel, 64u);
  EXPECT_EQ(info.pixelsPerColumn, 128u);
  EXPECT_FALSE(holds_plain(map, 0x7f00'0000'0000));
  const int far[] = {-129, 0};  // rank 4: offsets in [-128, 127]
  EXPECT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, address, nhwc, strides, far, upper, 64,
                                    128, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, address, nhwc, strides, lower, upper, 64,
                                    128, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE)
      << "rank 3 to 5";
  EXPECT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, address, nhwc, strides, lower, upper, 257,
                                    128, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE)
      << "at most 256 channels a pixel";

  const cuuint64_t nwc[] = {64, 1024, 2}, nwc_strides[] = {128, 131072};
  ASSERT_EQ(cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, address, nwc, nwc_strides, -2, 2, 64,
                                        256, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128,
                                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS);
  ASSERT_EQ(vgpusimTensorMapDecode(&map, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.kind, VGPUSIM_TENSOR_MAP_IM2COL_WIDE);
  EXPECT_EQ(info.wideMode, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128);
  EXPECT_EQ(info.pixelBoxLowerCorner[0], -2);
  EXPECT_EQ(cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, address, nwc, nwc_strides, -2, 2, 64,
                                        256, kOnes, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
                                        CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE)
      << "the wide modes take the 64B or 128B swizzle";
}

TEST_F(Simulator, AKernelParameterMayDeclareItsAlignment) {
  const size_t sizes[] = {8, sizeof(CUtensorMap), 4}, alignments[] = {0, 64, 0};
  vgpusimKernelDesc desc{};
  desc.name = "aligned_tensor_map_kernel";
  desc.body = [](void**, const vgpusimLaunch*, void*) {};
  desc.paramCount = 3;
  desc.paramSizes = sizes;
  desc.paramAlignments = alignments;
  CUfunction f = nullptr;
  ASSERT_EQ(vgpusimRegisterKernel(&desc, &f), CUDA_SUCCESS);
  std::size_t offset = 0, size = 0;
  ASSERT_EQ(cuFuncGetParamInfo(f, 1, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 64u);
  EXPECT_EQ(size, sizeof(CUtensorMap));
  ASSERT_EQ(cuFuncGetParamInfo(f, 2, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 192u);
}

}  // namespace
