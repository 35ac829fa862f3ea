// TMA tensor maps: cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
// cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress, checking their
// arguments as cuda.h documents (CUDA_ERROR_INVALID_VALUE otherwise), and
// vgpusimTensorMapDecode for simulated kernels that read through a map.
//
// The real map is opaque and its layout undocumented, so the simulated one
// deliberately keeps the address where no word scan finds it: shifted,
// scrambled and split into two 22-bit halves in separate places. A test of
// the shim then proves that the encode hooks, not the scan of argument
// words, make a map's memory resident. A checksum makes a map changed by
// hand (or never encoded) fail to decode.
#include <cstring>

#include "sim.h"

namespace vgpusim {
namespace {

constexpr std::uint32_t kMagic = 0x4D545356;  // "VSTM"
constexpr std::uint64_t kScramble = 0x5A3C96E1F0Bull;  // 44 bits
constexpr std::size_t kKind = 4, kType = 5, kRank = 6, kInterleave = 7, kSwizzle = 8, kL2 = 9, kOob = 10,
                      kWideMode = 11, kDims = 12, kStrides = 32, kBox = 52, kElementStrides = 57, kLower = 62,
                      kUpper = 68, kChannels = 74, kPixels = 76, kAddressLow = 84, kAddressHigh = 100, kSum = 124;

enum Kind : unsigned char { tiled = VGPUSIM_TENSOR_MAP_TILED, im2col = VGPUSIM_TENSOR_MAP_IM2COL,
                            im2col_wide = VGPUSIM_TENSOR_MAP_IM2COL_WIDE };

void put(unsigned char* map, std::size_t at, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) map[at + i] = static_cast<unsigned char>(value >> (8 * i));
}
std::uint64_t get(const unsigned char* map, std::size_t at, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= std::uint64_t{map[at + i]} << (8 * i);
  return value;
}
std::uint32_t checksum(const unsigned char* map) {
  std::uint32_t sum = 2166136261u;  // FNV-1a over everything before the sum
  for (std::size_t i = 0; i < kSum; ++i) sum = (sum ^ map[i]) * 16777619u;
  return sum;
}

// Bits per element: the packed types count U4/U6 values, one byte a value
// in the ALIGN16B layouts (their gaps included).
unsigned element_bits(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B: case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: return 8;
    default: return 32;
  }
}
bool packed_16b(CUtensorMapDataType type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}
bool floating(CUtensorMapDataType type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
         type == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 || type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
         type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
         type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

bool address_ok(const void* address, CUtensorMapDataType type, CUtensorMapInterleave interleave) {
  const auto bits = reinterpret_cast<std::uint64_t>(address);
  const std::uint64_t align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed_16b(type) ? 32 : 16;
  // The simulator keeps 44 bits of address >> 4: all of a 48-bit user space.
  return address != nullptr && bits % align == 0 && bits < (1ull << 48);
}

// What every encode shares: the map, the type, the global tensor and the
// enums. `box_inner` is the bytes of the box's inner dimension (for swizzle).
bool tensor_ok(const CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, cuuint32_t min_rank,
               const void* address, const cuuint64_t* dims, const cuuint64_t* strides,
               const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
               CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob, std::uint64_t box_inner) {
  if (map == nullptr || reinterpret_cast<std::uintptr_t>(map) % 64 != 0) return false;
  if (type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B || rank < min_rank || rank > 5) return false;
  if (interleave > CU_TENSOR_MAP_INTERLEAVE_32B || swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
      l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B || oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
    return false;
  }
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) return false;
  if (!address_ok(address, type, interleave) || dims == nullptr || element_strides == nullptr) return false;
  if (rank > 1 && strides == nullptr) return false;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32)) return false;
    if (element_strides[i] == 0 || element_strides[i] > 8) return false;
  }
  if (packed_16b(type) && dims[0] % 128 != 0) return false;
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && dims[0] % 2 != 0) return false;
  const std::uint64_t stride_align = interleave == CU_TENSOR_MAP_INTERLEAVE_32B || packed_16b(type) ? 32 : 16;
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % stride_align != 0 || strides[i] >= (1ull << 40)) return false;
  }
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) return false;
  if (type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return false;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    const std::uint64_t span = swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64 : 128;
    if (box_inner > span) return false;
  }
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !floating(type)) return false;
  return true;
}

void write_address(unsigned char* map, const void* address) {
  const std::uint64_t scrambled = (reinterpret_cast<std::uint64_t>(address) >> 4) ^ kScramble;
  put(map, kAddressLow, scrambled & 0x3FFFFF, 3);
  put(map, kAddressHigh, scrambled >> 22, 3);
}
std::uint64_t read_address(const unsigned char* map) {
  const std::uint64_t scrambled = get(map, kAddressLow, 3) | (get(map, kAddressHigh, 3) << 22);
  return (scrambled ^ kScramble) << 4;
}

void seal(unsigned char* map) { put(map, kSum, checksum(map), 4); }

// The fields every kind stores, then the address; the caller adds its own
// and seals.
void write_common(unsigned char* map, Kind kind, CUtensorMapDataType type, cuuint32_t rank, const void* address,
                  const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* element_strides,
                  CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                  CUtensorMapFloatOOBfill oob) {
  std::memset(map, 0, sizeof(CUtensorMap));
  put(map, 0, kMagic, 4);
  map[kKind] = kind;
  map[kType] = static_cast<unsigned char>(type);
  map[kRank] = static_cast<unsigned char>(rank);
  map[kInterleave] = static_cast<unsigned char>(interleave);
  map[kSwizzle] = static_cast<unsigned char>(swizzle);
  map[kL2] = static_cast<unsigned char>(l2);
  map[kOob] = static_cast<unsigned char>(oob);
  for (cuuint32_t i = 0; i < rank; ++i) {
    put(map, kDims + 4 * i, dims[i] - 1, 4);
    map[kElementStrides + i] = static_cast<unsigned char>(element_strides[i]);
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) put(map, kStrides + 5 * i, strides[i], 5);
  write_address(map, address);
}

}  // namespace
}  // namespace vgpusim

using namespace vgpusim;

SIM_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType type, cuuint32_t rank,
                                           void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                                           const cuuint32_t* box, const cuuint32_t* element_strides,
                                           CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                           CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  Simulator::get().count("cuTensorMapEncodeTiled");
  if (box == nullptr || rank == 0 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256) return CUDA_ERROR_INVALID_VALUE;
  }
  const std::uint64_t box_inner = box[0] * element_bits(type) / 8;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && box_inner % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (packed_16b(type) && box[0] != 128) return CUDA_ERROR_INVALID_VALUE;
  if (!tensor_ok(tensorMap, type, rank, 1, address, dims, strides, element_strides, interleave, swizzle, l2, oob,
                 box_inner)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* map = reinterpret_cast<unsigned char*>(tensorMap);
  write_common(map, tiled, type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob);
  for (cuuint32_t i = 0; i < rank; ++i) map[kBox + i] = static_cast<unsigned char>(box[i] - 1);
  seal(map);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuTensorMapEncodeIm2col(CUtensorMap* tensorMap, CUtensorMapDataType type, cuuint32_t rank,
                                            void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                                            const int* lower, const int* upper, cuuint32_t channels,
                                            cuuint32_t pixels, const cuuint32_t* element_strides,
                                            CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  Simulator::get().count("cuTensorMapEncodeIm2col");
  if (lower == nullptr || upper == nullptr || rank < 3 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  // One offset a spatial dimension (W; H, W; D, H, W), narrower as the rank grows.
  const int limit = rank == 3 ? 32768 : rank == 4 ? 128 : 16;
  for (cuuint32_t i = 0; i + 2 < rank; ++i) {
    if (lower[i] < -limit || lower[i] >= limit || upper[i] < -limit || upper[i] >= limit) return CUDA_ERROR_INVALID_VALUE;
  }
  if (channels == 0 || channels > 256 || pixels == 0 || pixels > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (packed_16b(type) && channels != 128) return CUDA_ERROR_INVALID_VALUE;
  if (!tensor_ok(tensorMap, type, rank, 3, address, dims, strides, element_strides, interleave, swizzle, l2, oob,
                 std::uint64_t{channels} * element_bits(type) / 8)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* map = reinterpret_cast<unsigned char*>(tensorMap);
  write_common(map, im2col, type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob);
  for (cuuint32_t i = 0; i + 2 < rank; ++i) {
    put(map, kLower + 2 * i, static_cast<std::uint16_t>(lower[i]), 2);
    put(map, kUpper + 2 * i, static_cast<std::uint16_t>(upper[i]), 2);
  }
  put(map, kChannels, channels, 2);
  put(map, kPixels, pixels, 2);
  seal(map);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuTensorMapEncodeIm2colWide(CUtensorMap* tensorMap, CUtensorMapDataType type, cuuint32_t rank,
                                                void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                                                int lower, int upper, cuuint32_t channels, cuuint32_t pixels,
                                                const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                                CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle,
                                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  Simulator::get().count("cuTensorMapEncodeIm2colWide");
  if (rank < 3 || rank > 5 || mode > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128) return CUDA_ERROR_INVALID_VALUE;
  const int limit = rank == 3 ? 32768 : rank == 4 ? 128 : 16;
  if (lower < -limit || lower >= limit || upper < -limit || upper >= limit) return CUDA_ERROR_INVALID_VALUE;
  if (channels == 0 || channels > 256 || pixels == 0 || pixels > 1024) return CUDA_ERROR_INVALID_VALUE;
  // The wide modes take no interleave and only the 64B and 128B swizzles.
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ||
      (swizzle != CU_TENSOR_MAP_SWIZZLE_64B && swizzle != CU_TENSOR_MAP_SWIZZLE_128B)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!tensor_ok(tensorMap, type, rank, 3, address, dims, strides, element_strides, interleave, swizzle, l2, oob,
                 std::uint64_t{channels} * element_bits(type) / 8)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* map = reinterpret_cast<unsigned char*>(tensorMap);
  write_common(map, im2col_wide, type, rank, address, dims, strides, element_strides, interleave, swizzle, l2, oob);
  map[kWideMode] = static_cast<unsigned char>(mode);
  put(map, kLower, static_cast<std::uint16_t>(lower), 2);
  put(map, kUpper, static_cast<std::uint16_t>(upper), 2);
  put(map, kChannels, channels, 2);
  put(map, kPixels, pixels, 2);
  seal(map);
  return CUDA_SUCCESS;
}

// Only the address changes, and it must meet the alignment the map's type
// and interleave ask for; a map the simulator did not encode is refused.
SIM_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap* tensorMap, void* address) {
  Simulator::get().count("cuTensorMapReplaceAddress");
  vgpusimTensorMapInfo info;
  if (vgpusimTensorMapDecode(tensorMap, &info) != CUDA_SUCCESS ||
      reinterpret_cast<std::uintptr_t>(tensorMap) % 64 != 0 ||
      !address_ok(address, info.dataType, info.interleave)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* map = reinterpret_cast<unsigned char*>(tensorMap);
  write_address(map, address);
  seal(map);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult vgpusimTensorMapDecode(const CUtensorMap* tensorMap, vgpusimTensorMapInfo* info) {
  if (tensorMap == nullptr || info == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto* map = reinterpret_cast<const unsigned char*>(tensorMap);
  if (get(map, 0, 4) != kMagic || get(map, kSum, 4) != checksum(map)) return CUDA_ERROR_INVALID_VALUE;
  *info = vgpusimTensorMapInfo{};
  info->kind = map[kKind];
  info->dataType = static_cast<CUtensorMapDataType>(map[kType]);
  info->rank = map[kRank];
  info->globalAddress = read_address(map);
  info->elementBits = element_bits(info->dataType);
  for (unsigned i = 0; i < info->rank; ++i) {
    info->globalDim[i] = get(map, kDims + 4 * i, 4) + 1;
    info->elementStrides[i] = map[kElementStrides + i];
    if (info->kind == VGPUSIM_TENSOR_MAP_TILED) info->boxDim[i] = map[kBox + i] + 1u;
  }
  for (unsigned i = 0; i + 1 < info->rank; ++i) info->globalStrides[i] = get(map, kStrides + 5 * i, 5);
  info->interleave = static_cast<CUtensorMapInterleave>(map[kInterleave]);
  info->swizzle = static_cast<CUtensorMapSwizzle>(map[kSwizzle]);
  info->l2Promotion = static_cast<CUtensorMapL2promotion>(map[kL2]);
  info->oobFill = static_cast<CUtensorMapFloatOOBfill>(map[kOob]);
  if (info->kind != VGPUSIM_TENSOR_MAP_TILED) {
    for (unsigned i = 0; i < 3; ++i) {
      info->pixelBoxLowerCorner[i] = static_cast<std::int16_t>(get(map, kLower + 2 * i, 2));
      info->pixelBoxUpperCorner[i] = static_cast<std::int16_t>(get(map, kUpper + 2 * i, 2));
    }
    info->channelsPerPixel = static_cast<cuuint32_t>(get(map, kChannels, 2));
    info->pixelsPerColumn = static_cast<cuuint32_t>(get(map, kPixels, 2));
    info->wideMode = static_cast<CUtensorMapIm2ColWideMode>(map[kWideMode]);
  }
  return CUDA_SUCCESS;
}
