// CUPTI under the shim (docs/architecture.md, "cupti/"): with paging on and
// no profiler, vgpumem times kernels with CUPTI's activity records; when the
// program starts its own profiler, vgpumem steps aside and the profiler's
// output is what it is without the shim.
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

TEST(Cupti, AProfilersOutputIsTheSameWithAndWithoutTheShimWhichStepsAside) {
  const ProcessResult alone = run_process({program("cupti_profiler")}, simulator_environment());
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.out.find("RECORDS 4 DROPPED 0\nDURATIONS 1000 2500 2500 1000\n"), std::string::npos) << alone.out;

  const PagedRun run = run_paged("cupti_profiler", {program("cupti_profiler")}, "512MiB",
                                 {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  EXPECT_EQ(run.process.out, alone.out);
  const nlohmann::json& cupti = run.trace["vgpumem"]["cupti"];
  EXPECT_EQ(cupti["state"], "stepped aside") << cupti.dump();
  EXPECT_EQ(cupti["profiler_started"], true);
  EXPECT_EQ(cupti["kernel_records"], 3) << "the three launches before the profiler were ours";
  EXPECT_NE(run.process.err.find("vgpumem stepped aside from CUPTI"), std::string::npos) << run.process.err;
}

TEST(Cupti, WithoutAProfilerTheSummarySaysActiveWithEveryKernelRecord) {
  const PagedRun run = run_paged("cupti_plain", {program("cupti_profiler"), "plain"}, "512MiB");
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  EXPECT_NE(run.process.out.find("LAUNCHED 5"), std::string::npos);
  const nlohmann::json& cupti = run.trace["vgpumem"]["cupti"];
  EXPECT_EQ(cupti["state"], "active") << cupti.dump();
  EXPECT_EQ(cupti["kernel_records"], 5);
  // Launch ids ride only on the kernels of a timed step, and five launches
  // make no step: every record comes, none names a launch.
  EXPECT_EQ(cupti["unattributed_records"], 5) << "a launch id was pushed outside a timed step";
  EXPECT_EQ(cupti["dropped_records"], 0);
}

TEST(Cupti, OffNeverLoadsCupti) {
  const PagedRun run =
      run_paged("cupti_off", {program("cupti_profiler"), "plain"}, "512MiB", {{"VGPUMEM_CUPTI", "off"}});
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  EXPECT_EQ(run.trace["vgpumem"]["cupti"]["state"], "off");
}

TEST(Cupti, WithoutPagingCuptiIsNotStarted) {
  std::map<std::string, std::optional<std::string>> env = shim_environment();
  const std::string trace = scratch("cupti_no_paging", "trace.json");
  env["VGPUMEM_TRACE"] = trace;
  const ProcessResult result = run_process({program("cupti_profiler"), "plain"}, env);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(read_json(trace)["vgpumem"]["cupti"]["state"], "not started");
}

}  // namespace
}  // namespace vgpumem::test
