// `vgpumem simulate` as a user runs it: on the trace of a layered trainer
// run under auto, it plans the recorded step again and predicts the run's
// own steady step; bad input is refused, saying what was wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

std::string command() { return VGPUMEM_TEST_CLI; }


// BERT-large's layered step (692 operations) at half its bytes, its sizes
// divided by 64 and the link with them (as vgpumem bench runs it: an H100's
// time ratios), 12 steps: the run records its third step and follows the
// plan from when its planning thread publishes it (a few steps of wall time
// on the simulated driver), so its last step is the steady state the
// prediction is about.
TEST(SimulateCommand, PredictsTheRecordedRunsOwnStep) {
  const std::vector<std::string> args{program("layered_trainer"), "--model", "bert-large", "--steps", "12"};
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUSIM_LINK_GBPS"] = "0.859375";
  const ProcessResult baseline = run_process(args, env);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out << baseline.err;
  const std::uint64_t cap = result_number(baseline.out, "peak_device_bytes_wanted") / 2;
  const PagedRun paged = run_paged("simulate-cli", args, std::to_string(cap),
                                   {{"VGPUMEM_POLICY", "auto"}, {"VGPUSIM_LINK_GBPS", "0.859375"}});
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  const double measured = static_cast<double>(result_number(paged.process.out, "step_ns"));
  ASSERT_GT(measured, 0);

  const std::string trace = temp_path("paging-simulate-cli-trace.json");
  std::ofstream(trace) << paged.trace.dump();
  const ProcessResult simulated = run_process({command(), "simulate", trace, "--json"}, simulator_environment());
  ASSERT_EQ(simulated.exit_code, 0) << simulated.out << simulated.err;
  const nlohmann::json predicted = nlohmann::json::parse(simulated.out);
  EXPECT_EQ(predicted["policy"], "auto");
  EXPECT_EQ(predicted["budget"].get<std::uint64_t>(),
            paged.trace["vgpumem"]["schedule"]["plan"]["budget"].get<std::uint64_t>())
      << "the recorded run's budget by default";
  EXPECT_TRUE(predicted["fits"].get<bool>());
  const double step = predicted["step_ns"].get<double>();
  EXPECT_GE(step, predicted["floor_ns"].get<double>());
  // The least under the plan's own grace bounds the plan, and is no lower
  // than the floor, which keeps no unit past its last use.
  ASSERT_TRUE(predicted["least_bytes_under_grace"].is_number()) << simulated.out;
  EXPECT_LE(predicted["least_bytes_under_grace"].get<double>(),
            predicted["bytes_to_host"].get<double>() * 1.000001);
  EXPECT_GE(predicted["least_bytes_under_grace"].get<double>(), predicted["least_bytes"].get<double>() * 0.999999);
  EXPECT_GE(predicted["floor_under_grace_ns"].get<double>(), predicted["floor_ns"].get<double>());
  EXPECT_LE(predicted["floor_under_grace_ns"].get<double>(), step * 1.000001);
  // Within 7 %: on the bench's cells the model predicts at or above the
  // measured step by 0.5-6.8 % (docs/journal/2026-11-26-benchmarks.md, "The table,
  // 2026-11-26": it over-counts the copy-out engine's queue on the
  // transformers); here 5.1 % on 2026-11-26 (307.0 ms predicted, 291.6 to
  // 292.2 run), 2 % when the test was written.
  EXPECT_LT(std::abs(step - measured) / measured, 0.07) << "predicted " << step << " ns, measured " << measured << " ns";

  // Every planner, a table.
  const ProcessResult all = run_process({command(), "simulate", trace, "--limit", "40%", "--policy", "all"},
                                        simulator_environment());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* policy : {"vdnn-all ", "vdnn-conv ", "auto "}) {
    EXPECT_NE(all.out.find(std::string("\n") + policy), std::string::npos) << all.out;
  }
}

TEST(SimulateCommand, RefusesWhatItCannotUseSayingWhy) {
  const auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), {command(), "simulate"});
    return run_process(args, simulator_environment());
  };
  ProcessResult r = run({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("which TRACE?"), std::string::npos) << r.err;
  r = run({"/nonexistent/trace.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot read \"/nonexistent/trace.json\""), std::string::npos) << r.err;
  const std::string no_profile = temp_path("simulate-no-profile.json");
  std::ofstream(no_profile) << R"({"traceEvents": [], "vgpumem": {"version": 1}})";
  r = run({no_profile, "--limit", "1GiB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has no profiled step"), std::string::npos) << r.err;
  r = run({no_profile, "--policy", "fifo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--policy \"fifo\" is not one of auto, vdnn-all, vdnn-conv, all"), std::string::npos) << r.err;
  r = run({no_profile, "--bandwidth", "fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bandwidth \"fast\" is not a positive number of GB/s"), std::string::npos) << r.err;
  const std::string profile = temp_path("simulate-profile.json");
  std::ofstream(profile) << R"({"format": 1, "units": [4194304, 4194304],
                                "ops": [[1000, 0, 1, [0]], [1000, 0, 1, [1]], [1000, 0, 1, [0, 1]]]})";
  r = run({profile, "--limit", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--limit \"lots\" is not a size"), std::string::npos) << r.err;
  r = run({profile});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not say what its run's cap was: give --limit"), std::string::npos) << r.err;
  r = run({profile, "--limit", "6MiB", "--json"});  // a bare profile works too
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"policy\":\"auto\""), std::string::npos) << r.out;
  r = run({profile, "--limit", "6MiB", "--late"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("prefetches late in the step"), std::string::npos) << r.out;
  r = run({profile, "--limit", "6MiB", "--pieces", "3MiB"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--pieces \"3MiB\" is not a size that is a positive multiple of 2 MiB"), std::string::npos)
      << r.err;
  // In pieces of 2 MiB: the same step and floor, a plan that fits, and
  // said to be a what-if.
  const std::string three = temp_path("simulate-three-units.json");
  std::ofstream(three) << R"({"format": 1, "units": [4194304, 4194304, 4194304],
                              "ops": [[1000000, 0, 1, [0]], [1000000, 0, 1, [1]], [1000000, 0, 1, [2]],
                                      [1000000, 0, 1, [1]], [1000000, 0, 1, [0]]]})";
  r = run({three, "--limit", "10MiB", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json whole = nlohmann::json::parse(r.out);
  r = run({three, "--limit", "10MiB", "--json", "--pieces", "2MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json cut = nlohmann::json::parse(r.out);
  EXPECT_EQ(cut["piece_bytes"], 2u << 20);
  EXPECT_EQ(whole["piece_bytes"], 0u);
  EXPECT_DOUBLE_EQ(cut["floor_ns"].get<double>(), whole["floor_ns"].get<double>());
  EXPECT_DOUBLE_EQ(cut["uncapped_step_ns"].get<double>(), whole["uncapped_step_ns"].get<double>());
  EXPECT_TRUE(whole["fits"].get<bool>());
  EXPECT_TRUE(cut["fits"].get<bool>());
  EXPECT_GT(cut["swaps"].get<int>(), whole["swaps"].get<int>()) << "pieces move one by one";
  r = run({three, "--limit", "10MiB", "--pieces", "2MiB"});
  EXPECT_NE(r.out.find("units cut into pieces of 2.00 MiB (--pieces)"), std::string::npos) << r.out;
}


std::string committed_log(const std::string& workload) {
  return std::string(VGPUMEM_TEST_SOURCE_DIR) + "/docs/gpu-runs/2026-11-27-h200-" + workload + "-auto50-access-log.json";
}

ProcessResult simulate(std::vector<std::string> args) {
  args.insert(args.begin(), {command(), "simulate"});
  return run_process(args, simulator_environment());
}

// The model it predicts with, said: the planner's two-engine timeline and
// the driver work per move the run measured (none in this profile), no
// other host time for driver calls (neither of the simulated driver's
// cost models, VGPUSIM_COST_MODEL).
TEST(SimulateCommand, SaysWhichCostModelItUsed) {
  const std::string profile = temp_path("simulate-cost-model.json");
  std::ofstream(profile) << R"({"format": 1, "units": [4194304, 4194304],
                                "ops": [[1000, 0, 1, [0]], [1000, 0, 1, [1]], [1000, 0, 1, [0, 1]]]})";
  ProcessResult r = simulate({profile, "--limit", "6MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cost model: the planner's two-engine timeline"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no other host time for driver calls (neither the simulated driver's calibrated nor its idle "
                       "model)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("driver work per move, as the run measured it: 0 us before a fetch's copy, 0 us after a save"),
            std::string::npos)
      << r.out;
  r = simulate({profile, "--limit", "6MiB", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["cost_model"], "planner timeline and driver lane, no other host costs") << r.out;
}

// A plan that does not fit is no prediction: what it leaves out pages on
// demand at run time, which the model does not run. Its row has no time
// (a dash, never a step below the floor) and comes after those that fit.
TEST(SimulateCommand, APlanThatDoesNotFitPrintsNoTime) {
  const ProcessResult r = simulate({committed_log("resnet50"), "--limit", "33%", "--policy", "all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  bool misfit_seen = false, fit_after_misfit = false;
  std::size_t misfits = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string policy, step;
    words >> policy >> step;
    if (policy != "auto" && policy != "vdnn-all" && policy != "vdnn-conv") continue;
    const bool fits = line.ends_with(" yes");
    ASSERT_TRUE(fits || line.ends_with(" no")) << line;
    if (!fits) {
      ++misfits;
      misfit_seen = true;
      EXPECT_EQ(step, "-") << "a plan that does not fit has no time: " << line;
    } else if (misfit_seen) {
      fit_after_misfit = true;
    }
  }
  EXPECT_GE(misfits, 1u) << r.out;
  EXPECT_FALSE(fit_after_misfit) << "plans that fit first:\n" << r.out;
  const ProcessResult json = simulate({committed_log("resnet50"), "--limit", "33%", "--policy", "all", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::istringstream rows(json.out);
  for (std::string row; std::getline(rows, row);) {
    const nlohmann::json plan = nlohmann::json::parse(row);
    if (!plan["fits"].get<bool>()) {
      EXPECT_TRUE(plan["step_ns"].is_null()) << row;
    }
  }
}

// A step recorded on a GPU: the model is not calibrated against that run.
// The committed H200 logs carry the step the H200 measured, and simulate
// sets it beside its prediction; a GPU log without one is said plainly.
TEST(SimulateCommand, AGpuRecordingIsNotTakenForTheModel) {
  ProcessResult r = simulate({committed_log("resnet50")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("measured on NVIDIA H200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("351.1 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not calibrated against that run"), std::string::npos) << r.out;
  nlohmann::json log;
  std::ifstream(committed_log("resnet50")) >> log;
  log.erase("measured");
  const std::string bare = temp_path("simulate-gpu-log-without-step.json");
  std::ofstream(bare) << log.dump();
  r = simulate({bare});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("not calibrated against that run"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("measured on"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vgpumem::test
