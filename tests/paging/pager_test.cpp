// The pager in process, on the simulated driver: allocations beyond the cap,
// offload and fetch bit-identical at the same address, packing, the host
// limit, and the physical bytes the simulator itself counts.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_driver_ops.h"
#include "trace/recorder.h"
#include "vgpusim.h"
#include "vmm/pager.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

std::uint64_t physical_bytes_now() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  return total - free;
}

class PagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUcontext context = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
  }
  void make_pager(std::uint64_t cap, std::optional<std::uint64_t> host_limit = std::nullopt) {
    cap_ = cap;
    ledger_ = std::make_unique<vmm::CapLedger>([cap](int) { return cap; });
    vmm::PagerOptions options;
    options.arena_bytes = 64 * 1024 * kMiB;
    options.host_limit = host_limit;
    pager_ = std::make_unique<vmm::Pager>(simulated_driver_ops(), *ledger_, recorder_, options);
    baseline_ = physical_bytes_now();
  }
  // Copies `bytes` of a pattern into a paged allocation, as a copy hook would.
  void write(CUdeviceptr p, std::uint64_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(i * 31 + seed);
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(p, data.data(), bytes), CUDA_SUCCESS);
    EXPECT_LE(physical_bytes_now() - baseline_, cap_) << "the simulator's own count";
  }
  bool holds(CUdeviceptr p, std::uint64_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    vmm::Access access;
    EXPECT_EQ(pager_->prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoH(data.data(), p, bytes), CUDA_SUCCESS);
    for (std::uint64_t i = 0; i < bytes; ++i) {
      if (data[i] != static_cast<unsigned char>(i * 31 + seed)) return false;
    }
    return true;
  }

  trace::Recorder recorder_{1000};
  std::uint64_t cap_ = 0, baseline_ = 0;
  std::unique_ptr<vmm::CapLedger> ledger_;
  std::unique_ptr<vmm::Pager> pager_;
};

TEST_F(PagerTest, ThreeTimesTheCapComesBackBitIdenticalAtTheSameAddress) {
  make_pager(8 * kMiB);
  std::vector<CUdeviceptr> buffers(6);
  for (unsigned i = 0; i < buffers.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 4 * kMiB, &buffers[i]), CUDA_SUCCESS) << i;
    write(buffers[i], 4 * kMiB, i);
  }
  for (int round = 0; round < 2; ++round) {
    for (unsigned i = 0; i < buffers.size(); ++i) EXPECT_TRUE(holds(buffers[i], 4 * kMiB, i)) << i;
  }
  const nlohmann::json summary = pager_->summary();
  EXPECT_GE(summary["offloads"].get<int>(), 10);
  EXPECT_EQ(summary["bytes_offloaded"].get<std::uint64_t>(), summary["offloads"].get<std::uint64_t>() * 4 * kMiB);
  EXPECT_LE(ledger_->usage(0).peak, 8 * kMiB);
  for (CUdeviceptr p : buffers) {
    CUresult result = CUDA_ERROR_UNKNOWN;
    ASSERT_TRUE(pager_->free(p, &result));
    EXPECT_EQ(result, CUDA_SUCCESS);
  }
  EXPECT_EQ(pager_->resident_bytes(0), 0u);
}

TEST_F(PagerTest, SmallAllocationsShareAChunk) {
  make_pager(64 * kMiB);
  std::vector<CUdeviceptr> small(100);
  for (unsigned i = 0; i < small.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 512, &small[i]), CUDA_SUCCESS);
    EXPECT_EQ(small[i] % 512, 0u);
    write(small[i], 512, i);
  }
  EXPECT_EQ(ledger_->usage(0).counted, 2 * kMiB) << "100 buffers of 512 bytes in one 2 MiB chunk";
  for (unsigned i = 0; i < small.size(); ++i) EXPECT_TRUE(holds(small[i], 512, i));
  CUresult result = CUDA_SUCCESS;
  EXPECT_TRUE(pager_->free(small[0] + 8, &result));
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE) << "not the start of an allocation";
  for (CUdeviceptr p : small) ASSERT_TRUE(pager_->free(p, &result));
}

TEST_F(PagerTest, HostLimitEndsInOutOfMemoryAndKeepsWhatIsStored) {
  make_pager(4 * kMiB, 4 * kMiB);
  // 8 MiB of room, less one unit kept free to swap through: three units.
  std::vector<CUdeviceptr> buffers(3);
  for (unsigned i = 0; i < buffers.size(); ++i) {
    ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &buffers[i]), CUDA_SUCCESS) << i;
    write(buffers[i], 2 * kMiB, i);
  }
  CUdeviceptr extra = 0;
  EXPECT_EQ(pager_->allocate(0, 2 * kMiB, &extra), CUDA_ERROR_OUT_OF_MEMORY)
      << "4 MiB on the device and 4 MiB on the host are full";
  for (unsigned i = 0; i < buffers.size(); ++i) EXPECT_TRUE(holds(buffers[i], 2 * kMiB, i)) << i;
  CUresult result = CUDA_SUCCESS;
  for (CUdeviceptr p : buffers) ASSERT_TRUE(pager_->free(p, &result));
}

TEST_F(PagerTest, PinnedUnitsStayAndAFullyPinnedCapIsOutOfMemory) {
  make_pager(4 * kMiB);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &a), CUDA_SUCCESS);
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &b), CUDA_SUCCESS);
  CUresult result = CUDA_ERROR_UNKNOWN;
  ASSERT_TRUE(pager_->pin(a, &result));
  ASSERT_TRUE(pager_->pin(b, &result));
  EXPECT_EQ(pager_->allocate(0, 2 * kMiB, &c), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_TRUE(pager_->unpin(b));
  ASSERT_EQ(pager_->allocate(0, 2 * kMiB, &c), CUDA_SUCCESS) << "b can go to the host now";
  for (CUdeviceptr p : {a, b, c}) ASSERT_TRUE(pager_->free(p, &result));
}

}  // namespace
}  // namespace vgpumem::test

int main(int argc, char** argv) {
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
