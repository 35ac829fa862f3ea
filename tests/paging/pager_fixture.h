// The pager in process on the simulated driver: a fixture that makes a pager
// under a cap, writes patterns into paged memory as a copy hook would, and
// checks they are still there. Shared by the pager's test files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "sim_driver_ops.h"
#include "trace/recorder.h"
#include "vgpusim.h"
#include "vmm/access_feed.h"
#include "vmm/cap_ledger.h"
#include "vmm/pager.h"

namespace vgpumem::test {

inline constexpr std::uint64_t kMiB = 1u << 20;
inline constexpr std::uint64_t kChunk = 2 * kMiB;

inline std::uint64_t physical_bytes_now() {
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  return total - free;
}

// Whether the driver itself can read [address, address + bytes) now, with
// no pager in between: true only while it is mapped. (A copy from an
// unmapped range is refused when it is made, and poisons nothing.)
inline bool mapped_now(CUdeviceptr address, std::uint64_t bytes) {
  std::vector<unsigned char> data(bytes);
  return cuMemcpyDtoH(data.data(), address, bytes) == CUDA_SUCCESS;
}

// Polls `done` for up to thirty seconds of real time (ThreadSanitizer and a
// loaded two-core machine make a thread's next pass slow, not absent).
template <typename Done>
bool eventually(Done&& done) {
  for (int i = 0; i < 30000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// Catches the first unit each operation names (an access feed is told of
// every access): how a test learns the unit behind an address.
class UnitCatcher final : public vmm::AccessFeed {
 public:
  bool accessed(const vmm::AccessRecord& record) noexcept override {
    last = record.count > 0 ? record.units[0] : nullptr;
    return false;
  }
  vmm::Unit* last = nullptr;
};

// The options every pager of these tests starts from: the defaults, with
// blocks of PAGER_TEST_BLOCK_CHUNKS chunks where it is set. The tests run
// twice (tests/paging/CMakeLists.txt): on the automatic blocks, which under
// their small caps are mostly one chunk, and on blocks of four, so that
// every path that moves memory also moves units mapped in runs of a block.
inline vmm::PagerOptions test_pager_options() {
  vmm::PagerOptions options;
  if (const char* chunks = std::getenv("PAGER_TEST_BLOCK_CHUNKS")) options.block_chunks = std::strtoul(chunks, nullptr, 10);
  return options;
}

// The pattern the tests write: byte i of `seed`'s is i * 31 + seed; a part
// that starts `offset` bytes into a buffer holds the buffer's bytes from
// there. It repeats every 256 bytes, so it is written and compared a period
// at a time with memcpy and memcmp: ThreadSanitizer checks those as one
// range each, where a loop of bytes cost it a call per byte (half the
// paging tests' time under it).
inline constexpr std::uint64_t kPatternPeriod = 256;
// Two periods: a period from any phase is one contiguous run of them.
inline std::array<unsigned char, 2 * kPatternPeriod> pattern_periods(unsigned seed) {
  std::array<unsigned char, 2 * kPatternPeriod> periods{};
  for (std::uint64_t i = 0; i < periods.size(); ++i) periods[i] = static_cast<unsigned char>(i * 31 + seed);
  return periods;
}
inline void fill_pattern(unsigned char* out, std::uint64_t bytes, unsigned seed, std::uint64_t offset = 0) {
  const auto periods = pattern_periods(seed);
  const unsigned char* from = periods.data() + offset % kPatternPeriod;
  for (std::uint64_t at = 0; at < bytes; at += kPatternPeriod) {
    std::memcpy(out + at, from, std::min(kPatternPeriod, bytes - at));
  }
}
inline bool has_pattern(const unsigned char* data, std::uint64_t bytes, unsigned seed, std::uint64_t offset = 0) {
  const auto periods = pattern_periods(seed);
  const unsigned char* from = periods.data() + offset % kPatternPeriod;
  for (std::uint64_t at = 0; at < bytes; at += kPatternPeriod) {
    if (std::memcmp(data + at, from, std::min(kPatternPeriod, bytes - at)) != 0) return false;
  }
  return true;
}

class PagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUcontext context = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
  }
  // `adjust` changes the options further (check mode, reclaimer).
  void make_pager(std::uint64_t cap, std::optional<std::uint64_t> host_limit = std::nullopt,
                  const std::function<void(vmm::PagerOptions&)>& adjust = {}) {
    pager_.reset();  // a pager made earlier goes first: its reclaimer still reads its ledger
    cap_ = cap;
    ledger_ = std::make_unique<vmm::CapLedger>([cap](int) { return cap; });
    vmm::PagerOptions options = test_pager_options();
    options.arena_bytes = 64 * 1024 * kMiB;
    options.host_limit = host_limit;
    if (adjust) adjust(options);
    pager_ = std::make_unique<vmm::Pager>(driver_ops_ ? *driver_ops_ : simulated_driver_ops(), *ledger_, recorder_,
                                          options);
    baseline_ = physical_bytes_now();
  }
  // Copies `bytes` of a pattern into a paged allocation, as a copy hook would.
  void write(CUdeviceptr p, std::uint64_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    fill_pattern(data.data(), bytes, seed);
    vmm::Access access;
    ASSERT_EQ(pager_->prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyHtoD(p, data.data(), bytes), CUDA_SUCCESS);
    EXPECT_LE(physical_bytes_now() - baseline_, cap_) << "the simulator's own count";
  }
  // Each buffers[i]: a new allocation of `bytes` holding pattern i, as a
  // program fills its tensors. Call through ASSERT_NO_FATAL_FAILURE.
  void allocate_written(std::span<CUdeviceptr> buffers, std::uint64_t bytes) {
    for (unsigned i = 0; i < buffers.size(); ++i) {
      ASSERT_EQ(pager_->allocate(0, bytes, &buffers[i]), CUDA_SUCCESS) << i;
      write(buffers[i], bytes, i);
    }
  }
  // Whether each buffers[i] still holds pattern i.
  void expect_held(std::span<const CUdeviceptr> buffers, std::uint64_t bytes) {
    for (unsigned i = 0; i < buffers.size(); ++i) {
      EXPECT_TRUE(holds(buffers[i], bytes, i)) << "buffer " << i << " was lost";
    }
  }
  bool holds(CUdeviceptr p, std::uint64_t bytes, unsigned seed) {
    std::vector<unsigned char> data(bytes);
    vmm::Access access;
    EXPECT_EQ(pager_->prepare_range(p, bytes, nullptr, false, access), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoH(data.data(), p, bytes), CUDA_SUCCESS);
    return has_pattern(data.data(), bytes, seed);
  }

  trace::Recorder recorder_{1000};
  const vmm::DriverOps* driver_ops_ = nullptr;  // make_pager's; the simulated driver's when none
  std::uint64_t cap_ = 0, baseline_ = 0;
  std::unique_ptr<vmm::CapLedger> ledger_;
  std::unique_ptr<vmm::Pager> pager_;
};

}  // namespace vgpumem::test
