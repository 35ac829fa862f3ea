// One operation names many paged buffers: either every byte it touches is
// there and exact, or it gets CUDA_ERROR_OUT_OF_MEMORY before anything is
// enqueued and every buffer keeps what it held. Never success with wrong
// bytes (making buffer k resident must not evict buffer j of the same
// launch).
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr unsigned kWide = 210;  // 2 MiB buffers named by one launch: 420 MiB

void expect_wide_launch(const std::string& mode, const std::string& limit, std::uint64_t cap, bool fits) {
  const PagedRun run = run_paged(mode + "-" + limit, {program("wide_probe"), mode, std::to_string(kWide)}, limit,
                                 {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, mode + (fits ? " ok launched" : " ok refused"), cap));
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0) << "the buffers did not all fit before the launch";
  if (!fits) {
    // The log names what the operation needed, the cap and the kernel.
    EXPECT_NE(run.process.err.find("probe_add_index"), std::string::npos) << run.process.err;
    EXPECT_NE(run.process.err.find("needs 420.00 MiB"), std::string::npos) << run.process.err;
  }
}

TEST(PagingHolds, ALaunchNamingTwoHundredBuffersInAStructGetsThemAllWhenTheyFit) {
  expect_wide_launch("struct", "448MiB", 448 * kMiB, true);
}
TEST(PagingHolds, ALaunchNamingTwoHundredBuffersInAStructIsOutOfMemoryWhenTheyDoNot) {
  expect_wide_launch("struct", "256MiB", 256 * kMiB, false);
}
TEST(PagingHolds, ALaunchExNamingTwoHundredBuffersGetsThemAllWhenTheyFit) {
  expect_wide_launch("ex", "448MiB", 448 * kMiB, true);
}
TEST(PagingHolds, ALaunchExNamingTwoHundredBuffersIsOutOfMemoryWhenTheyDoNot) {
  expect_wide_launch("ex", "256MiB", 256 * kMiB, false);
}

// A copy between two 96 MiB buffers: both fit under 256 MiB, not under 128.
TEST(PagingHolds, ACopyWhoseOperandsFitRunsExactly) {
  const PagedRun run = run_paged("copy-fits", {program("wide_probe"), "copy", "96"}, "256MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "copy ok launched", 256 * kMiB));
}
TEST(PagingHolds, ACopyWhoseOperandsTogetherExceedTheCapIsOutOfMemory) {
  const PagedRun run = run_paged("copy-over", {program("wide_probe"), "copy", "96"}, "128MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "copy ok refused", 128 * kMiB));
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
}

// A kernel the driver cannot describe (VGPUSIM_FAULTS=paraminfo: every
// parameter query fails) is never launched unscanned: everything paged on
// its device is made resident first, and it is counted in the audit.
TEST(PagingHolds, AnUnscannableLaunchGetsEveryPagedBufferWhenTheyFit) {
  // 100 buffers (200 MiB) and 24 others (48 MiB) under 224 MiB; the others
  // are freed before the launch.
  const PagedRun run = run_paged("unscannable-fits", {program("wide_probe"), "freed", "100"}, "224MiB",
                                 {{"VGPUSIM_FAULTS", "paraminfo:1+"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "freed ok launched", 224 * kMiB));
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0);
  EXPECT_EQ(paging["launch_audit"]["probe_add_index"]["unscannable_launches"].get<int>(), 2) << paging.dump();
  EXPECT_NE(run.process.err.find("cannot describe the parameters of kernel probe_add_index"), std::string::npos)
      << run.process.err;
}

TEST(PagingHolds, AnUnscannableLaunchIsOutOfMemoryWhenThePagedSetExceedsTheCap) {
  const PagedRun run = run_paged("unscannable-over", {program("wide_probe"), "struct", "100"}, "224MiB",
                                 {{"VGPUSIM_FAULTS", "paraminfo:1+"}, {"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "struct ok refused", 224 * kMiB));
  EXPECT_NE(run.process.err.find("needs 248.00 MiB"), std::string::npos) << run.process.err;
}

// The audit counts, per kernel, launches that named no paged memory.
TEST(PagingHolds, ALaunchNamingNoPagedMemoryIsCountedInTheAudit) {
  const PagedRun run = run_paged("audit", {program("wide_probe"), "freed", "100"}, "224MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "freed ok launched", 224 * kMiB));
  const nlohmann::json& kernel = run.trace["vgpumem"]["paging"]["launch_audit"]["probe_add_index"];
  EXPECT_EQ(kernel["launches_without_paged_words"].get<int>(), 1) << kernel.dump();
  EXPECT_EQ(kernel["unscannable_launches"].get<int>(), 0);
}

}  // namespace
}  // namespace vgpumem::test
