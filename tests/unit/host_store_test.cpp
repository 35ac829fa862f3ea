// vmm::HostStore: pinned host buffers reused across offloads. A request with
// no free buffer of its size takes the smallest free one up to twice its
// size before it pins (pinning is slow: a fifth of the pager's host time
// under PyTorch on an H200), and a buffer always goes back under the size it
// was pinned with, whatever the caller took it for.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "vmm/host_store.h"

namespace {

using vgpumem::vmm::DriverOps;
using vgpumem::vmm::HostStore;

std::map<void*, size_t> g_pinned;  // what the fake driver has pinned now
int g_pins = 0;

CUresult fake_host_alloc(void** out, size_t bytes, unsigned) {
  *out = std::malloc(bytes);
  g_pinned[*out] = bytes;
  ++g_pins;
  return CUDA_SUCCESS;
}
CUresult fake_host_free(void* buffer) {
  g_pinned.erase(buffer);
  std::free(buffer);
  return CUDA_SUCCESS;
}

class HostStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_pinned.clear();
    g_pins = 0;
    driver_.host_alloc = &fake_host_alloc;
    driver_.host_free = &fake_host_free;
  }
  void TearDown() override {
    for (auto& [buffer, bytes] : g_pinned) std::free(buffer);
    g_pinned.clear();
  }
  DriverOps driver_;
};

constexpr std::uint64_t kMiB = 1 << 20;

TEST_F(HostStoreTest, ALargerFreeBufferUpToTwiceTheSizeServesBeforeAnythingIsPinned) {
  HostStore store(driver_, std::nullopt);
  CUresult error = CUDA_ERROR_UNKNOWN;
  void* big = store.take(6 * kMiB, 0, &error);
  ASSERT_NE(big, nullptr);
  ASSERT_EQ(error, CUDA_SUCCESS);
  store.give_back(big, 6 * kMiB);
  EXPECT_EQ(store.take(4 * kMiB, 0, &error), big) << "6 MiB serves 4 MiB: no second pin";
  EXPECT_EQ(g_pins, 1);
  store.give_back(big, 4 * kMiB);  // the caller's size; it goes back as the 6 MiB it is
  EXPECT_EQ(store.take(6 * kMiB, 0, &error), big) << "back under its own size, so it serves 6 MiB again";
  EXPECT_EQ(g_pins, 1);
  store.give_back(big, 6 * kMiB);
  void* small = store.take(2 * kMiB, 0, &error);
  EXPECT_NE(small, big) << "6 MiB is more than twice 2 MiB: pinned anew";
  EXPECT_EQ(g_pins, 2);
  EXPECT_EQ(store.pinned_bytes(), 8 * kMiB);
  store.give_back(small, 2 * kMiB);
}

TEST_F(HostStoreTest, TheSmallestBufferThatServesIsTaken) {
  HostStore store(driver_, std::nullopt);
  CUresult error = CUDA_SUCCESS;
  void* seven = store.take(7 * kMiB, 0, &error);
  void* five = store.take(5 * kMiB, 0, &error);
  store.give_back(seven, 7 * kMiB);
  store.give_back(five, 5 * kMiB);
  EXPECT_EQ(store.take(4 * kMiB, 0, &error), five);
  EXPECT_EQ(store.take(4 * kMiB, 0, &error), seven);
  EXPECT_EQ(g_pins, 2);
  store.give_back(five, 4 * kMiB);
  store.give_back(seven, 4 * kMiB);
}

TEST_F(HostStoreTest, UnderTheLimitABufferIsUnpinnedUnderItsOwnSize) {
  HostStore store(driver_, 8 * kMiB);
  CUresult error = CUDA_SUCCESS;
  void* six = store.take(6 * kMiB, 0, &error);
  store.give_back(six, 6 * kMiB);
  void* taken = store.take(4 * kMiB, 0, &error);
  ASSERT_EQ(taken, six);
  store.give_back(taken, 4 * kMiB);
  // 7 MiB: no free buffer serves (6 < 7), and pinning it needs the 6 MiB one unpinned first.
  void* seven = store.take(7 * kMiB, 0, &error);
  ASSERT_NE(seven, nullptr);
  EXPECT_EQ(store.pinned_bytes(), 7 * kMiB) << "the 6 MiB buffer was unpinned as 6 MiB, not as the 4 it last served";
  EXPECT_EQ(g_pinned.size(), 1u);
  store.give_back(seven, 7 * kMiB);
}

}  // namespace
