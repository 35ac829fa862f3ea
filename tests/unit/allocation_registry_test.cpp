#include "vmm/allocation_registry.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace vgpumem::vmm {
namespace {

TEST(AllocationRegistry, KindsAreSeparateNamespaces) {
  AllocationRegistry registry;
  registry.insert(AllocationKind::device, 42, {0, 100, 1, true});
  registry.insert(AllocationKind::vmm_handle, 42, {1, 200, 1, true});
  EXPECT_EQ(registry.find(AllocationKind::device, 42)->bytes, 100u);
  EXPECT_EQ(registry.find(AllocationKind::vmm_handle, 42)->device, 1);
  EXPECT_EQ(registry.remove(AllocationKind::device, 42)->bytes, 100u);
  EXPECT_FALSE(registry.remove(AllocationKind::device, 42));
  EXPECT_TRUE(registry.find(AllocationKind::vmm_handle, 42));
}

TEST(AllocationRegistry, HandlesAreReferenceCounted) {
  AllocationRegistry registry;
  registry.insert(AllocationKind::vmm_handle, 7, {0, 2 << 20, 1, true});
  EXPECT_TRUE(registry.retain(AllocationKind::vmm_handle, 7));
  EXPECT_FALSE(registry.release(AllocationKind::vmm_handle, 7));
  const auto last = registry.release(AllocationKind::vmm_handle, 7);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->bytes, 2u << 20);
  EXPECT_FALSE(registry.retain(AllocationKind::vmm_handle, 7));
}

TEST(AllocationRegistry, ConcurrentInsertAndRemove) {
  AllocationRegistry registry;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 5000; ++i) {
        const std::uint64_t key = (static_cast<std::uint64_t>(t) << 32) | (i << 9);
        registry.insert(AllocationKind::device, key, {0, i, 1, true});
        ASSERT_EQ(registry.remove(AllocationKind::device, key)->bytes, i);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(registry.size(), 0u);
}

}  // namespace
}  // namespace vgpumem::vmm
