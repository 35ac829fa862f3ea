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

}  // namespace
}  // namespace vgpumem::test
