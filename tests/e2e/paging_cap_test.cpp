// The cap holds at every instant, by the simulated driver's own count: when
// the program asks for memory that is never paged, room made for it counts
// as made only once the physical pages are really gone (a chunk released
// while still mapped under an offload in flight keeps its pages).
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 256ull << 20;

class RoomForUnpagedMemory : public ::testing::TestWithParam<const char*> {};

// 200 MiB and 64 MiB paged, then 64 MiB more that is never paged, under 256 MiB.
TEST_P(RoomForUnpagedMemory, IsMadeWithoutThePhysicalPeakPassingTheCap) {
  const std::string api = GetParam();
  const PagedRun run = run_paged("room-" + api.substr(0, api.find('(')) + std::to_string(api.size()),
                                 {program("cap_probe"), "room", std::to_string(kCap), api}, "256MiB",
                                 {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "room " + api + " ok", kCap));
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0) << "room was made by offloading";
}

INSTANTIATE_TEST_SUITE_P(EveryUnpagedKind, RoomForUnpagedMemory,
                         ::testing::Values("cuMemAllocManaged", "cuMemCreate(gpuDirectRDMACapable)",
                                           "cuMemAllocFromPoolAsync(exportable pool)", "cuArrayCreate_v2",
                                           "cuArray3DCreate_v2", "cuMipmappedArrayCreate"));

}  // namespace
}  // namespace vgpumem::test
