// The registry of encoded TMA tensor maps (vmm/tensor_maps.h): found by
// their bytes at 64-byte-aligned offsets of a launch's parameters, never
// lost as the table grows, and the extent each describes.
#include "vmm/tensor_maps.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace vgpumem::vmm {
namespace {

// Distinct map bytes for `seed` (what a driver's encoding is, the registry
// never needs to know).
CUtensorMap map_for(std::uint64_t seed) {
  CUtensorMap map{};
  for (std::size_t i = 0; i < TensorMaps::kMapWords; ++i) map.opaque[i] = seed * 0x9E3779B97F4A7C15ull + i;
  return map;
}

std::vector<TensorMapRange> found_in(const TensorMaps& maps, const void* bytes, std::size_t size) {
  std::vector<TensorMapRange> found;
  maps.find_in_parameter(bytes, size, [&](const TensorMapRange& range) { found.push_back(range); });
  return found;
}

TEST(TensorMaps, ARememberedMapIsFoundByItsBytes) {
  TensorMaps maps;
  const CUtensorMap map = map_for(1), other = map_for(2);
  TensorMapRange range;
  EXPECT_FALSE(maps.find(&map, &range));
  maps.remember(&map, {0x7000'0000'0000, 4096});
  ASSERT_TRUE(maps.find(&map, &range));
  EXPECT_EQ(range.address, 0x7000'0000'0000u);
  EXPECT_EQ(range.bytes, 4096u);
  EXPECT_FALSE(maps.find(&other, &range));
  EXPECT_EQ(maps.size(), 1u);
}

TEST(TensorMaps, AParameterIsSearchedAt64ByteAlignedOffsetsOnly) {
  TensorMaps maps;
  const CUtensorMap map = map_for(3);
  maps.remember(&map, {0x1000, 64});
  alignas(64) unsigned char parameter[512] = {};
  std::memcpy(parameter + 192, &map, sizeof map);
  auto found = found_in(maps, parameter, sizeof parameter);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].address, 0x1000u);
  // At an offset no map can have, the same bytes are no map.
  std::memset(parameter, 0, sizeof parameter);
  std::memcpy(parameter + 136, &map, sizeof map);
  EXPECT_TRUE(found_in(maps, parameter, sizeof parameter).empty());
  // A parameter too short to hold the whole map holds none.
  std::memcpy(parameter, &map, sizeof map);
  EXPECT_TRUE(found_in(maps, parameter, sizeof map - 8).empty());
}

TEST(TensorMaps, TheSameBytesRememberedAgainKeepTheWiderRange) {
  TensorMaps maps;
  const CUtensorMap map = map_for(4);
  maps.remember(&map, {0x2000, 1});
  maps.remember(&map, {0x2000, 1 << 20});
  maps.remember(&map, {0x2000, 16});
  TensorMapRange range;
  ASSERT_TRUE(maps.find(&map, &range));
  EXPECT_EQ(range.bytes, 1u << 20);
  EXPECT_EQ(maps.size(), 1u);
}

TEST(TensorMaps, NoMapIsLostAsTheTableGrows) {
  TensorMaps maps;
  constexpr std::uint64_t kMaps = 5000;  // several doublings of the first table
  for (std::uint64_t i = 0; i < kMaps; ++i) {
    const CUtensorMap map = map_for(100 + i);
    maps.remember(&map, {0x10000 * (i + 1), i + 1});
  }
  EXPECT_EQ(maps.size(), kMaps);
  for (std::uint64_t i = 0; i < kMaps; ++i) {
    const CUtensorMap map = map_for(100 + i);
    TensorMapRange range;
    ASSERT_TRUE(maps.find(&map, &range)) << i;
    EXPECT_EQ(range.address, 0x10000 * (i + 1));
    EXPECT_EQ(range.bytes, i + 1);
  }
}

TEST(TensorMaps, ALaunchIsSearchedByParameterByPackedBufferOrByWord) {
  TensorMaps maps;
  const CUtensorMap a = map_for(7), b = map_for(8);
  maps.remember(&a, {0xA000, 16});
  maps.remember(&b, {0xB000, 16});
  std::vector<std::uint64_t> addresses;
  auto collect = [&](const TensorMapRange& range) { addresses.push_back(range.address); };

  // kernelParams: a pointer, then two maps; a parameter under 128 bytes is skipped.
  std::uint64_t pointer = 0;
  const std::vector<std::uint32_t> sizes = {8, sizeof a, sizeof b};
  void* params[] = {&pointer, const_cast<CUtensorMap*>(&a), const_cast<CUtensorMap*>(&b)};
  maps.find_in_launch(&sizes, params, nullptr, nullptr, 0, collect);
  EXPECT_EQ(addresses, (std::vector<std::uint64_t>{0xA000, 0xB000}));

  // The packed form: the buffer from its start, maps at 64 and 256.
  addresses.clear();
  alignas(64) unsigned char buffer[384] = {};
  std::memcpy(buffer + 64, &b, sizeof b);
  std::memcpy(buffer + 256, &a, sizeof a);
  std::size_t size = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  maps.find_in_launch(&sizes, nullptr, extra, nullptr, 0, collect);
  EXPECT_EQ(addresses, (std::vector<std::uint64_t>{0xB000, 0xA000}));

  // No layout: the candidate words, at every word (a map after one 8-byte parameter).
  addresses.clear();
  std::vector<std::uint64_t> words(1 + 2 * TensorMaps::kMapWords);
  std::memcpy(words.data() + 1, &a, sizeof a);
  std::memcpy(words.data() + 1 + TensorMaps::kMapWords, &b, sizeof b);
  maps.find_in_launch(nullptr, params, nullptr, words.data(), words.size(), collect);
  EXPECT_EQ(addresses, (std::vector<std::uint64_t>{0xA000, 0xB000}));
}

TEST(TensorMaps, AnEmptyRegistryFindsNothing) {
  TensorMaps maps;
  const CUtensorMap map = map_for(9);
  EXPECT_TRUE(found_in(maps, &map, sizeof map).empty());
}

TEST(TensorMapExtent, CoversEveryElementTheDimsAndStridesReach) {
  const std::uint64_t dims[] = {1024, 1024}, strides[] = {4096};
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_INT32, 2, dims, strides, CU_TENSOR_MAP_INTERLEAVE_NONE),
            4u << 20);
  // Padded rows: the last row ends its own elements in, not a stride in.
  const std::uint64_t padded[] = {8192};
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dims, padded, CU_TENSOR_MAP_INTERLEAVE_NONE),
            1023u * 8192 + 2048);
  const std::uint64_t one[] = {100};
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 1, one, nullptr, CU_TENSOR_MAP_INTERLEAVE_NONE), 800u);
  // Packed U4: two values a byte.
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 1, one, nullptr, CU_TENSOR_MAP_INTERLEAVE_NONE),
            50u);
  // Interleaved rows are whole 32-byte groups.
  const std::uint64_t nc[] = {4, 2, 2}, nc_strides[] = {32, 64};
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, nc, nc_strides, CU_TENSOR_MAP_INTERLEAVE_16B),
            32u + 32 + 64);
}

TEST(TensorMapExtent, IsCappedWhereTheDriverCapsAStride) {
  const std::uint64_t dims[] = {1ull << 32, 1ull << 32, 1ull << 32}, strides[] = {(1ull << 40) - 16, (1ull << 40) - 16};
  EXPECT_EQ(tensor_map_extent(CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 3, dims, strides, CU_TENSOR_MAP_INTERLEAVE_NONE),
            kMaxTensorMapBytes);
}

// Launches look maps up while encodes add them: every map remembered before
// a reader looked is found, through every growth of the table.
TEST(TensorMaps, ConcurrentReadersFindEveryMapRememberedBeforeThem) {
  TensorMaps maps;
  constexpr std::uint64_t kMaps = 3000;
  std::atomic<std::uint64_t> published{0};
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < kMaps; ++i) {
      const CUtensorMap map = map_for(1000 + i);
      maps.remember(&map, {i + 1, 1});
      published.store(i + 1, std::memory_order_release);
    }
  });
  std::atomic<int> missing{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      for (std::uint64_t seen = 0; seen < kMaps;) {
        seen = published.load(std::memory_order_acquire);
        if (seen == 0) continue;
        const CUtensorMap map = map_for(1000 + seen - 1);
        TensorMapRange range;
        if (!maps.find(&map, &range) || range.address != seen) missing.fetch_add(1);
      }
    });
  }
  writer.join();
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(missing.load(), 0);
}

}  // namespace
}  // namespace vgpumem::vmm
