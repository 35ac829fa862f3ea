// `vgpumem report` as a user runs it: on the trace of a layered trainer run
// it says, with the trace's own numbers, what stayed under the cap, what
// moved, the step found and its plan, and where the program waited, by
// kernel name; it draws the run where matplotlib is; and it refuses what it
// cannot read, saying why.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

std::string command() { return VGPUMEM_TEST_CLI; }


bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// BERT-large's layered step at half its peak bytes, under `policy`; the
// trace written to a file of its own.
std::string traced_run(const std::string& policy, PagedRun* run) {
  const std::vector<std::string> args{program("layered_trainer"), "--model", "bert-large", "--steps", "10"};
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult baseline = run_process(args, env);
  EXPECT_EQ(baseline.exit_code, 0) << baseline.out << baseline.err;
  const std::uint64_t cap = result_number(baseline.out, "peak_device_bytes_wanted") / 2;
  *run = run_paged("report-" + policy, args, std::to_string(cap), {{"VGPUMEM_POLICY", policy}});
  EXPECT_EQ(run->process.exit_code, 0) << run->process.out << run->process.err;
  const std::string trace = temp_path("report-" + policy + "-trace.json");
  std::ofstream(trace) << run->trace.dump();
  return trace;
}

// (Not in sanitizer builds: their runtime, preloaded into the test's
// environment, would be preloaded into Python too.)
bool python_has_matplotlib() {
  if (!std::string(VGPUMEM_TEST_PRELOAD_PREFIX).empty()) return false;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (run_process({"/bin/sh", "-c", std::string(python) + " -c 'import matplotlib' 2>/dev/null"}, {}).exit_code == 0) {
      return true;
    }
  }
  return false;
}

TEST(ReportCommand, SaysWhatTheRunDidWithTheTracesOwnNumbers) {
  PagedRun run;
  const std::string trace = traced_run("auto", &run);
  ASSERT_FALSE(run.trace.is_null());
  const nlohmann::json& summary = run.trace["vgpumem"];
  const std::string png = temp_path("report-auto.png");
  std::remove(png.c_str());
  const bool plots = python_has_matplotlib();
  std::vector<std::string> args{command(), "report", trace, "--top", "3"};
  if (plots) args.insert(args.end(), {"--png", png});
  const ProcessResult report = run_process(args, simulator_environment());
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  const std::string& out = report.out;

  EXPECT_TRUE(has(out, "device 0: cap ")) << out;
  EXPECT_TRUE(has(out, "stayed under the cap")) << out;
  EXPECT_TRUE(has(out, "in " + std::to_string(summary["paging"]["offloads"].get<std::uint64_t>()) + " offloads (" +
                           std::to_string(summary["paging"]["scheduled_offloads"].get<std::uint64_t>()) +
                           " of them planned ahead)"))
      << out;
  const nlohmann::json& mover = summary["paging"]["mover"];
  ASSERT_TRUE(mover["running"].get<bool>()) << mover.dump();
  EXPECT_TRUE(has(out, "the plan's moves: " + std::to_string(mover["made"].get<std::uint64_t>()) +
                           " made by vgpumem's mover thread"))
      << out;
  const nlohmann::json& device = summary["paging"]["devices"][0];
  // Where paging's host work ran, on the simulated driver's clock.
  const nlohmann::json& path = summary["paging"]["host_path"];
  const nlohmann::json& fetches = path["fetches"];
  EXPECT_TRUE(has(out, " planned ahead (" + std::to_string(fetches["planned"].get<std::uint64_t>()) + " planned, " +
                           std::to_string(fetches["on_demand"].get<std::uint64_t>()) + " on demand"))
      << out;
  EXPECT_TRUE(has(out, "driver calls that map memory: " +
                           std::to_string(path["program_threads"]["vmm_calls"].get<std::uint64_t>()) +
                           " on the program's threads ("))
      << out;
  EXPECT_TRUE(has(out, "paging (")) << out;
  EXPECT_TRUE(has(out, "times on the simulated driver's clock")) << out;
  ASSERT_FALSE(summary["schedule"]["recent_iterations"].empty()) << summary["schedule"].dump();
  EXPECT_TRUE(has(out, "the last ")) << out;
  EXPECT_TRUE(has(out, " of the step found")) << out;
  EXPECT_TRUE(has(out, "device 0 physical memory: " + std::to_string(device["blocks"].get<std::uint64_t>()) +
                           " blocks holding "))
      << out;
  const nlohmann::json& victims = summary["paging"]["victims"];
  EXPECT_TRUE(has(out, "room made on demand: " + std::to_string(victims["taken"].get<std::uint64_t>()) +
                           " buffers sent out, " + std::to_string(victims["in_order"].get<std::uint64_t>()) +
                           " of them by the learned step's furthest next use"))
      << out;
  // The trainer frees its tensors at the end: each free waited for its work alone.
  const std::uint64_t frees = summary["paging"]["frees_waiting"]["for_program_streams"].get<std::uint64_t>();
  EXPECT_GT(frees, 0u);
  EXPECT_TRUE(has(out, "cuMemFree: " + std::to_string(frees) + " frees waited for the program's work alone\n"))
      << out;
  const nlohmann::json& schedule = summary["schedule"];
  EXPECT_TRUE(has(out, "found: a step of " + std::to_string(schedule["period"].get<std::uint64_t>()) + " operations"))
      << out;
  EXPECT_TRUE(has(out, "planner auto: ")) << out;
  EXPECT_TRUE(has(out, "the last moves " + std::to_string(schedule["plan"]["swaps"].get<std::uint64_t>()) + " buffers"))
      << out;
  EXPECT_TRUE(has(out, "followed on " + std::to_string(schedule["operations_followed"].get<std::uint64_t>()) + " of "))
      << out;

  // Where it waited: at most three lines, each naming a kernel of the
  // recorded step, the longest wait first.
  const std::size_t waits = out.find("Where the program waited most");
  ASSERT_NE(waits, std::string::npos) << out;
  const nlohmann::json& names = schedule["profile"]["names"];
  ASSERT_TRUE(names.is_array() && !names.empty()) << "the profile names its kernels";
  std::size_t listed = 0;
  double previous = 1e300;
  std::istringstream lines(out.substr(out.find('\n', waits) + 1));
  for (std::string line; std::getline(lines, line) && !line.empty();) {
    ++listed;
    double stall_ms = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), " %lf ms", &stall_ms), 1) << line;
    EXPECT_LE(stall_ms, previous) << line;
    previous = stall_ms;
    bool named = false;
    for (const auto& name : names) named = named || line.ends_with("  " + name.get<std::string>());
    EXPECT_TRUE(named) << "not a kernel of the step: " << line;
  }
  EXPECT_GE(listed, 1u) << out;
  EXPECT_LE(listed, 3u) << out;

  if (plots) {
    std::ifstream picture(png, std::ios::binary);
    ASSERT_TRUE(picture.good()) << "no " << png << "\n" << out << report.err;
    char magic[8] = {};
    picture.read(magic, sizeof magic);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
    EXPECT_TRUE(has(out, "picture: " + png)) << out;
  }
}

TEST(ReportCommand, OnDemandPagingIsToldWhatTheScheduleWouldDo) {
  PagedRun run;
  const std::string trace = traced_run("lru", &run);
  const ProcessResult report = run_process({command(), "report", trace}, simulator_environment());
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  EXPECT_TRUE(has(report.out, "policy lru")) << report.out;
  EXPECT_TRUE(has(report.out, "not looked for: policy lru pages on demand only")) << report.out;
  EXPECT_TRUE(has(report.out, "What this means\n  - VGPUMEM_POLICY=auto learns the training step")) << report.out;
}

// With its convolutions as cuDNN calls, the report names the calls the hooks
// received, with the trace's counts, and the bytes they spared a copy back.
TEST(ReportCommand, NamesTheLibraryCallsAndTheCopiesTheySpared) {
  const std::vector<std::string> args{program("layered_trainer"), "--model", "cnn-small", "--steps", "8",
                                      "--libraries"};
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult baseline = run_process(args, env);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out << baseline.err;
  const std::uint64_t cap = result_number(baseline.out, "peak_device_bytes_wanted") / 2;
  const PagedRun run = run_paged("report-libraries", args, std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
  const std::string trace = temp_path("report-libraries-trace.json");
  std::ofstream(trace) << run.trace.dump();
  const ProcessResult report = run_process({command(), "report", trace}, simulator_environment());
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;

  const nlohmann::json& calls = run.trace["vgpumem"]["library_calls"];
  ASSERT_GT(calls.value("cudnnConvolutionForward", 0), 0) << calls.dump();
  EXPECT_TRUE(has(report.out, "Library calls seen\n")) << report.out;
  for (const char* name : {"cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter"}) {
    EXPECT_TRUE(has(report.out, std::string(name) + " " + std::to_string(calls.value(name, 0))))
        << name << "\n" << report.out;
  }
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  ASSERT_GT(paging["bytes_not_fetched"].get<std::uint64_t>(), 0u);
  EXPECT_TRUE(has(report.out, "that library calls overwrote whole (" +
                                  std::to_string(paging["overwritten_fetches"].get<std::uint64_t>()) + " buffers)"))
      << report.out;
}

TEST(ReportCommand, RefusesWhatItCannotReadSayingWhy) {
  const auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), {command(), "report"});
    return run_process(args, simulator_environment());
  };
  ProcessResult r = run({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "which TRACE?")) << r.err;
  r = run({"/nonexistent/trace.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "cannot read \"/nonexistent/trace.json\"")) << r.err;
  const std::string not_trace = temp_path("report-not-a-trace.json");
  std::ofstream(not_trace) << R"({"format": 1, "ops": []})";
  r = run({not_trace});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "is not a vgpumem trace")) << r.err;
  r = run({not_trace, "--top", "many"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--top \"many\" is not a count from 0 to 1000")) << r.err;
  r = run({not_trace, "--colour"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "unknown option \"--colour\"")) << r.err;
  // A trace with nothing paged and no step: it says so, section by section.
  const std::string bare = temp_path("report-bare-trace.json");
  std::ofstream(bare) << R"({"traceEvents": [], "vgpumem": {"version": 1, "launches": 3, "ooms_returned": 0}})";
  r = run({bare});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "no device memory was counted (no cap was set)")) << r.out;
  EXPECT_TRUE(has(r.out, "Paging\n  off: no allocation was paged")) << r.out;
  EXPECT_TRUE(has(r.out, "Training step\n  not looked for")) << r.out;
}


// A trace as the shim writes it for a run of `policy` under a 64 MiB cap
// whose two-operation step was found and planned: the smallest a report has
// every section for. `policy` "off": the strict cap, nothing paged.
nlohmann::json small_trace(const std::string& policy) {
  nlohmann::json summary = {
      {"version", 1}, {"vgpumem_version", "0.1.0"}, {"pid", 42}, {"launches", 20}, {"ooms_returned", 0},
      {"devices", {{{"device", 0}, {"cap", 64 << 20}, {"peak", 60 << 20}}}},
      {"cupti", {{"use", "auto"}, {"state", "not started"}, {"profiler_started", false}, {"kernel_records", 0}}}};
  if (policy == "off") return {{"traceEvents", nlohmann::json::array()}, {"vgpumem", summary}};
  summary["paging"] = {{"policy", policy}, {"check", "fast"}, {"offloads", 4}, {"bytes_offloaded", 8 << 20}};
  summary["schedule"] = {
      {"locks", 1}, {"breaks", 0}, {"breaks_at_end", 1}, {"locked", false}, {"period", 2}, {"operations", 20},
      {"iterations_followed", 8}, {"iterations_recorded", 1}, {"planner", policy}, {"plans", 1},
      {"operations_followed", 16}, {"timing_source", "cupti"}, {"timing", {{"kernels_clocked", 2}}},
      {"plan",
       {{"fits", true}, {"swaps", 1}, {"budget", 64 << 20}, {"compute_ns", 4e6}, {"predicted_step_ns", 5e6},
        {"floor_ns", 4.5e6}}},
      {"recent_iterations",
       {{{"serial", 7}, {"operations", 2}, {"moved_bytes", 4 << 20}, {"host_ns", 6e6}},
        {{"serial", 8}, {"operations", 2}, {"moved_bytes", 4 << 20}, {"host_ns", 8e6}}}},
      {"profile",
       {{"format", 2}, {"period", 2}, {"step_ns", 4e6}, {"units", {2 << 20}},
        {"ops", {{2e6, 3e6, 1, {0}, 0}, {2e6, 1e6, 1, {0}, 1}}},
        // A template kernel as PyTorch's are, and a plain function.
        {"names",
         {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS0_5ArrayIPcLi1EEEEEviT0_T1_",
          "_ZN2at6native3sgdEPfS1_i"}}}}};
  return {{"traceEvents", nlohmann::json::array()}, {"vgpumem", summary}};
}

std::string written(const std::string& name, const nlohmann::json& trace) {
  const std::string path = temp_path(name);
  std::ofstream(path) << trace.dump();
  return path;
}

ProcessResult report_of(const std::string& path, std::vector<std::string> more = {}) {
  std::vector<std::string> args{command(), "report", path};
  args.insert(args.end(), more.begin(), more.end());
  return run_process(args, simulator_environment());
}

// VGPUMEM_POLICY=off is the strict cap: nothing paged, an allocation past
// the cap refused with CUDA's out-of-memory error. It is not paging on
// demand, and the report must not call it that.
TEST(ReportCommand, AStrictCapIsCalledOne) {
  nlohmann::json trace = small_trace("off");
  trace["vgpumem"]["ooms_returned"] = 1;
  const ProcessResult r = report_of(written("report-strict.json", trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has(r.out, "on demand only")) << r.out;
  EXPECT_TRUE(has(r.out, "a strict cap")) << r.out;
  EXPECT_TRUE(has(r.out, "out-of-memory")) << r.out;
}

// Kernel names as the driver gives them are mangled: the report demangles
// them, each on one line however long its template.
TEST(ReportCommand, NamesKernelsDemangledOnOneLine) {
  const ProcessResult r = report_of(written("report-mangled.json", small_trace("auto")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has(r.out, "_ZN")) << r.out;
  EXPECT_TRUE(has(r.out, "  at::native::sgd(float*, float*, int)\n")) << r.out;
  const std::size_t at = r.out.find("at::native::vectorized_elementwise_kernel<");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::size_t line_start = r.out.rfind('\n', at) + 1, line_end = r.out.find('\n', at);
  EXPECT_LE(line_end - line_start, 120u) << r.out.substr(line_start, line_end - line_start);
}

// What CUPTI did, in words: its state, and how many kernel records were
// not attributed to a launch (on the H200 every one was, and nothing said so).
TEST(ReportCommand, SaysWhatCuptiDid) {
  nlohmann::json trace = small_trace("auto");
  trace["vgpumem"]["cupti"] = {{"use", "auto"}, {"state", "active"}, {"profiler_started", false},
                               {"kernel_records", 500}, {"unattributed_records", 500}, {"dropped_records", 0}};
  trace["vgpumem"]["schedule"]["timing_source"] = "events";
  trace["vgpumem"]["schedule"]["timing"] = {{"kernels_clocked", 0}};
  ProcessResult r = report_of(written("report-cupti-active.json", trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "CUPTI: active")) << r.out;
  EXPECT_TRUE(has(r.out, "500 kernel records, all 500 unattributed")) << r.out;
  EXPECT_TRUE(has(r.out, "timed with events instead")) << r.out;
  const std::vector<std::pair<nlohmann::json, std::string>> states = {
      {{{"use", "off"}, {"state", "off"}}, "CUPTI: off"},
      {{{"use", "auto"}, {"state", "absent"}, {"absent_reason", "no libcupti.so"}}, "CUPTI: absent (no libcupti.so)"},
      {{{"use", "auto"}, {"state", "taken"}}, "CUPTI: taken by another subscriber"},
      {{{"use", "auto"}, {"state", "stepped aside"}, {"profiler_started", true}}, "CUPTI: stepped aside"}};
  for (const auto& [cupti, said] : states) {
    trace["vgpumem"]["cupti"] = cupti;
    r = report_of(written("report-cupti-state.json", trace));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, said)) << cupti.dump() << "\n" << r.out;
  }
}

// `--json`: what the text says, one JSON object on standard output.
TEST(ReportCommand, JsonSaysWhatTheTextSays) {
  const std::string path = written("report-json.json", small_trace("auto"));
  const ProcessResult r = report_of(path, {"--json", "--uncapped-ms", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json report;
  ASSERT_NO_THROW(report = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_EQ(report["file"], path);
  EXPECT_EQ(report["kind"], "trace");
  EXPECT_EQ(report["policy"], "auto");
  EXPECT_EQ(report["devices"][0]["cap"], 64 << 20);
  EXPECT_EQ(report["step"]["found"], true);
  EXPECT_EQ(report["step"]["breaks"], 0);
  EXPECT_DOUBLE_EQ(report["step"]["measured_step_ns"].get<double>(), 7e6);
  EXPECT_DOUBLE_EQ(report["step"]["uncapped_step_ns"].get<double>(), 4e6);
  EXPECT_EQ(report["step"]["uncapped_from"], "--uncapped-ms");
  EXPECT_DOUBLE_EQ(report["step"]["step_over_uncapped"].get<double>(), 1.75);
  EXPECT_EQ(report["cupti"]["state"], "not started");
  EXPECT_EQ(report["waits"][0]["kernel"].get<std::string>().rfind("at::native::vectorized_elementwise_kernel<", 0), 0u)
      << report["waits"].dump();
  EXPECT_TRUE(report["advice"].is_array());
}

// Training of several step kinds (an evaluation every third step): the
// report says the kinds learned and how often the stream came back to one,
// and that only the operations until a kind was named again ran on demand.
// A trace without the counts (before step kinds) says neither.
TEST(ReportCommand, SaysTheStepKindsAndHowOftenTheStreamCameBack) {
  nlohmann::json trace = small_trace("auto");
  nlohmann::json& schedule = trace["vgpumem"]["schedule"];
  schedule["kinds"] = 1;
  schedule["kind_returns"] = 5;
  schedule["locks"] = 6;
  schedule["breaks"] = 5;
  const ProcessResult r = report_of(written("report-kinds.json", trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "kinds: 1 step kind learned; the stream came back to a known one 5 times")) << r.out;
  EXPECT_TRUE(has(r.out, "until a known step kind was named again")) << r.out;
  EXPECT_FALSE(has(r.out, "learned again after each")) << r.out;
  const ProcessResult json = report_of(written("report-kinds.json", trace), {"--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report["step"]["kinds"], 1);
  EXPECT_EQ(report["step"]["kind_returns"], 5);

  nlohmann::json before = small_trace("auto");
  before["vgpumem"]["schedule"]["breaks"] = 2;
  const ProcessResult old = report_of(written("report-no-kinds.json", before));
  ASSERT_EQ(old.exit_code, 0) << old.err;
  EXPECT_FALSE(has(old.out, "kinds:")) << old.out;
  EXPECT_TRUE(has(old.out, "learned again after each")) << old.out;
}

// The step measured against uncapped: the trace's own recent steps, against
// the uncapped step given, else the step's stall-free compute, said as such.
TEST(ReportCommand, SaysTheMeasuredStepAgainstUncapped) {
  const std::string path = written("report-step.json", small_trace("auto"));
  ProcessResult r = report_of(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "measured step: 7.0 ms")) << r.out;
  EXPECT_TRUE(has(r.out, "1.75 x the step's stall-free compute (4.0 ms")) << r.out;
  r = report_of(path, {"--uncapped-ms", "3.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "2.00 x uncapped (3.5 ms, given with --uncapped-ms)")) << r.out;
  r = report_of(path, {"--uncapped-ms", "fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--uncapped-ms \"fast\" is not a positive number of milliseconds")) << r.err;
}

// The demo's run under auto (a 12-layer MLP at 60 % of its peak): a healthy
// run. Its end is not a break, and nothing warns that the step broke; its
// recent steps are timed, so the report says the measured step.
TEST(ReportCommand, AHealthyRunIsNotWarnedOfABreak) {
  std::vector<std::string> args{program("mlp_trainer"), "--layers", "12", "--width", "1024", "--batch", "8",
                                "--steps", "1"};
  // The peak is the first step's: one step to measure it.
  const ProcessResult baseline = run_process(args, simulator_environment());
  ASSERT_EQ(baseline.exit_code, 0) << baseline.out << baseline.err;
  args.back() = "16";
  const std::uint64_t cap = result_number(baseline.out, "peak_device_bytes_wanted") * 6 / 10;
  const PagedRun run = run_paged("report-healthy", args, std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
  const nlohmann::json& schedule = run.trace["vgpumem"]["schedule"];
  ASSERT_GE(schedule["locks"].get<int>(), 1) << schedule.dump();
  EXPECT_EQ(schedule["breaks"], 0) << schedule.dump();
  EXPECT_EQ(schedule["breaks_at_end"], 1) << schedule.dump();
  ASSERT_FALSE(schedule["recent_iterations"].empty());
  EXPECT_GT(schedule["recent_iterations"].back()["host_ns"].get<double>(), 0) << schedule.dump();
  const ProcessResult r = report_of(written("report-healthy.json", run.trace));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has(r.out, "broke")) << r.out;
  EXPECT_FALSE(has(r.out, "broken")) << r.out;
  EXPECT_TRUE(has(r.out, "measured step: ")) << r.out;
  EXPECT_TRUE(has(r.out, "CUPTI: active")) << r.out;
}

// The access logs the GPU suite committed (docs/gpu-runs/*access-log*.json)
// are the scheduler's and pager's summary alone, no trace: the report says
// what the file is and what it holds (the paging budget, the step, its
// operations) instead of "vgpumem ?" and "no cap was set", and --png draws
// what the file holds, the recorded step, where matplotlib is.
TEST(ReportCommand, ReadsTheCommittedGpuAccessLogsAsSuch) {
  const std::string log = std::string(VGPUMEM_TEST_SOURCE_DIR) +
                          "/docs/gpu-runs/2026-11-27-h200-resnet50-auto50-access-log.json";
  ProcessResult r = report_of(log);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has(r.out, "vgpumem ?")) << r.out;
  EXPECT_FALSE(has(r.out, "no cap was set")) << r.out;
  EXPECT_TRUE(has(r.out, "an access log")) << r.out;
  EXPECT_TRUE(has(r.out, "paging budget 1.78 GiB")) << r.out;
  EXPECT_TRUE(has(r.out, "found: a step of 1776 operations")) << r.out;
  EXPECT_TRUE(has(r.out, "28061 operations")) << r.out;
  EXPECT_TRUE(has(r.out, "26854 kernel records, all 26854 unattributed")) << r.out;
  // The step the H200 measured, carried beside the log (its "measured").
  EXPECT_TRUE(has(r.out, "measured step: 351.1 ms (measured on NVIDIA H200")) << r.out;
  EXPECT_TRUE(has(r.out, "9.74 x uncapped (36.1 ms, measured there too)")) << r.out;
  r = report_of(log, {"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kind"], "access log") << r.out;
  if (!python_has_matplotlib()) return;
  const std::string png = temp_path("report-access-log.png");
  std::remove(png.c_str());
  r = report_of(log, {"--png", png});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "picture: " + png)) << r.out;
  std::ifstream picture(png, std::ios::binary);
  EXPECT_TRUE(picture.good()) << "no " << png << "\n" << r.err;
}

}  // namespace
}  // namespace vgpumem::test
