// The layered trainer (tests/workloads/layered_trainer.cpp), the
// learned-schedule benchmark's workload, under the shim: its small CNN
// capped at half of what it allocates trains to the same loss and weights as
// uncapped, and its step is one period of the operation stream.
#include <gtest/gtest.h>

#include <algorithm>
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

// The trainer with `args`, without the shim, on a 1 GiB simulated device.
Result uncapped(const std::vector<std::string>& args = kSmallCnn) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  return parse(run_process(trainer(args), env));
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

// Allocations in pieces (VGPUMEM_PIECE_BYTES): the small CNN at a 16th of
// its sizes, whose activations (up to 8 MiB) are up to four pieces of 2 MiB,
// each moving on its own. Under auto and lru at half its peak (a cap much
// lower is below one kernel's operands: a batch norm's backward names 32
// MiB, two fifths of the peak), every bit as uncapped, under the cap; and
// under torture, where
// everything an operation does not name is offloaded and unmapped before it
// runs, no kernel reads a piece its launch left out (the simulator counts
// any such read as an illegal access).
TEST(PagingLayered, SmallCnnInPiecesIsBitIdenticalUnderAutoLruAndTorture) {
  const std::vector<std::string> args{"--model", "cnn-small", "--scale", "16", "--steps", "8"};
  const Result baseline = uncapped(args);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const std::uint64_t wanted = baseline.wanted;
  const std::vector<std::pair<std::uint64_t, std::map<std::string, std::string>>> cases{
      {wanted / 2, {{"VGPUMEM_POLICY", "auto"}}},
      {wanted / 2, {{"VGPUMEM_POLICY", "lru"}}},
      {wanted / 2, {{"VGPUMEM_POLICY", "lru"}, {"VGPUMEM_CHECK", "torture"}}},
  };
  for (const auto& [cap, given] : cases) {
    const std::string name = given.at("VGPUMEM_POLICY") + (given.count("VGPUMEM_CHECK") != 0 ? "-torture" : "") +
                             "-" + std::to_string(cap * 100 / wanted);
    SCOPED_TRACE(name);
    std::map<std::string, std::string> environment = given;
    environment["VGPUMEM_PIECE_BYTES"] = "2MiB";
    const PagedRun run = run_paged("pieces-" + name, trainer(args), std::to_string(cap), environment);
    ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
    EXPECT_EQ(parse(run.process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
    const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
    EXPECT_GT(paging["pieces"]["allocations_made"].get<int>(), 0) << paging["pieces"].dump();
    EXPECT_GT(paging["offloads"].get<int>(), 0);
    EXPECT_EQ(paging["ooms"].get<int>(), 0);
  }
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

// The step's operations and scaled peak, from --describe.
struct Described {
  std::uint64_t per_step = 0;  // launches plus the three copies (batch, labels, loss)
  std::uint64_t scaled_peak = 0;
};
Described describe(const std::string& model) {
  const ProcessResult described = run_process(trainer({"--model", model, "--describe"}), simulator_environment());
  EXPECT_EQ(described.exit_code, 0) << described.out << described.err;
  Described d;
  const std::string launches = field(described.out, "launches");  // "per step N (kernels) + 3 copies; ..."
  if (launches.rfind("per step ", 0) == 0) d.per_step = std::stoull(launches.substr(9)) + 3;
  const std::string peak = field(described.out, "peak");  // "device bytes N (...), scaled M (...) in ..."
  if (const std::size_t at = peak.find("scaled "); at != std::string::npos) d.scaled_peak = std::stoull(peak.substr(at + 7));
  return d;
}

// The iteration detector finds each workload's step by the end of its
// second iteration: two steps, and the schedule has locked on the step's
// operation count. (The cap leaves room for everything: paging is on, so the
// feed is, and nothing needs to move.)
class LayeredWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(LayeredWorkload, ItsStepIsFoundWithinTwoIterations) {
  const Described d = describe(GetParam());
  ASSERT_GT(d.per_step, 0u);
  ASSERT_GT(d.scaled_peak, 0u);
  const PagedRun paged = run_paged("two-steps-" + GetParam(), trainer({"--model", GetParam(), "--steps", "2"}),
                                   std::to_string(2 * d.scaled_peak), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  ASSERT_FALSE(paged.trace.is_null());
  const nlohmann::json& schedule = paged.trace["vgpumem"]["schedule"];
  ASSERT_TRUE(schedule.is_object()) << paged.trace["vgpumem"].dump();
  EXPECT_EQ(schedule["locks"].get<int>(), 1) << schedule.dump();
  EXPECT_EQ(schedule["period"].get<std::uint64_t>(), d.per_step) << schedule.dump();
  // (Not "locked" at exit: reading the weights back after the last step
  // breaks the period, as it must.)
}

// (cnn-small's 43 operations lock in its third step: the detector waits for
// 64 alike, so that a stream of a few kernels never locks by chance.)
INSTANTIATE_TEST_SUITE_P(PagingLayered, LayeredWorkload,
                         ::testing::Values("resnet50", "vgg16", "bert-large", "gpt2-medium"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// An evaluation step (forward and loss only) breaks the schedule; the
// training step's kind is recognised a few operations into the next
// training step and its plan followed again, with no step on demand to
// learn it again (before step kinds, on demand carried the evaluation and
// the two training steps after it, one more was recorded, and a new plan
// was made): bit-identical to uncapped, under the cap, nothing illegal.
// Evaluation every eighth step, so that the plan, made on its own thread (a
// few steps of wall time on the simulated driver, more on a busy machine),
// is in force for a few steps before the first evaluation.
TEST(PagingLayered, EvaluationStepsBreakTheScheduleAndTheTrainingPlanReturnsAfterEach) {
  const std::vector<std::string> args{"--model", "bert-large", "--steps", "16", "--eval-every", "8"};
  const Result baseline = uncapped(args);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const std::uint64_t cap = baseline.wanted / 2;
  const PagedRun paged = run_paged("eval-steps", trainer(args), std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_EQ(parse(paged.process).loss_and_weights, baseline.loss_and_weights);
  ASSERT_FALSE(paged.simulator.is_null());
  EXPECT_EQ(paged.simulator["illegal_accesses"].get<int>(), 0);
  EXPECT_LE(paged.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), cap);
  const nlohmann::json& schedule = paged.trace["vgpumem"]["schedule"];
  ASSERT_TRUE(schedule.is_object()) << paged.trace["vgpumem"].dump();
  // Steps 1-2 lock, 3 is recorded, 4-7 follow the plan, 8 breaks it after
  // its forward; 9 is named the training kind again and follows its plan.
  EXPECT_EQ(schedule["kinds"].get<int>(), 1) << schedule.dump();
  EXPECT_EQ(schedule["locks"].get<int>(), 2) << schedule.dump();
  EXPECT_EQ(schedule["kind_returns"].get<int>(), 1) << schedule.dump();
  EXPECT_GE(schedule["breaks"].get<int>(), 1) << schedule.dump();
  EXPECT_GE(schedule["plans"].get<int>(), 1) << schedule.dump();
  EXPECT_GT(schedule["scheduled_offloads"].get<int>(), 0) << schedule.dump();
  // The last steps (the evaluation's among them): nearly all followed.
  std::uint64_t operations = 0, followed = 0;
  for (const nlohmann::json& it : schedule["recent_iterations"]) {
    operations += it["operations"].get<std::uint64_t>();
    followed += it["followed"].get<std::uint64_t>();
  }
  ASSERT_GT(operations, 0u) << schedule.dump();
  EXPECT_GE(static_cast<double>(followed), 0.9 * static_cast<double>(operations)) << schedule["recent_iterations"].dump();
}

// Issued as PyTorch issues a step: backward from a second host thread, and
// activations from a caching allocator (segments of several tensors each,
// addresses that move between steps) -- the small CNN at a 16th of its
// sizes, and GPT-2's shape with eager attention (two layers, its s x s
// matrices at a 64th). At half its peak, under lru and under auto, every
// bit as uncapped (and as the static allocator from one thread), no CUDA
// error, no illegal access, under the cap.
class LayeredAsPyTorchIssuesIt : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(LayeredAsPyTorchIssuesIt, AtHalfItsPeakUnderLruAndAutoEveryBitIsAsUncapped) {
  std::vector<std::string> args = GetParam();
  const Result one_thread_static = uncapped(args);
  ASSERT_EQ(one_thread_static.process.exit_code, 0) << one_thread_static.process.out << one_thread_static.process.err;
  args.insert(args.end(), {"--backward-thread", "--allocator", "caching"});
  const Result baseline = uncapped(args);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  ASSERT_NE(baseline.loss_and_weights, "");
  EXPECT_EQ(baseline.loss_and_weights, one_thread_static.loss_and_weights);
  const std::uint64_t cap = baseline.wanted / 2;
  for (const std::string policy : {"lru", "auto"}) {
    SCOPED_TRACE(policy);
    const PagedRun run =
        run_paged("as-pytorch-" + policy, trainer(args), std::to_string(cap), {{"VGPUMEM_POLICY", policy}});
    ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
    EXPECT_EQ(run.process.out.find("CUDA_ERROR"), std::string::npos) << run.process.out;
    EXPECT_EQ(parse(run.process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
    const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
    EXPECT_GT(paging["offloads"].get<int>(), 0) << "the cap was never reached: the test proves nothing";
    EXPECT_EQ(paging["ooms"].get<int>(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PagingLayered, LayeredAsPyTorchIssuesIt,
    ::testing::Values(std::vector<std::string>{"--model", "cnn-small", "--scale", "16", "--steps", "8"},
                      std::vector<std::string>{"--model", "gpt2-medium", "--layers", "2", "--attention", "eager",
                                               "--scale", "64", "--steps", "6"}),
    [](const ::testing::TestParamInfo<std::vector<std::string>>& param) {
      std::string name = param.param[1];
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Issued as PyTorch issues a step, under auto at half its peak: the
// backward thread's operations are on the training loop's stream, so the
// step is that stream's sequence whichever thread issued each, and the plan
// is made from all of it (keyed by thread, the plan covered the main
// thread's 23 operations of the 43 and backward ran on demand). The caching
// allocator moves the logits every other step, so the period is the step
// or two of them (Note [The access feed and execution identity], vmm/access_feed.h). In the steady
// state -- the last whole iterations covering the last 8 of 40 steps, as
// the trace's schedule.recent_iterations counts them -- at least 90 % of
// the operations follow the plan (backward's 20 of each step's 43 among
// them: without them at most 54 % could), and the last step takes within
// 10 % of the same run from one thread, which auto planned whole already.
TEST(PagingLayered, AsPyTorchIssuesItAutoPlansTheWholeStepFromBothThreads) {
  constexpr int kSteps = 40, kSteadySteps = 8;
  const std::uint64_t per_step = describe("cnn-small").per_step;
  ASSERT_GT(per_step, 0u);
  const std::vector<std::string> one_thread{"--model", "cnn-small", "--scale", "16", "--steps",
                                            std::to_string(kSteps), "--allocator", "caching"};
  std::vector<std::string> two_threads = one_thread;
  two_threads.push_back("--backward-thread");
  const Result baseline = uncapped(two_threads);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const std::uint64_t cap = baseline.wanted / 2;
  const PagedRun run = run_paged("whole-step", trainer(two_threads), std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
  EXPECT_EQ(parse(run.process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0) << "the cap must bite";

  const nlohmann::json& schedule = run.trace["vgpumem"]["schedule"];
  ASSERT_TRUE(schedule.is_object()) << run.trace["vgpumem"].dump();
  EXPECT_EQ(schedule["streams"], 1) << "one stream, whichever thread issued";
  EXPECT_EQ(schedule["unnamed_threads"], 0);
  EXPECT_EQ(schedule["locks"], 1) << schedule.dump();
  const std::uint64_t period = schedule["period"].get<std::uint64_t>();
  EXPECT_TRUE(period == per_step || period == 2 * per_step) << "the whole step or two: " << period;
  EXPECT_EQ(schedule["plan"]["period"].get<std::uint64_t>(), period) << "planned from the whole step";
  EXPECT_GE(schedule["handoffs"].get<int>(), 2 * kSteps) << "to the backward thread and back, each step";
  if (schedule.contains("trial")) {
    EXPECT_TRUE(schedule["trial"]["done"].get<bool>()) << "still trying ways: not yet steady " << schedule["trial"].dump();
  }

  std::uint64_t operations = 0, followed = 0;
  const nlohmann::json& recent = schedule["recent_iterations"];
  for (std::size_t k = recent.size(); k-- > 0 && operations < kSteadySteps * per_step;) {
    EXPECT_EQ(recent[k]["operations"].get<std::uint64_t>() % per_step, 0u) << "whole steps: " << recent.dump();
    operations += recent[k]["operations"].get<std::uint64_t>();
    followed += recent[k]["followed"].get<std::uint64_t>();
  }
  ASSERT_GE(operations, kSteadySteps * per_step) << recent.dump();
  EXPECT_GE(static_cast<double>(followed), 0.9 * static_cast<double>(operations)) << recent.dump();

  const PagedRun single =
      run_paged("whole-step-one-thread", trainer(one_thread), std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(single, "RESULT", cap));
  const double step_ns = static_cast<double>(result_number(run.process.out, "step_ns"));
  const double single_ns = static_cast<double>(result_number(single.process.out, "step_ns"));
  EXPECT_NEAR(step_ns, single_ns, 0.1 * single_ns) << "with a backward thread against one thread, the last step";
}

// VGG-16 at a `scale`-th of its sizes (32 unless a test needs a budget of
// many chunks), the link and the lending limit scaled with it as vgpumem
// bench scales them (55 GB/s and 2 MiB over `scale`), 16 steps under auto
// with a cap of `numerator` / `denominator` of its uncapped peak: a clean
// run, every bit as uncapped.
void run_vgg16_under_auto(const std::string& tag, std::uint64_t numerator, std::uint64_t denominator,
                          PagedRun* run, const std::string& grace = "lend", int scale = 32) {
  const std::vector<std::string> args{"--model", "vgg16", "--scale", std::to_string(scale), "--steps", "16"};
  const Result baseline = uncapped(args);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const std::uint64_t cap = baseline.wanted * numerator / denominator;
  *run = run_paged(tag, trainer(args), std::to_string(cap),
                   {{"VGPUMEM_POLICY", "auto"},
                    {"VGPUSIM_LINK_GBPS", std::to_string(55.0 / scale)},
                    {"VGPUMEM_GRACE", grace},
                    {"VGPUMEM_LEND_MAX_BYTES", std::to_string((2u << 20) / scale)}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(*run, "RESULT", cap));
  EXPECT_EQ(parse(run->process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
}

// The step each way of the trial measured, by its policy (ways not yet
// measured left out).
std::map<std::string, double> trial_steps(const nlohmann::json& trial) {
  std::map<std::string, double> measured;
  for (const nlohmann::json& way : trial["candidates"]) {
    if (way["step_ns"].is_number()) measured[way["policy"].get<std::string>()] = way["step_ns"].get<double>();
  }
  return measured;
}

// A trial of auto's plan that fits against its alternatives (plan_trial.h:
// the same with a one-chunk margin, the same planned on the link alone):
// every one measured, the fastest chosen.
void expect_margin_trial(const nlohmann::json& trial) {
  ASSERT_TRUE(trial["done"].get<bool>()) << trial.dump();
  const std::map<std::string, double> measured = trial_steps(trial);
  ASSERT_EQ(measured.size(), trial["candidates"].size()) << trial.dump();
  ASSERT_GE(measured.size(), 2u) << trial.dump();
  ASSERT_TRUE(measured.count("auto") != 0) << trial.dump();
  for (const auto& [way, step_ns] : measured) {
    EXPECT_TRUE(way == "auto" || way == "auto, one-chunk margin" || way == "auto, on the link alone") << way;
  }
  const auto fastest = std::min_element(measured.begin(), measured.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(trial["chosen"], fastest->first) << trial.dump();
}

// VGG-16's short step of large maps at half its peak: with the blanket
// launch grace of eight operations (VGPUMEM_GRACE=blanket) no plan fits (the
// units of the last eight operations fill the cap), so auto's way in the
// trial is its plan with the grace cut, its offloads allowed inside the
// grace — as on demand itself evicts there at this cap. It is measured
// against on demand and vDNN, runs faster than on demand, and every bit is
// as uncapped.
TEST(PagingLayered, WhereTheBlanketGraceLeavesNoPlanRoomAutoCutsItWithEveryBitAsUncapped) {
  PagedRun run;
  ASSERT_NO_FATAL_FAILURE(run_vgg16_under_auto("grace-cut", 1, 2, &run, "blanket"));
  const nlohmann::json& vgpumem = run.trace["vgpumem"];
  const nlohmann::json& schedule = vgpumem["schedule"];
  ASSERT_TRUE(schedule["plan"].is_object()) << schedule.dump();
  EXPECT_LT(schedule["plan"]["grace_operations"].get<int>(), 8) << schedule["plan"].dump();
  EXPECT_GT(vgpumem["paging"]["grace"]["planned_inside"].get<int>(), 0) << vgpumem["paging"]["grace"].dump();
  const nlohmann::json& trial = schedule["trial"];
  ASSERT_TRUE(trial.is_object() && trial["done"].get<bool>()) << schedule.dump();
  std::map<std::string, double> measured = trial_steps(trial);
  EXPECT_GT(measured["auto"], 0) << trial.dump();
  EXPECT_LT(measured["auto"], measured["on demand"]) << trial.dump();
}

// The same step under lending, the default: the blanket's eight
// operations are not kept, so auto's plan fits at once with every offload
// going with its last use. At a 16th of the sizes the standard margin is
// two chunks and more; where the plan with a one-chunk margin is predicted
// faster (which depends on the step the planner recorded), both are
// measured a step each and the faster kept (the trial itself is tested on
// a fixed step in Scheduler.WhereAutosPlanFitsItsMarginIsMeasured). Every
// bit as uncapped.
TEST(PagingLayered, UnderLendingAutosPlanFitsAtHalfThePeakWithEveryBitAsUncapped) {
  PagedRun run;
  ASSERT_NO_FATAL_FAILURE(run_vgg16_under_auto("lend-half", 1, 2, &run, "lend", 16));
  const nlohmann::json& schedule = run.trace["vgpumem"]["schedule"];
  ASSERT_TRUE(schedule["plan"].is_object()) << schedule.dump();
  EXPECT_TRUE(schedule["plan"]["fits"].get<bool>()) << schedule["plan"].dump();
  EXPECT_EQ(schedule["plan"]["grace_operations"].get<int>(), 0) << schedule["plan"].dump();
  EXPECT_GT(schedule["scheduled_offloads"].get<int>(), 0) << schedule.dump();
  if (schedule.contains("trial")) expect_margin_trial(schedule["trial"]);
}

// VGG-16 at a third of its peak (scaled: two fifths, below): two
// operations of its first fully connected layer's backward pass name more
// than the cap between them, so only a plan whose offloads go as each last
// use is enqueued fits. Under the blanket grace that takes the grace cut to
// none (an offload issued an operation later left none that fits), and the
// plan is measured in a trial against on demand and vDNN, beats both and
// runs the step; under lending, the default, the plan is made so from the
// start, fits without a trial, and no offload goes inside a grace. Every bit
// is as uncapped.
TEST(PagingLayered, WhereOnlyOffloadsWithTheLastUseFitAutosPlanBeatsOnDemandWithEveryBit) {
  for (const std::string grace : {"lend", "blanket"}) {
    SCOPED_TRACE(grace);
    PagedRun run;
    ASSERT_NO_FATAL_FAILURE(run_vgg16_under_auto("partial-plan-" + grace, 2, 5, &run, grace));
    const nlohmann::json& vgpumem = run.trace["vgpumem"];
    const nlohmann::json& schedule = vgpumem["schedule"];
    ASSERT_TRUE(schedule["plan"].is_object()) << schedule.dump();
    EXPECT_TRUE(schedule["plan"]["fits"].get<bool>()) << schedule["plan"].dump();
    EXPECT_EQ(schedule["plan"]["grace_operations"].get<int>(), 0) << schedule["plan"].dump();
    const nlohmann::json& kept = vgpumem["paging"]["grace"];
    EXPECT_EQ(kept["kind"], grace) << kept.dump();
    if (grace == "lend") {
      EXPECT_EQ(kept["planned_inside"].get<int>(), 0) << kept.dump();
      EXPECT_GT(schedule["scheduled_offloads"].get<int>(), 0) << schedule.dump();
      if (schedule.contains("trial")) expect_margin_trial(schedule["trial"]);
      continue;
    }
    EXPECT_GT(kept["planned_inside"].get<int>(), 0) << kept.dump();
    const nlohmann::json& trial = schedule["trial"];
    ASSERT_TRUE(trial.is_object() && trial["done"].get<bool>()) << schedule.dump();
    std::map<std::string, double> measured = trial_steps(trial);
    ASSERT_TRUE(measured.count("auto") != 0 && measured.count("on demand") != 0) << trial.dump();
    EXPECT_LT(measured["auto"], measured["on demand"]) << trial.dump();
    EXPECT_EQ(trial["chosen"], "auto") << trial.dump();
  }
}

// VGG-16 at a third of its peak (scaled), where no plan fits and on demand
// makes room: the victims by the learned step's next use (auto's default) and by
// least recently used both train every bit as uncapped, under the cap, and
// the trace says which order made room.
TEST(PagingLayered, VictimsByNextUseAndByLeastRecentUseBothKeepEveryBit) {
  const std::vector<std::string> args{"--model", "vgg16", "--scale", "32", "--steps", "8"};
  const Result baseline = uncapped(args);
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  // (At a 32nd of its sizes a third is under one kernel's operands, each
  // rounded up to 2 MiB: two fifths is the scaled cell's a third.)
  const std::uint64_t cap = baseline.wanted * 2 / 5;
  for (const auto& [victims, named] : std::map<std::string, std::string>{{"next-use", "furthest next use"},
                                                                         {"lru", "least recently used"}}) {
    SCOPED_TRACE(victims);
    const PagedRun run = run_paged("victims-" + victims, trainer(args), std::to_string(cap),
                                   {{"VGPUMEM_POLICY", "auto"}, {"VGPUMEM_VICTIMS", victims}});
    ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
    EXPECT_EQ(parse(run.process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
    const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
    const nlohmann::json& chosen = paging["victims"];
    EXPECT_EQ(chosen["order"], named) << chosen.dump();
    EXPECT_GT(chosen["in_order"].get<int>(), 0) << chosen.dump();
    if (victims == "lru") {
      EXPECT_EQ(chosen["in_order"], chosen["taken"]) << chosen.dump();
    }
    EXPECT_GT(paging["offloads"].get<int>(), paging["scheduled_offloads"].get<int>())
        << "room made on demand too: " << paging.dump();
  }
}

// --libraries: the workload's convolutions (cnn-small) and GEMMs
// (bert-large) as cuDNN and cuBLAS calls. At half its peak under auto, with
// the library hooks on and off, every bit as uncapped; with them on, the
// profile's layers are exactly the calls, and outputs the calls overwrite
// whole come back without a copy; with them off, the shim knows nothing of
// the calls and copies everything back.
class LayeredLibraries : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> args() const {
    return {"--model", GetParam(), "--steps", "8", "--scale", "64", "--libraries"};
  }
};

// The flags of an operation of the profiled step (scheduler/profile_json.cpp):
// bit 1 leads a layer, bits 4-7 the library call it belongs to.
constexpr unsigned kHeavyFlag = 2, kLibraryShift = 4, kLibraryMask = 0xf;

TEST_P(LayeredLibraries, TheCallsMarkTheLayersAndSpareCopiesWithEveryBitAsUncapped) {
  const Result baseline = uncapped(args());
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  const std::uint64_t cap = baseline.wanted / 2;
  for (const std::string& hooks : {std::string("on"), std::string("off")}) {
    SCOPED_TRACE("VGPUMEM_LIBRARY_HOOKS=" + hooks);
    const PagedRun run = run_paged("libraries-" + GetParam() + "-" + hooks, trainer(args()), std::to_string(cap),
                                   {{"VGPUMEM_POLICY", "auto"}, {"VGPUMEM_LIBRARY_HOOKS", hooks}});
    ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
    EXPECT_EQ(parse(run.process).loss_and_weights, baseline.loss_and_weights) << "bit-identical to uncapped";
    const std::uint64_t not_fetched = run.trace["vgpumem"]["paging"]["bytes_not_fetched"].get<std::uint64_t>();
    const nlohmann::json& profile = run.trace["vgpumem"]["schedule"]["profile"];
    ASSERT_TRUE(profile.is_object()) << run.trace["vgpumem"]["schedule"].dump();
    std::size_t calls = 0, heavy = 0;
    for (const nlohmann::json& op : profile["ops"]) {
      const unsigned flags = op[2].get<unsigned>();
      const bool call = ((flags >> kLibraryShift) & kLibraryMask) != 0;
      calls += call ? 1 : 0;
      heavy += (flags & kHeavyFlag) != 0 ? 1 : 0;
      // Every call launches one kernel: with the hooks on, it and only it leads a layer.
      if (hooks == "on") {
        EXPECT_EQ((flags & kHeavyFlag) != 0, call) << op.dump();
      }
    }
    if (hooks == "on") {
      EXPECT_GT(calls, 0u);
      EXPECT_GT(not_fetched, 0u) << "outputs the calls overwrite whole came back without a copy";
    } else {
      EXPECT_EQ(calls, 0u) << "with the hooks off the shim sees no call";
      EXPECT_GT(heavy, 0u) << "layers from the kernel stream alone";
      EXPECT_EQ(not_fetched, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PagingLayered, LayeredLibraries, ::testing::Values("cnn-small", "bert-large"));

}  // namespace
}  // namespace vgpumem::test
