// CUPTI under the shim (docs/architecture.md, "cupti/"): with paging on and
// no profiler, vgpumem times kernels with CUPTI's activity records; when the
// program starts its own profiler, vgpumem steps aside and the profiler's
// output is what it is without the shim. The scheduler plans from CUPTI's
// kernel durations, and from events without CUPTI, to the same plan.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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

// The layered trainer's small CNN, at half its peak under auto.
const std::vector<std::string> kSmallCnn{"--model", "cnn-small", "--steps", "6"};

std::string loss_and_weights(const std::string& out) {
  const std::string line = field(out, "RESULT");
  return line.substr(0, line.find(" peak_device_bytes_wanted="));
}

std::uint64_t peak_wanted(const std::string& out) {
  const std::string line = field(out, "RESULT");
  const std::size_t at = line.find(" peak_device_bytes_wanted=");
  return at == std::string::npos ? 0 : std::stoull(line.substr(at + 26));
}

TEST(Cupti, TheSchedulerPlansFromCuptisKernelDurationsAndFromEventsToTheSamePlan) {
  std::vector<std::string> argv{program("layered_trainer")};
  argv.insert(argv.end(), kSmallCnn.begin(), kSmallCnn.end());
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult uncapped = run_process(argv, env);
  ASSERT_EQ(uncapped.exit_code, 0) << uncapped.out << uncapped.err;
  const std::string cap = std::to_string(peak_wanted(uncapped.out) / 2);

  const PagedRun clocked = run_paged("cupti_plans", argv, cap, {{"VGPUMEM_POLICY", "auto"}});
  const PagedRun marked =
      run_paged("cupti_off_plans", argv, cap, {{"VGPUMEM_POLICY", "auto"}, {"VGPUMEM_CUPTI", "off"}});
  for (const PagedRun* run : {&clocked, &marked}) {
    ASSERT_EQ(run->process.exit_code, 0) << run->process.out << run->process.err;
    EXPECT_EQ(loss_and_weights(run->process.out), loss_and_weights(uncapped.out)) << "must be bit-identical";
    EXPECT_EQ(run->simulator["illegal_accesses"].get<int>(), 0) << run->simulator.dump();
    ASSERT_GE(run->trace["vgpumem"]["schedule"]["plans"].get<int>(), 1) << run->trace["vgpumem"]["schedule"].dump();
  }

  const nlohmann::json& with_cupti = clocked.trace["vgpumem"]["schedule"];
  EXPECT_EQ(clocked.trace["vgpumem"]["cupti"]["state"], "active");
  EXPECT_EQ(with_cupti["timing_source"], "cupti") << with_cupti["timing"].dump();
  EXPECT_GT(with_cupti["timing"]["kernels_clocked"].get<int>(), 0) << with_cupti["timing"].dump();
  // A kernel carries marks too only beside a copy, or in a step timed
  // before the step's kernels and copies were seen whole (the first after
  // the lock): Scheduler.KernelsBesideACopyAreMarkedUnderAKernelClock.
  EXPECT_LE(with_cupti["timing"]["kernels_marked"].get<int>(), with_cupti["timing"]["kernels_clocked"].get<int>())
      << with_cupti["timing"].dump();
  EXPECT_EQ(with_cupti["timing"]["kernels_missing"], 0);
  EXPECT_GT(with_cupti["timing"]["others_marked"].get<int>(), 0) << "copies have no kernel record: events";
  // Launch ids go only with the kernels of timed steps: the others' records
  // come (CUPTI times every kernel) but name no launch.
  const nlohmann::json& cupti = clocked.trace["vgpumem"]["cupti"];
  EXPECT_GT(cupti["unattributed_records"].get<std::uint64_t>(), 0u) << cupti.dump();
  EXPECT_LE(cupti["unattributed_records"].get<std::uint64_t>() + with_cupti["timing"]["kernels_clocked"].get<std::uint64_t>(),
            cupti["kernel_records"].get<std::uint64_t>())
      << cupti.dump();

  const nlohmann::json& with_events = marked.trace["vgpumem"]["schedule"];
  EXPECT_EQ(marked.trace["vgpumem"]["cupti"]["state"], "off");
  EXPECT_EQ(with_events["timing_source"], "events");
  EXPECT_EQ(with_events["timing"]["kernels_clocked"], 0);
  EXPECT_EQ(with_events["timing"]["kernels_marked"], with_cupti["timing"]["kernels_clocked"]);

  // The two sources read the same simulated clock (events in float
  // milliseconds): the same step, the same plan.
  const nlohmann::json& a = with_cupti["plan"];
  const nlohmann::json& b = with_events["plan"];
  const auto close = [](double x, double y) { return std::abs(x - y) <= 0.01 * std::max(std::abs(x), std::abs(y)) + 1; };
  EXPECT_TRUE(close(a["compute_ns"].get<double>(), b["compute_ns"].get<double>())) << a.dump() << "\n" << b.dump();
  EXPECT_TRUE(close(a["predicted_step_ns"].get<double>(), b["predicted_step_ns"].get<double>()))
      << a.dump() << "\n" << b.dump();
  EXPECT_EQ(a["swaps"], b["swaps"]) << a.dump() << "\n" << b.dump();
  EXPECT_EQ(a["fits"], b["fits"]);
}

}  // namespace
}  // namespace vgpumem::test
