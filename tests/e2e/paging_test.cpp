// Paging end to end (VGPUMEM_POLICY=lru, and auto, the default with a cap): the demo
// trainer, whose working set is 1.2, 3 and 10 times the cap, trains to
// bit-identical weights and loss, while the simulated driver's own report
// shows its physical peak under the cap and no illegal access.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

struct Workload {
  const char* name;
  std::vector<std::string> args;
};

// Wide layers, a small batch: weights dominate (4 MiB each, and as much for
// their gradients), compute stays cheap for the simulator.
const Workload kTwelveLayers{"12 layers", {"--width", "1024", "--batch", "8", "--layers", "12", "--steps", "2"}};
const Workload kTwentyLayers{"20 layers", {"--width", "1024", "--batch", "8", "--layers", "20", "--steps", "2"}};

struct Run {
  ProcessResult process;
  std::string result;         // the trainer's RESULT line, less the peak it wanted
  std::uint64_t wanted = 0;   // peak_device_bytes_wanted
  nlohmann::json simulator;   // the simulated driver's report
  nlohmann::json trace;       // the shim's trace (with a cap)
};

using Environment = std::map<std::string, std::string>;

Run train(const Workload& workload, const std::string& limit, const std::string& faults = "",
          const std::string& check = "", const std::string& policy = "", const Environment& extra = {}) {
  std::string tag = std::string(workload.name).substr(0, 2) + "-" + (limit.empty() ? "none" : limit) + check + policy;
  for (const auto& [name, value] : extra) tag += "-" + value;
  const std::string report = scratch(tag, "sim"), trace = scratch(tag, "trace");
  auto env = limit.empty() ? simulator_environment() : shim_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUSIM_REPORT"] = report;
  if (!limit.empty()) {
    env["VGPUMEM_LIMIT"] = limit;
    env["VGPUMEM_TRACE"] = trace;
  }
  if (!faults.empty()) env["VGPUSIM_FAULTS"] = faults;
  if (!check.empty()) env["VGPUMEM_CHECK"] = check;
  if (!policy.empty()) env["VGPUMEM_POLICY"] = policy;
  for (const auto& [name, value] : extra) env[name] = value;
  std::vector<std::string> argv{program("mlp_trainer")};
  argv.insert(argv.end(), workload.args.begin(), workload.args.end());
  Run run;
  run.process = run_process(argv, env);
  const std::string line = field(run.process.out, "RESULT");
  const std::size_t peak = line.find(" peak_device_bytes_wanted=");
  run.result = line.substr(0, peak);
  if (peak != std::string::npos) run.wanted = std::stoull(line.substr(peak + 26));
  run.simulator = read_json(report);
  if (!limit.empty()) run.trace = read_json(trace);
  return run;
}

// Returns the paged run's trace summary.
nlohmann::json expect_identical_under(const Workload& workload, double oversubscription, const std::string& check = "",
                                      const std::string& policy = "", const Environment& extra = {}) {
  const Run baseline = train(workload, "");
  EXPECT_EQ(baseline.process.exit_code, 0) << baseline.process.out << baseline.process.err;
  EXPECT_NE(baseline.result, "");
  const auto cap = static_cast<std::uint64_t>(static_cast<double>(baseline.wanted) / oversubscription);
  const Run paged = train(workload, std::to_string(cap), "", check, policy, extra);
  if (paged.trace.is_null() || paged.simulator.is_null()) {
    ADD_FAILURE() << "no trace or report: " << paged.process.out << paged.process.err;
    return {};
  }
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_EQ(paged.result, baseline.result) << "weights and loss must be bit-identical";
  EXPECT_LE(paged.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), cap)
      << "the simulated driver's own count of physical device memory";
  EXPECT_EQ(paged.simulator["illegal_accesses"].get<int>(), 0) << paged.simulator.dump();
  const nlohmann::json& paging = paged.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0) << "the cap was never reached: the test proves nothing";
  EXPECT_GT(paging["prefetches"].get<int>(), 0);
  EXPECT_EQ(paging["ooms"].get<int>(), 0);
  // One device, the one the trainer used: on an H200 the summary listed 64,
  // every index whose cap a check had resolved.
  EXPECT_EQ(paged.trace["vgpumem"]["devices"].size(), 1u) << paged.trace["vgpumem"]["devices"].dump();
  // The peak charged to the cap, the same in both places the summary says it.
  EXPECT_EQ(paged.trace["vgpumem"]["peak_counted_bytes"].value("0", std::uint64_t{0}),
            paged.trace["vgpumem"]["devices"][0]["peak"].get<std::uint64_t>());
  // Where the host time went: every prefetch maps its chunks.
  EXPECT_GT(paging["host_time_ns"]["map"].get<std::uint64_t>(), 0u) << paging["host_time_ns"].dump();
  EXPECT_LE(paging["host_time_ns"]["lock_wait"].get<std::uint64_t>(), paging["slow_path_ns"].get<std::uint64_t>());
  // The trace: one "on host" span per offload, and a resident-bytes counter
  // that never passes the cap.
  int spans_begun = 0, spans_ended = 0, counters = 0;
  for (const nlohmann::json& event : paged.trace["traceEvents"]) {
    if (event.value("cat", "") != "residency") continue;
    const std::string phase = event.value("ph", "");
    spans_begun += phase == "b";
    spans_ended += phase == "e";
    if (phase == "C") {
      ++counters;
      EXPECT_LE(event["args"]["resident"].get<std::uint64_t>(), cap);
    }
  }
  if (paging["stalled_operations"].get<int>() > 0) {
    EXPECT_GT(paging["stall_ns"].get<std::uint64_t>(), 0u) << "waits are timed";
  }
  EXPECT_EQ(spans_begun, paging["offloads"].get<int>());
  EXPECT_GE(spans_ended, paging["prefetches"].get<int>());
  EXPECT_GT(counters, 0);
  return paged.trace["vgpumem"];
}

// The learned schedule at half, a third and a quarter of the trainer's
// peak, over enough steps for a plan to be made and followed: every byte
// as without a cap, whatever the plan does (at a third and a quarter the
// demo trainer's step cannot fit with eight operations' grace, and auto
// pages on demand: the plan is dropped, and says so).
const Workload kEightSteps{"8 steps", {"--width", "1024", "--batch", "8", "--layers", "12", "--steps", "8"}};
TEST(PagingSchedule, AutoAtHalfTheTrainersPeakIsBitIdentical) { expect_identical_under(kEightSteps, 2.0, "", "auto"); }
TEST(PagingSchedule, AutoAtAThirdOfTheTrainersPeakIsBitIdentical) { expect_identical_under(kEightSteps, 3.0, "", "auto"); }
TEST(PagingSchedule, AutoAtAQuarterOfTheTrainersPeakIsBitIdentical) { expect_identical_under(kEightSteps, 4.0, "", "auto"); }
TEST(PagingSchedule, AutoUnderStrictCheckingIsBitIdentical) { expect_identical_under(kEightSteps, 1.5, "strict", "auto"); }

// Where the step can fit, the plan is made and followed: units move ahead
// of need, and the run is still bit-identical. Sixteen steps: the plan is
// made on its own thread, which on the simulated driver takes a few steps
// of wall time (vgpumem demo, cli/demo.cpp).
const Workload kSixteenSteps{"16 steps", {"--width", "1024", "--batch", "8", "--layers", "12", "--steps", "16"}};
TEST(PagingSchedule, AutoMovesUnitsAheadOfNeedWhereTheStepCanFit) {
  const nlohmann::json summary = expect_identical_under(kSixteenSteps, 1.4, "", "auto");
  ASSERT_TRUE(summary.contains("schedule")) << summary.dump();
  const nlohmann::json& schedule = summary["schedule"];
  EXPECT_EQ(schedule["planner"], "auto");
  EXPECT_GE(schedule["plans"].get<int>(), 1) << schedule.dump();
  EXPECT_TRUE(schedule["plan"]["fits"].get<bool>()) << schedule.dump();
  EXPECT_GT(schedule["plan"]["swaps"].get<int>(), 0) << schedule.dump();
  EXPECT_GT(schedule["scheduled_offloads"].get<int>(), 0) << schedule.dump();
  EXPECT_GT(schedule["scheduled_prefetches"].get<int>(), 0) << schedule.dump();
}

// At a third of its peak the demo trainer's step fits no plan (with eight
// operations' grace): the ways to run it are measured in turn — on demand,
// auto's partial plan, vDNN's — and the fastest measured is kept. Every
// byte as without a cap, whichever runs.
TEST(PagingSchedule, WhereNoPlanFitsTheFastestWayMeasuredIsKept) {
  const Workload workload{"trial", {"--width", "512", "--batch", "8", "--layers", "12", "--steps", "20"}};
  const nlohmann::json summary = expect_identical_under(workload, 3.0, "", "auto");
  const nlohmann::json& schedule = summary["schedule"];
  EXPECT_FALSE(schedule["plan"]["fits"].get<bool>()) << schedule.dump();
  const nlohmann::json& trial = schedule["trial"];
  ASSERT_TRUE(trial.is_object()) << schedule.dump();
  EXPECT_TRUE(trial["done"].get<bool>()) << trial.dump();
  const nlohmann::json& candidates = trial["candidates"];
  ASSERT_GE(candidates.size(), 2u) << trial.dump();
  EXPECT_EQ(candidates[0]["policy"], "on demand");
  std::string fastest;
  double best = 1e300;
  for (const auto& candidate : candidates) {
    ASSERT_TRUE(candidate["step_ns"].is_number()) << trial.dump();
    EXPECT_GT(candidate["step_ns"].get<double>(), 0);
    if (candidate["step_ns"].get<double>() < best) best = candidate["step_ns"].get<double>(), fastest = candidate["policy"];
  }
  EXPECT_EQ(trial["chosen"], fastest) << trial.dump();
}

// A new input shape mid-run (the batch drops from 8 to 6 at step 12 of 24:
// every kernel's parameters and every activation's size change) breaks the
// schedule; on demand carries the steps until the detector locks on the new
// step, which is recorded and planned, and that plan is followed: more than
// the first lock's steps could account for. Bit-identical throughout.
TEST(PagingSchedule, ANewShapeBreaksTheScheduleAndTheNewStepIsLearned) {
  const Workload workload{"shape change", {"--width", "512", "--batch", "8", "--layers", "12", "--steps", "24",
                                           "--batch-change", "12:6"}};
  const nlohmann::json summary = expect_identical_under(workload, 1.4, "", "auto");
  ASSERT_TRUE(summary.contains("schedule")) << summary.dump();
  const nlohmann::json& schedule = summary["schedule"];
  // Two step kinds, each locked on once as new; the old one may be named
  // again from the new step's first operations (those are alike) before
  // the new step, found whole, takes over.
  EXPECT_EQ(schedule["kinds"].get<int>(), 2) << schedule.dump();
  EXPECT_EQ(schedule["locks"].get<int>() - schedule["kind_returns"].get<int>(), 2) << schedule.dump();
  EXPECT_GE(schedule["breaks"].get<int>(), 1) << schedule.dump();
  EXPECT_GE(schedule["plans"].get<int>(), 2) << "planned again after the change: " << schedule.dump();
  // The first lock (steps 1-2) leaves at most steps 4-11 to follow its plan:
  // eight steps. More than ten steps followed means the new plan was.
  const std::uint64_t period = schedule["period"].get<std::uint64_t>();
  EXPECT_GT(schedule["operations_followed"].get<std::uint64_t>(), 10 * period) << schedule.dump();
  EXPECT_EQ(schedule["operations_strayed"].get<std::uint64_t>(), 0u) << schedule.dump();
}

// The vDNN baselines run the same program to the same bytes.
TEST(PagingSchedule, VdnnBaselinesAreBitIdentical) {
  for (const char* policy : {"vdnn-all", "vdnn-conv"}) {
    const nlohmann::json summary = expect_identical_under(kEightSteps, 2.0, "", policy);
    EXPECT_EQ(summary["schedule"]["planner"], policy);
  }
}

// The access log finds the training step in what the launches touched: two
// more steps add two periods' worth of operations, the period locks once,
// and every step after the two that lock it is followed whole (and the
// timed ones recorded for the planner: the first after the lock, and
// those the trial asks for).
TEST(PagingSchedule, TheTrainingStepIsFoundInTheOperationStream) {
  const auto schedule_of = [](int steps) {
    const Workload workload{"schedule", {"--width", "1024", "--batch", "8", "--layers", "12", "--steps",
                                         std::to_string(steps)}};
    const struct Run paged = train(workload, "40MiB", "", "", "auto");  // the trainer wants 82 MiB at its peak
    EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
    EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0) << "the cap must bite";
    return paged.trace["vgpumem"]["schedule"];
  };
  const nlohmann::json six = schedule_of(6), eight = schedule_of(8);
  EXPECT_FALSE(train({"lru", {"--width", "1024", "--batch", "8", "--layers", "12", "--steps", "3"}}, "40MiB", "", "",
                     "lru")
                   .trace["vgpumem"]
                   .contains("schedule"))
      << "lru pages on demand and learns nothing";
  ASSERT_TRUE(six.is_object() && eight.is_object()) << six.dump() << eight.dump();
  const std::uint64_t period = eight["period"].get<std::uint64_t>();
  ASSERT_GT(period, 0u) << eight.dump();
  EXPECT_EQ(six["period"].get<std::uint64_t>(), period);
  EXPECT_EQ(eight["operations"].get<std::uint64_t>() - six["operations"].get<std::uint64_t>(), 2 * period)
      << "a step is one period: " << six.dump() << eight.dump();
  EXPECT_EQ(eight["locks"].get<int>(), 1) << eight.dump();
  EXPECT_EQ(eight["streams"].get<int>(), 1);
  EXPECT_EQ(eight["unnamed_threads"].get<int>(), 0);
  EXPECT_EQ(eight["iterations_followed"].get<int>() - six["iterations_followed"].get<int>(), 2)
      << "each step after the lock is followed";
  EXPECT_GE(eight["iterations_followed"].get<int>(), 5) << eight.dump();
  EXPECT_GE(eight["iterations_recorded"].get<int>(), 1) << eight.dump();
  EXPECT_LT(eight["iterations_recorded"].get<int>(), eight["iterations_followed"].get<int>())
      << "an untimed step is not written down: " << eight.dump();
}

TEST(Paging, TrainerAtOnePointTwoTimesTheCapIsBitIdentical) { expect_identical_under(kTwelveLayers, 1.2, "", "lru"); }
TEST(Paging, TrainerAtThreeTimesTheCapIsBitIdentical) { expect_identical_under(kTwelveLayers, 3.0, "", "lru"); }
TEST(Paging, TrainerAtTenTimesTheCapIsBitIdentical) { expect_identical_under(kTwentyLayers, 10.0); }
// VGPUMEM_CHECK: chunks reused only once unmapped; everything else offloaded
// before every operation. Any access outside the rules would fault.
TEST(Paging, TrainerUnderStrictCheckingIsBitIdentical) { expect_identical_under(kTwelveLayers, 3.0, "strict"); }
TEST(Paging, TrainerUnderTortureIsBitIdentical) { expect_identical_under(kTwelveLayers, 1.2, "torture"); }

// Chunks carved from blocks of 8 MiB (under these caps the automatic size is
// one chunk): a unit whose chunks follow one another in a block maps them
// in one call, at the block's offset. Every byte as without a cap, in each
// check mode, and fewer mappings than chunks mapped.
void expect_identical_on_blocks(double oversubscription, const std::string& check, const std::string& policy) {
  const nlohmann::json summary =
      expect_identical_under(kTwelveLayers, oversubscription, check, policy, {{"VGPUMEM_BLOCK_BYTES", "8MiB"}});
  if (summary.is_null()) return;
  const nlohmann::json& mappings = summary["paging"]["mappings"];
  EXPECT_LT(mappings["made"].get<std::uint64_t>(), mappings["chunks"].get<std::uint64_t>()) << mappings.dump();
  EXPECT_GT(summary["paging"]["devices"][0]["blocks"].get<std::uint64_t>(), 0u);
  EXPECT_LT(summary["paging"]["devices"][0]["blocks"].get<std::uint64_t>(),
            summary["paging"]["devices"][0]["chunk_bytes"].get<std::uint64_t>() >> 21)
      << "blocks of more than one chunk";
}
TEST(PagingBlocks, TrainerOnEightMiBBlocksIsBitIdentical) { expect_identical_on_blocks(3.0, "", "lru"); }
TEST(PagingBlocks, TrainerOnEightMiBBlocksUnderStrictIsBitIdentical) { expect_identical_on_blocks(3.0, "strict", "lru"); }
TEST(PagingBlocks, TrainerOnEightMiBBlocksUnderTortureIsBitIdentical) { expect_identical_on_blocks(1.2, "torture", ""); }
TEST(PagingBlocks, TrainerOnEightMiBBlocksUnderAutoIsBitIdentical) { expect_identical_on_blocks(2.0, "", "auto"); }

// The simulated driver refuses one call the pager makes: it logs and works
// around it, and the trainer's result does not change.
// `logged`: what the log says, any one of them (which call hits the fault
// depends on whether the reclaimer or the program's thread made it).
void expect_identical_despite(const std::string& faults, const std::vector<std::string>& logged) {
  const Run baseline = train(kTwelveLayers, "");
  ASSERT_EQ(baseline.process.exit_code, 0) << baseline.process.out;
  const Run paged = train(kTwelveLayers, std::to_string(baseline.wanted / 3), faults);
  ASSERT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_EQ(paged.result, baseline.result);
  EXPECT_TRUE(std::any_of(logged.begin(), logged.end(),
                          [&](const std::string& line) { return paged.process.err.find(line) != std::string::npos; }))
      << paged.process.err;
  ASSERT_FALSE(paged.simulator.is_null());
  EXPECT_EQ(paged.simulator["faults_injected"].size(), 1u) << paged.simulator.dump();
  EXPECT_EQ(paged.simulator["illegal_accesses"].get<int>(), 0);
}

TEST(PagingFaults, RefusedChunkCreationIsWorkedAround) {
  expect_identical_despite("cuMemCreate:10", {"cannot create a 2 MiB block", "cannot create even a 2 MiB block"});
}
TEST(PagingFaults, RefusedPinnedHostAllocationIsWorkedAround) {
  expect_identical_despite("hostalloc:2", {"cannot offload", "cannot pin"});
}

// A kernel reads two buffers through a table of pointers the program
// uploaded: no launch names them, the launch that names the table holds them.
TEST(Paging, BuffersReachedThroughAnUploadedPointerTableAreBroughtIn) {
  // Two 4 MiB targets, six 4 MiB others and a slab: 34 MiB under a 16 MiB cap.
  const PagedRun paged = run_paged("pointer_table", {program("pointer_probe"), "table"}, "16MiB",
                                   {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "table ok", 16ull << 20));
  const auto& paging = paged.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0) << "the others were paged";
  EXPECT_EQ(paging["pointer_tables"]["launches_followed"].get<int>(), 1) << paging.dump();
}

// Legacy IPC cannot share virtual memory: with paging the driver's error
// reaches the program, with a log line naming the way out; with
// VGPUMEM_POLICY=off the same program shares its buffer under the cap.
TEST(Paging, LegacyIpcOnPagedMemoryIsTheDriversErrorAndSaysWhatToDo) {
  const PagedRun paged = run_paged("ipc_paged", {program("pointer_probe"), "ipc"}, "16MiB");
  EXPECT_EQ(paged.process.exit_code, 5) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.out.find("ipc refused CUDA_ERROR_INVALID_VALUE"), std::string::npos) << paged.process.out;
  EXPECT_NE(paged.process.err.find("run with VGPUMEM_POLICY=off"), std::string::npos) << paged.process.err;
  ASSERT_FALSE(paged.trace.is_null());
  EXPECT_EQ(paged.trace["vgpumem"]["paging"]["ipc_pinned_bytes"].get<std::uint64_t>(), 0u) << "the pin is undone";

  const PagedRun unpaged =
      run_paged("ipc_unpaged", {program("pointer_probe"), "ipc"}, "16MiB", {{"VGPUMEM_POLICY", "off"}});
  EXPECT_EQ(unpaged.process.exit_code, 0) << unpaged.process.out << unpaged.process.err;
  EXPECT_NE(unpaged.process.out.find("ipc ok"), std::string::npos);
}

// Range queries answer for the allocation, as for cuMemAlloc memory, not
// for the arena the pager reserved; offloaded memory answers too.
TEST(Paging, PointerQueriesSeeTheAllocationNotTheArena) {
  const PagedRun paged = run_paged("range_paged", {program("pointer_probe"), "range"}, "8MiB");
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.out.find("range ok"), std::string::npos);
  ASSERT_FALSE(paged.trace.is_null());
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0) << "one buffer was queried on the host";

  const PagedRun unpaged = run_paged("range_unpaged", {program("pointer_probe"), "range"}, "64MiB",
                                     {{"VGPUMEM_POLICY", "off"}});
  EXPECT_EQ(unpaged.process.exit_code, 0) << unpaged.process.out << unpaged.process.err;
}

// Pool allocations are paged when the pool allows it (default pool, a pool
// the program made) and not when paged memory could not keep its promise
// (exportable, shared with another device): those are charged, and paged
// memory makes room for them.
TEST(Paging, PoolAllocationsArePagedWhenThePoolAllowsIt) {
  const PagedRun paged = run_paged("pools", {program("pool_probe")}, "12MiB", {{"VGPUSIM_DEVICES", "2"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "pool ok", 12ull << 20));
  const auto& summary = paged.trace["vgpumem"];
  EXPECT_GT(summary["paging"]["offloads"].get<int>(), 0);
  EXPECT_EQ(summary["paging"]["paged_allocations"].get<int>(), 1) << "buffer 0, from the default pool";
  EXPECT_EQ(summary["live_allocations_at_exit"].get<int>(), 2) << "the exportable and the shared pool's";
}

// The program's own cuMemCreate/cuMemMap memory is paged like the rest
// (vmm/program_handles.cpp): twelve 4 MiB handles, each mapped alone, at three
// times the cap, one exported halfway (it becomes one real allocation and
// stays put), and the handle queries answer as the driver's.
TEST(Paging, TheProgramsOwnHandlesArePagedAtTheAddressesItMappedThem) {
  const PagedRun paged = run_paged("vmm_apart", {program("vmm_probe"), "apart"}, "16MiB",
                                   {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "vmm ok", 16ull << 20));
  const auto& paging = paged.trace["vgpumem"]["paging"];
  EXPECT_GE(paging["offloads"].get<int>(), 12);
  EXPECT_EQ(paging["program_handles"]["materialized"].get<int>(), 1) << "the exported one";
  EXPECT_EQ(paging["program_handles"]["live"].get<int>(), 0) << "all released";
  EXPECT_NE(paged.process.err.find("resident: the program exported its handle"), std::string::npos)
      << paged.process.err;
  const PagedRun off = run_paged("vmm_apart_off", {program("vmm_probe"), "apart"}, "64MiB",
                                 {{"VGPUMEM_POLICY", "off"}});
  EXPECT_EQ(off.process.exit_code, 0) << "the probe's own checks hold on the driver's handles too: "
                                      << off.process.out << off.process.err;
}

// The lines of `out` that start with `prefix`, in order.
std::string lines_starting(const std::string& out, const std::string& prefix) {
  std::string kept;
  std::size_t at = 0;
  while (at < out.size()) {
    const std::size_t end = std::min(out.find('\n', at), out.size());
    if (out.compare(at, prefix.size(), prefix) == 0) kept += out.substr(at, end - at + 1);
    at = end + 1;
  }
  return kept;
}

// cuMemRetainAllocationHandle and cuMemGetAccess answer as the driver does
// without paging: never one of the pager's chunks for cuMemAlloc memory, and
// for one of the program's mappings what the program granted, even while it
// is offloaded (under torture, each query finds what it names on the host).
TEST(Paging, VirtualMemoryQueriesAnswerAsTheDriverDoesForTheProgramsMemory) {
  const PagedRun off = run_paged("vmm_queries_off", {program("vmm_probe"), "queries"}, "64MiB",
                                 {{"VGPUMEM_POLICY", "off"}});
  ASSERT_EQ(off.process.exit_code, 0) << off.process.out << off.process.err;
  const std::string expected = lines_starting(off.process.out, "query ");
  ASSERT_EQ(std::count(expected.begin(), expected.end(), '\n'), 7) << off.process.out;
  const PagedRun paged = run_paged("vmm_queries", {program("vmm_probe"), "queries"}, "16MiB",
                                   {{"VGPUMEM_CHECK", "torture"}, {"VGPUMEM_GRACE_LAUNCHES", "0"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "vmm ok", 16ull << 20));
  EXPECT_EQ(lines_starting(paged.process.out, "query "), expected);
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
}

// A segment grown handle by handle, as PyTorch's expandable segments do,
// with one buffer spanning four handles: a kernel handed its start reaches
// all four, so they stay resident while they touch, and the cuMemAlloc
// buffers around them page.
TEST(Paging, HandlesMappedSideBySideStayResidentForTheBufferThatSpansThem) {
  const PagedRun paged = run_paged("vmm_segment", {program("vmm_probe"), "segment"}, "16MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "vmm ok", 16ull << 20));
  EXPECT_GE(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 12);
}

// A mapping the program gives another device access to is reached unseen:
// pinned resident for as long as it lives.
TEST(Paging, AHandleSharedWithAnotherDeviceStaysResident) {
  const PagedRun paged = run_paged("vmm_peer", {program("vmm_probe"), "peer"}, "16MiB",
                                   {{"VGPUSIM_DEVICES", "2"}, {"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "vmm ok", 16ull << 20));
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
  EXPECT_NE(paged.process.err.find("resident: the program gave another device access to it"), std::string::npos)
      << paged.process.err;
}

// PyTorch's expandable segments map handles next to each other: capped,
// but pinned resident.
// Paging says so when it starts, rather than leaving the user to wonder why
// nothing is offloaded.
TEST(Paging, ExpandableSegmentsAreCalledOutWhenPagingStarts) {
  const PagedRun paged = run_paged("expandable", {program("pointer_probe"), "range"}, "8MiB",
                                   {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128, expandable_segments:True"}});
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.err.find("mostly not paged. Leave expandable_segments off"), std::string::npos)
      << paged.process.err;
  const PagedRun plain = run_paged("not_expandable", {program("pointer_probe"), "range"}, "8MiB",
                                   {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}});
  EXPECT_EQ(plain.process.err.find("expandable"), std::string::npos) << plain.process.err;
}

// A forked child that exits normally runs the shim's exit handler where the
// reclaimer thread does not exist: it must neither join it nor hang.
TEST(Paging, AForkedChildExitsCleanlyWhilePagingRuns) {
  // A leak checker in the child would report what the parent's other threads
  // held on their stacks at the fork (those threads do not exist in the
  // child): false leaks, so it is off for this run (sanitizer builds only).
  const PagedRun paged = run_paged("fork", {program("fork_probe")}, "12MiB", {{"ASAN_OPTIONS", "detect_leaks=0"}});
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.out.find("fork ok"), std::string::npos) << paged.process.out;
  ASSERT_FALSE(paged.trace.is_null());
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
}

// fork() while another thread is inside the shim holding the pager's lock
// (the simulated driver parks the cuMemHostAlloc the pager makes under it for
// an offload): the
// child passes every CUDA call straight to the driver, so it allocates,
// frees an inherited paged pointer, logs and exits -- its own trace written
// next to the parent's -- instead of waiting forever on a lock whose owner
// does not exist in it; the parent, once the parked call goes on, has every
// byte. The probe checks that the lock really is held at the fork.
TEST(PagingConcurrency, AChildForkedWhileAnotherThreadHoldsThePagersLockNeverWaitsForIt) {
  const PagedRun paged =
      run_paged("fork_held", {program("fork_probe"), "held"}, "12MiB", {{"ASAN_OPTIONS", "detect_leaks=0"}});
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.out.find("fork ok"), std::string::npos) << paged.process.out;
  const std::vector<std::string> child = lines_starting_with(paged.process.out, "fork child ");
  ASSERT_EQ(child.size(), 1u) << paged.process.out;
  // Its own allocation reached the driver and was freed; the inherited
  // pointer is no allocation of the driver's (it is the parent's paged memory).
  EXPECT_NE(child[0].find("alloc 0 free 0 free-inherited 1 info 0"), std::string::npos) << child[0];
  const std::string child_pid = child[0].substr(11, child[0].find(':') - 11);
  EXPECT_NE(paged.process.err.find("[vgpumem " + child_pid + "] warning: cuMemAlloc_v2 in a process forked after it "
                                   "used CUDA: calls here go straight to the driver"),
            std::string::npos)
      << paged.process.err;
  const nlohmann::json child_trace = read_json(scratch("fork_held", "trace") + "." + child_pid);
  ASSERT_FALSE(child_trace.is_null()) << "the child wrote no trace";
  EXPECT_EQ(child_trace["vgpumem"]["forked_child"], true);
  ASSERT_FALSE(paged.trace.is_null());
  EXPECT_FALSE(paged.trace["vgpumem"].contains("forked_child"));
}

// The same with the thread that holds the pager's lock also inside the
// shim's logger at the fork (blocked writing to a full stderr pipe): the
// child's own warning still comes out, through a logger of its own.
TEST(PagingConcurrency, AChildForkedWhileAnotherThreadIsLoggingLogsThroughItsOwnLogger) {
  const PagedRun paged = run_paged("fork_logging", {program("fork_probe"), "logging"}, "12MiB",
                                   {{"ASAN_OPTIONS", "detect_leaks=0"}, {"VGPUMEM_LOG_LEVEL", "debug"}});
  EXPECT_EQ(paged.process.exit_code, 0) << paged.process.out << paged.process.err;
  EXPECT_NE(paged.process.out.find("fork ok"), std::string::npos) << paged.process.out;
  const std::vector<std::string> child = lines_starting_with(paged.process.out, "fork child ");
  ASSERT_EQ(child.size(), 1u) << paged.process.out;
  const std::string child_pid = child[0].substr(11, child[0].find(':') - 11);
  EXPECT_NE(paged.process.err.find("[vgpumem " + child_pid + "] warning: cuMemAlloc_v2 in a process forked after it "
                                   "used CUDA"),
            std::string::npos)
      << paged.process.err;
  EXPECT_NE(paged.process.err.find("debug: offloaded"), std::string::npos) << "the parent's line, once unblocked";
}

TEST(Paging, MemoryACapturedGraphUsesStaysResident) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult baseline = run_process({program("capture_probe")}, env);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out;

  // Eight 4 MiB buffers: 32 MiB under a 12 MiB cap.
  const PagedRun paged = run_paged("capture", {program("capture_probe")}, "12MiB", {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "capture ok", 12ull << 20));
  EXPECT_EQ(paged.trace["vgpumem"]["paging"]["capture_pinned_bytes"].get<std::uint64_t>(), 0u) << "freed at the end";
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
  EXPECT_NE(paged.process.err.find("a captured graph uses it"), std::string::npos) << "pinned, and said so";
}

// Frees while a capture is open: a stream-ordered free on the capturing
// stream happens when the graph runs (never at once, as a query of a captured
// event would say), and a cuMemFree is released once the capture has closed,
// without a synchronisation that would end the capture.
TEST(Paging, FreesDuringACaptureWaitForTheGraphAndForTheCaptureToClose) {
  const PagedRun paged =
      run_paged("capture-free", {program("capture_probe"), "free"}, "64MiB", {{"VGPUMEM_LOG_LEVEL", "info"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "free ok", 64ull << 20));
  EXPECT_EQ(paged.trace["vgpumem"]["paging"]["paged_allocations"].get<int>(), 0) << "every free was carried out";
}

TEST(Paging, MemGetInfoCountsPagedMemoryInUseNotTheChunksKeptForReuse) {
  constexpr std::uint64_t kCap = 64ull << 20;
  auto env = shim_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUMEM_LIMIT"] = "64MiB";
  const ProcessResult result = run_process({program("cap_probe"), "meminfo", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "meminfo empty"), "free=" + std::to_string(kCap) + " total=" + std::to_string(kCap));
  EXPECT_EQ(field(result.out, "meminfo half"), "free=" + std::to_string(kCap / 2) + " total=" + std::to_string(kCap));
  EXPECT_EQ(field(result.out, "meminfo after-free"), "free=" + std::to_string(kCap) + " total=" + std::to_string(kCap))
      << "freed paged memory is room again, though its chunks are kept";
}

TEST(Paging, TwoAndThreeDimensionalCopiesAndMemsetsBringTheirOperandsBack) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult baseline = run_process({program("copy2d_probe")}, env);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out;
  const PagedRun paged = run_paged("copy2d", {program("copy2d_probe")}, "8MiB");  // four 4 MiB pitched buffers
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(paged, "copy2d ok", 8ull << 20));
  EXPECT_GT(paged.trace["vgpumem"]["paging"]["prefetches"].get<int>(), 0) << "operands came back from the host";
}

TEST(Paging, WithPolicyOffTheSameCapIsOutOfMemory) {
  auto env = shim_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUMEM_LIMIT"] = "32MiB";
  env["VGPUMEM_POLICY"] = "off";
  std::vector<std::string> argv{program("mlp_trainer")};
  argv.insert(argv.end(), kTwelveLayers.args.begin(), kTwelveLayers.args.end());
  const ProcessResult result = run_process(argv, env);
  EXPECT_EQ(result.exit_code, 3) << result.out;
  EXPECT_NE(result.out.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << result.out;
}

TEST(Paging, TooSmallACapForOneKernelIsACleanOutOfMemory) {
  // One backward kernel touches two 4 MiB tensors and more: 6 MiB cannot hold it.
  std::vector<std::string> argv{program("mlp_trainer")};
  argv.insert(argv.end(), kTwelveLayers.args.begin(), kTwelveLayers.args.end());
  const PagedRun run = run_paged("too-small", argv, "6MiB");
  EXPECT_EQ(run.process.exit_code, 3) << run.process.out << run.process.err;
  EXPECT_NE(run.process.out.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << run.process.out;
  ASSERT_FALSE(run.simulator.is_null());
  EXPECT_EQ(run.simulator["illegal_accesses"].get<int>(), 0) << "an out-of-memory error, never a fault";
}

// Thousands of random operations on four threads and their streams under a
// cap a fraction of what they hold: every checksum and every final byte must
// match the host mirror, with no illegal access. ThreadSanitizer checks the
// order of every access whatever the run's length and runs them ten times
// slower: there at most 200 operations a thread, enough to hold well over
// the cap (fewer do not: 133 held 34 MiB at most).
void stress(int ops, bool stream_ordered = false, const std::string& check = "fast") {
  if (std::string_view(VGPUMEM_TEST_SANITIZER) == "thread") ops = std::min(ops, 200);
  const PagedRun run = run_paged(
      std::string(stream_ordered ? "stress-async-" : "stress-") + check,
      {program("paging_stress"), "--threads", "4", "--ops", std::to_string(ops), "--seed", "7", "--async", stream_ordered ? "1" : "0"},
      "24MiB", {{"VGPUMEM_CHECK", check}});
  const ProcessResult& result = run.process;
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::string summary = field(result.out, "STRESS");
  ASSERT_EQ(summary.rfind("ok", 0), 0u) << result.out;
  unsigned long long peak_live = 0;
  ASSERT_EQ(std::sscanf(summary.c_str() + summary.find("peak_live_bytes="), "peak_live_bytes=%llu", &peak_live), 1);
  EXPECT_GT(peak_live, 3ull * 12 * 1024 * 1024) << "the stress must hold well over the cap (1.5x)";
  ASSERT_FALSE(run.simulator.is_null());
  EXPECT_LE(run.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), 24ull * 1024 * 1024);
  EXPECT_EQ(run.simulator["illegal_accesses"].get<int>(), 0) << run.simulator.dump();
  ASSERT_FALSE(run.trace.is_null());
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 100);
  EXPECT_EQ(run.trace["vgpumem"]["paging"]["ooms"].get<int>(), 0);
}

TEST(PagingConcurrency, RandomStressOnFourThreadsKeepsEveryByte) { stress(600); }
TEST(PagingConcurrency, StreamOrderedAllocationsUnderStressKeepEveryByte) { stress(400, true); }
TEST(PagingConcurrency, RandomStressUnderStrictCheckingKeepsEveryByte) { stress(600, false, "strict"); }
TEST(PagingConcurrency, RandomStressUnderTortureKeepsEveryByte) { stress(200, false, "torture"); }

}  // namespace
}  // namespace vgpumem::test
