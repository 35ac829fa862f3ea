// Training that is not one repeating step, under the shim: the layered
// trainer's BERT shape (eight layers at a 64th of its sizes, so that a
// quarter of its peak still holds its largest kernel's operands) with
// evaluation every 2 or 3 steps, discriminator and generator steps in turn,
// sequence lengths from three buckets in random order, and a learning-rate
// warm-up with a logging kernel every fourth step. Under auto with caps of
// half and a quarter of its uncapped peak, each trains to the same bits as
// uncapped, and the simulator's physical peak stays under the cap, whatever
// the schedule makes of the steps: a plan that does not match the step
// costs time, never bytes. Each run prints the share of its operations the
// plan was followed for and its last step against the uncapped one (what
// docs/benchmarks.md, "Steps of several kinds", tabulates).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

struct Workload {
  std::string name;
  std::vector<std::string> args;
};

const std::vector<std::string> kBert{"--model", "bert-large", "--layers", "8", "--scale", "64", "--steps", "12"};

std::vector<std::string> trainer(const Workload& w) {
  std::vector<std::string> argv{program("layered_trainer")};
  argv.insert(argv.end(), kBert.begin(), kBert.end());
  argv.insert(argv.end(), w.args.begin(), w.args.end());
  return argv;
}

// "loss=... weights_fnv1a=..." of the RESULT line.
std::string checksum(const std::string& out) {
  const std::string line = field(out, "RESULT");
  return line.substr(0, line.find(" peak_device_bytes_wanted="));
}

class StepKinds : public ::testing::TestWithParam<Workload> {};

TEST_P(StepKinds, UnderAutoAtHalfAndAQuarterOfItsPeakEveryBitIsAsUncapped) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult baseline = run_process(trainer(GetParam()), env);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out << baseline.err;
  ASSERT_NE(checksum(baseline.out), "");
  const std::uint64_t peak = result_number(baseline.out, "peak_device_bytes_wanted");
  const double uncapped_step = static_cast<double>(result_number(baseline.out, "step_ns"));
  ASSERT_GT(peak, 0u);
  for (const std::uint64_t percent : {50, 25}) {
    SCOPED_TRACE(std::to_string(percent) + " % of the peak");
    const std::uint64_t cap = peak * percent / 100;
    const PagedRun run = run_paged(std::to_string(percent), trainer(GetParam()), std::to_string(cap),
                                   {{"VGPUMEM_POLICY", "auto"}});
    ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
    EXPECT_EQ(run.process.out.find("CUDA_ERROR"), std::string::npos) << run.process.out;
    EXPECT_EQ(checksum(run.process.out), checksum(baseline.out)) << "bit-identical to uncapped";
    EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0) << "the cap must bite";
    const nlohmann::json& schedule = run.trace["vgpumem"]["schedule"];
    ASSERT_TRUE(schedule.is_object()) << run.trace["vgpumem"].dump();
    const double operations = schedule["operations"].get<double>();
    const double followed = schedule["operations_followed"].get<double>();
    const double step = static_cast<double>(result_number(run.process.out, "step_ns"));
    std::printf("[ kinds    ] %s at %u %%: followed %.0f of %.0f operations (%.2f), %d locks, %d breaks, %d plans; "
                "last step %.2f ms, %.2fx uncapped\n",
                GetParam().name.c_str(), static_cast<unsigned>(percent), followed, operations,
                followed / std::max(operations, 1.0), schedule["locks"].get<int>(), schedule["breaks"].get<int>(),
                schedule["plans"].get<int>(), step / 1e6, step / uncapped_step);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PagingLayered, StepKinds,
    ::testing::Values(Workload{"eval_every_2", {"--eval-every", "2"}}, Workload{"eval_every_3", {"--eval-every", "3"}},
                      Workload{"alternate", {"--alternate"}},
                      Workload{"buckets", {"--buckets", "3", "--allocator", "caching"}},
                      Workload{"warmup_and_logging", {"--warmup", "12", "--log-every", "4"}}),
    [](const ::testing::TestParamInfo<Workload>& param) { return param.param.name; });

}  // namespace
}  // namespace vgpumem::test
