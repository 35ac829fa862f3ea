// The layered trainer (tests/workloads/layered_trainer.cpp), the
// learned-schedule benchmark's workload, under the shim: its small CNN
// capped at half of what it allocates trains to the same loss and weights as
// uncapped, and its step is one period of the operation stream.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

struct Result {
  ProcessResult process;
  std::string loss_and_weights;  // "loss=... weights_fnv1a=..."
  std::uint64_t wanted = 0;      // peak_device_bytes_wanted
};

Result parse(ProcessResult process) {
  Result r;
  r.process = std::move(process);
  const std::string line = field(r.process.out, "RESULT");
  const std::size_t peak = line.find(" peak_device_bytes_wanted=");
  r.loss_and_weights = line.substr(0, peak);
  if (peak != std::string::npos) r.wanted = std::stoull(line.substr(peak + 26));
  return r;
}

const std::vector<std::string> kSmallCnn{"--model", "cnn-small", "--steps", "4"};

std::vector<std::string> trainer(const std::vector<std::string>& args) {
  std::vector<std::string> argv{program("layered_trainer")};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

Result uncapped() {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  return parse(run_process(trainer(kSmallCnn), env));
}

TEST(PagingLayered, SmallCnnAtHalfItsPeakUnderLruIsBitIdentical) {
  const Result baseline = uncapped();
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  ASSERT_NE(baseline.loss_and_weights, "");
  ASSERT_GT(baseline.wanted, 0u);
  const std::uint64_t cap = baseline.wanted / 2;
  const PagedRun paged = run_paged("lru", trainer(kSmallCnn), std::to_string(cap), {{"VGPUMEM_POLICY", "lru"}});
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_EQ(parse(paged.process).loss_and_weights, baseline.loss_and_weights)
      << "weights and loss must be bit-identical";
  ASSERT_FALSE(paged.simulator.is_null());
  EXPECT_EQ(paged.simulator["illegal_accesses"].get<int>(), 0) << paged.simulator.dump();
  EXPECT_LE(paged.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), cap);
  ASSERT_FALSE(paged.trace.is_null());
  const nlohmann::json& paging = paged.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0) << "the cap was never reached: the test proves nothing";
  EXPECT_EQ(paging["ooms"].get<int>(), 0);
}

// Every launch and copy of a step names paged memory, so the period the
// access log finds is the step's operation count: --describe's launches
// plus the three copies (batch, labels, loss).
TEST(PagingLayered, TheSmallCnnsStepIsOnePeriod) {
  auto env = simulator_environment();
  const ProcessResult described = run_process(trainer({"--model", "cnn-small", "--describe"}), env);
  ASSERT_EQ(described.exit_code, 0) << described.out << described.err;
  const std::string launches = field(described.out, "launches");  // "per step N (kernels) + 3 copies; ..."
  ASSERT_EQ(launches.rfind("per step ", 0), 0u) << described.out;
  const std::uint64_t per_step = std::stoull(launches.substr(9)) + 3;

  const Result baseline = uncapped();
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const PagedRun paged =
      run_paged("auto", trainer(kSmallCnn), std::to_string(baseline.wanted / 2), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_EQ(parse(paged.process).loss_and_weights, baseline.loss_and_weights);
  ASSERT_FALSE(paged.trace.is_null());
  const nlohmann::json& schedule = paged.trace["vgpumem"]["schedule"];
  ASSERT_TRUE(schedule.is_object()) << paged.trace["vgpumem"].dump();
  EXPECT_EQ(schedule["period"].get<std::uint64_t>(), per_step) << schedule.dump();
  EXPECT_EQ(schedule["locks"].get<int>(), 1) << schedule.dump();
}

}  // namespace
}  // namespace vgpumem::test
