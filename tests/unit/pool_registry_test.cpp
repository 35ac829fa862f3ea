// Which memory pools the pager may serve: the verdict for each way a program
// gets a pool, and what changes it.
#include <gtest/gtest.h>

#include "vmm/pool_registry.h"

namespace vgpumem::vmm {
namespace {

CUmemoryPool pool(std::uintptr_t n) { return reinterpret_cast<CUmemoryPool>(n); }

CUmemPoolProps device_props(int device) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  return props;
}

CUmemAccessDesc access(int device, CUmemAccess_flags flags) {
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = flags;
  return desc;
}

TEST(PoolRegistry, ADevicesOwnPoolIsPageableOnThatDevice) {
  PoolRegistry pools;
  pools.saw_device_pool(pool(1), 2);
  EXPECT_EQ(pools.pageable_on(pool(1)), 2);
  EXPECT_EQ(pools.device_of(pool(1)), 2);
}

TEST(PoolRegistry, APoolNeverSeenIsNotPaged) {
  PoolRegistry pools;
  EXPECT_FALSE(pools.pageable_on(pool(9)).has_value());
  EXPECT_FALSE(pools.device_of(pool(9)).has_value());
}

TEST(PoolRegistry, ACreatedPoolIsJudgedByItsProperties) {
  PoolRegistry pools;
  pools.created(pool(1), device_props(0));
  EXPECT_EQ(pools.pageable_on(pool(1)), 0) << "plain device pool";

  CUmemPoolProps exportable = device_props(0);
  exportable.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  pools.created(pool(2), exportable);
  EXPECT_FALSE(pools.pageable_on(pool(2)).has_value()) << "its memory may go to another process";
  EXPECT_EQ(pools.device_of(pool(2)), 0) << "still charged to its device";

  CUmemPoolProps bounded = device_props(1);
  bounded.maxSize = 64u << 20;
  pools.created(pool(3), bounded);
  EXPECT_FALSE(pools.pageable_on(pool(3)).has_value()) << "paging would ignore maxSize";

  CUmemPoolProps host = device_props(0);
  host.location.type = CU_MEM_LOCATION_TYPE_HOST;
  pools.created(pool(4), host);
  EXPECT_FALSE(pools.pageable_on(pool(4)).has_value());
  EXPECT_FALSE(pools.device_of(pool(4)).has_value()) << "host memory is no device's";
  EXPECT_TRUE(pools.on_host(pool(4)));
  EXPECT_FALSE(pools.on_host(pool(1)));
  EXPECT_FALSE(pools.on_host(pool(9))) << "a pool never seen is not known to be host memory";
}

TEST(PoolRegistry, AccessForAnotherDeviceEndsPaging) {
  PoolRegistry pools;
  pools.saw_device_pool(pool(1), 0);
  const CUmemAccessDesc own = access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  pools.access_set(pool(1), &own, 1);
  EXPECT_EQ(pools.pageable_on(pool(1)), 0) << "its own device: nothing changes";
  const CUmemAccessDesc revoke = access(1, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  pools.access_set(pool(1), &revoke, 1);
  EXPECT_EQ(pools.pageable_on(pool(1)), 0) << "no access granted";
  const CUmemAccessDesc peer = access(1, CU_MEM_ACCESS_FLAGS_PROT_READ);
  pools.access_set(pool(1), &peer, 1);
  EXPECT_FALSE(pools.pageable_on(pool(1)).has_value()) << "paged ranges are mapped for their own device only";
  pools.saw_device_pool(pool(1), 0);
  EXPECT_FALSE(pools.pageable_on(pool(1)).has_value()) << "asking for it again keeps the verdict";
}

TEST(PoolRegistry, ADestroyedPoolIsForgotten) {
  PoolRegistry pools;
  pools.created(pool(1), device_props(0));
  pools.destroyed(pool(1));
  EXPECT_FALSE(pools.pageable_on(pool(1)).has_value());
}

}  // namespace
}  // namespace vgpumem::vmm
