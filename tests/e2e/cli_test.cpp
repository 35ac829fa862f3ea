// The vgpumem command's own verbs, run as a user runs them: `--version`
// against the library and the trace, and `doctor` with no driver, with the
// simulated one, with a bad setting and inside a shell that preloads the shim.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "process.h"
#include "vgpumem_version.h"

namespace vgpumem::test {
namespace {

std::string command() { return VGPUMEM_TEST_CLI; }
std::string simulated_driver() { return std::string(VGPUMEM_TEST_SIM_DIR) + "/libcuda.so.1"; }

// The doctor's environment: no shim, no VGPUMEM_* but those given.
std::map<std::string, std::optional<std::string>> doctor_environment() {
  auto env = simulator_environment();
  for (const char* name : {"VGPUMEM_DRIVER", "VGPUMEM_POLICY", "VGPUMEM_HOST_LIMIT", "VGPUSIM_DEVICES",
                           "VGPUSIM_DEVICE_MEMORY"}) {
    env[name] = std::nullopt;
  }
  return env;
}

TEST(Version, CommandLibraryAndTraceNameTheSameVersion) {
  const ProcessResult version = run_process({command(), "--version"}, doctor_environment());
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out, std::string("vgpumem ") + kVersion + "\n");

  // libvgpumem.so, the name users preload, is the versioned file.
  EXPECT_EQ(std::filesystem::canonical(shim_library()).filename().string(), std::string("libvgpumem.so.") + kVersion);

  const std::string trace = temp_path("version.trace.json");
  std::filesystem::remove(trace);
  auto env = shim_environment();
  env["VGPUMEM_TRACE"] = trace;
  const ProcessResult trained = run_process({program("mlp_trainer"), "--steps", "1"}, env);
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  std::ifstream in(trace);
  ASSERT_TRUE(in.good()) << "no trace at " << trace;
  const nlohmann::json summary = nlohmann::json::parse(in).at("vgpumem");
  EXPECT_EQ(summary.at("vgpumem_version"), kVersion);
  EXPECT_EQ(summary.at("version"), 1) << "the format version is unchanged";
}

// Every command answers --help with its usage on standard output and exit 0,
// doing nothing else (bench and demo once took it for an option wanting a
// value, or an unknown one).
TEST(Help, EveryCommandPrintsItsUsage) {
  for (const char* sub : {"run", "demo", "bench", "simulate", "report", "doctor"}) {
    const ProcessResult help = run_process({command(), sub, "--help"}, doctor_environment());
    EXPECT_EQ(help.exit_code, 0) << sub << ": " << help.out << help.err;
    EXPECT_NE(help.out.find(std::string("usage: vgpumem ") + sub), std::string::npos) << sub << ": " << help.out;
  }
  const ProcessResult help = run_process({command(), "--help"}, doctor_environment());
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("report"), std::string::npos) << help.out;
}

// `vgpumem bench` on one small cell (the small CNN, its convolutions as cuDNN
// calls) with the library hooks on and off: a row each, both bit-identical;
// and a value --library-hooks does not take is refused, naming what it takes.
TEST(Bench, OneCellWithTheLibraryHooksOnAndOff) {
  const std::string out = temp_path("bench-cell");
  std::filesystem::remove_all(out);
  const ProcessResult bench =
      run_process({command(), "bench", "--models", "cnn-small", "--caps", "50", "--policies", "auto", "--steps", "6",
                   "--scale", "64", "--libraries", "--library-hooks", "on,off", "--out", out},
                  doctor_environment());
  ASSERT_EQ(bench.exit_code, 0) << bench.out << bench.err;
  EXPECT_NE(bench.out.find("convolutions and GEMMs as cuDNN and cuBLAS calls"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("each step issued as PyTorch issues it"), std::string::npos) << "the default: " << bench.out;
  EXPECT_NE(bench.out.find("the simulated driver's calibrated cost model"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("note: at --scale 64 a unit is mapped from about 1/64"), std::string::npos)
      << "scaled runs say what they under-charge: " << bench.out;
  for (const char* policy : {"| auto |", "| auto, hooks off |"}) {
    const std::size_t row = bench.out.find(policy);
    ASSERT_NE(row, std::string::npos) << policy << "\n" << bench.out;
    const std::string line = bench.out.substr(row, bench.out.find('\n', row) - row);
    EXPECT_NE(line.find("| yes |"), std::string::npos) << "bit-identical: " << line;
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/cnn-small-50-auto-hooks-off.trace.json"));

  const ProcessResult bad = run_process({command(), "bench", "--library-hooks", "maybe"}, doctor_environment());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--library-hooks takes on, off or on,off (got \"maybe\")"), std::string::npos) << bad.err;
  const ProcessResult bad_issue = run_process({command(), "bench", "--issue", "jax"}, doctor_environment());
  EXPECT_EQ(bad_issue.exit_code, 2);
  EXPECT_NE(bad_issue.err.find("--issue takes pytorch"), std::string::npos) << bad_issue.err;
}

// The floor column of a cell whose run recorded its step: per training step
// (the caching allocator's alternating placements make the recorded period
// two steps; a floor taken over the period was twice a step's, and stood
// above the step it bounds), and never above the step.
TEST(Bench, TheFloorOfARecordedStepIsPerTrainingStepAndBoundsIt) {
  const std::string out = temp_path("bench-floor");
  std::filesystem::remove_all(out);
  const ProcessResult bench =
      run_process({command(), "bench", "--models", "cnn-small", "--caps", "50", "--policies", "auto", "--steps", "16",
                   "--scale", "64", "--out", out},
                  doctor_environment());
  ASSERT_EQ(bench.exit_code, 0) << bench.out << bench.err;
  const std::size_t row = bench.out.find("| auto |");
  ASSERT_NE(row, std::string::npos) << bench.out;
  const std::string line = bench.out.substr(row, bench.out.find('\n', row) - row);
  const double step = std::stod(line.substr(std::string("| auto |").size()));
  const std::size_t floor_at = line.find("| ", line.find(" ms")) + 2;
  const std::string floor_text = line.substr(floor_at);
  EXPECT_EQ(floor_text.substr(0, floor_text.find(" ms")).find('*'), std::string::npos)
      << "the floor of the step the run recorded, not the plain bound: " << line;
  const double floor = std::stod(floor_text);
  EXPECT_GT(floor, 0) << line;
  EXPECT_LE(floor, step) << "a floor above the step it bounds: " << line;
  // The steady state's share of fetches the plan made ahead, beside the
  // step: a percentage, or a dash where no iteration was followed whole.
  EXPECT_NE(bench.out.find("| fetches planned (steady) | bit-identical |"), std::string::npos) << bench.out;
  const std::size_t last = line.rfind(" | ");
  const std::size_t before = line.rfind("| ", last - 1);
  const std::string planned = line.substr(before + 2, last - before - 2);
  EXPECT_TRUE(planned == "-" || (planned.size() > 2 && planned.substr(planned.size() - 2) == " %")) << line;
}

// scripts/sim/paged_step.sh, the command behind the mover's numbers in
// docs/benchmarks.md: one paged run of the layered trainer at half its peak,
// its RESULT and the trace's summary (the mover, the blocks). Not in
// sanitizer builds: the script preloads the shim alone, without the
// sanitizer's runtime first.
TEST(PagedStepScript, RunsTheTrainerAtHalfItsPeakAndSummarisesTheTrace) {
  if (!std::string(VGPUMEM_TEST_SANITIZER).empty()) GTEST_SKIP() << "the script preloads the shim alone";
  const std::filesystem::path build = std::filesystem::path(VGPUMEM_TEST_SHIM).parent_path().parent_path();
  const std::string out = temp_path("paged-step");
  std::filesystem::remove_all(out);
  auto env = simulator_environment();
  env["MODEL_ARGS"] = "--model cnn-small --scale 64 --backward-thread --allocator caching";
  env["STEPS"] = "12";
  env["UNCAPPED_MS"] = "";
  const ProcessResult run = run_process(
      {"/bin/bash", std::string(VGPUMEM_TEST_SOURCE_DIR) + "/scripts/sim/paged_step.sh", build.string(), out, "cnn",
       "auto"},
      env);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("RESULT loss="), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("mover {'busy_ns'"), std::string::npos) << "the mover ran: " << run.out;
  EXPECT_NE(run.out.find("'reshaped_blocks'"), std::string::npos) << run.out;
  EXPECT_TRUE(std::filesystem::exists(out + "/cnn.trace.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/cnn.sim.json"));
}

// The step issued from one thread, every tensor allocated once, against the
// default (as PyTorch issues it): each says so, the trainer ran with the
// static allocator in one and the caching allocator in the other (their
// peaks differ: whole segments against tensors), and both trained the same.
TEST(Bench, OneThreadRunsTheTrainerWithoutTheCachingAllocator) {
  std::map<std::string, std::string> results;
  for (const std::string issue : {"pytorch", "one-thread"}) {
    const std::string out = temp_path("bench-" + issue);
    std::filesystem::remove_all(out);
    const ProcessResult bench =
        run_process({command(), "bench", "--models", "cnn-small", "--caps", "50", "--policies", "lru", "--steps", "4",
                     "--scale", "64", "--issue", issue, "--out", out},
                    doctor_environment());
    ASSERT_EQ(bench.exit_code, 0) << bench.out << bench.err;
    EXPECT_NE(bench.out.find(issue == "pytorch" ? "each step issued as PyTorch issues it"
                                                : "each step issued from one thread"),
              std::string::npos)
        << bench.out;
    std::ifstream uncapped(out + "/cnn-small-uncapped.out");
    std::stringstream text;
    text << uncapped.rdbuf();
    const std::size_t at = text.str().find("RESULT ");
    ASSERT_NE(at, std::string::npos) << text.str();
    results[issue] = text.str().substr(at, text.str().find('\n', at) - at);
  }
  const auto field = [](const std::string& result, const std::string& key) {
    const std::size_t at = result.find(key + "=");
    return at == std::string::npos ? std::string() : result.substr(at, result.find(' ', at) - at);
  };
  EXPECT_EQ(field(results["pytorch"], "loss"), field(results["one-thread"], "loss"));
  EXPECT_EQ(field(results["pytorch"], "weights_fnv1a"), field(results["one-thread"], "weights_fnv1a"));
  EXPECT_NE(field(results["pytorch"], "peak_device_bytes_wanted"),
            field(results["one-thread"], "peak_device_bytes_wanted"));
}

TEST(Doctor, WithNoDriverSaysSoAndFails) {
  auto env = doctor_environment();
  env["VGPUMEM_DRIVER"] = "/nonexistent/libcuda.so.1";
  const ProcessResult doctor = run_process({command(), "doctor"}, env);
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("problem: no CUDA driver found: cannot load /nonexistent/libcuda.so.1"), std::string::npos)
      << doctor.out;
  EXPECT_NE(doctor.out.find(std::string("vgpumem ") + kVersion), std::string::npos) << doctor.out;
}

TEST(Doctor, OnTheSimulatedDriverListsDevicesAndCaps) {
  auto env = doctor_environment();
  env["VGPUSIM_DEVICES"] = "2";
  env["VGPUMEM_LIMIT"] = "2GiB";
  env["VGPUMEM_LIMIT_1"] = "50%";
  const ProcessResult doctor = run_process({command(), "doctor", "--simulated=8GiB"}, env);
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out << doctor.err;
  for (const std::string& expected :
       {std::string("found         ") + std::filesystem::canonical(simulated_driver()).string(),
        std::string("version       13.0 (13000)"), std::string("GPUs          2"),
        std::string("GPU 0         vgpusim simulated device 0, 8.00 GiB, cap 2.00 GiB"),
        std::string("GPU 1         vgpusim simulated device 1, 8.00 GiB, cap 4.00 GiB"),
        std::string("policy        auto"), std::string("preloaded     no"), std::string("no problems found")}) {
    EXPECT_NE(doctor.out.find(expected), std::string::npos) << "missing \"" << expected << "\" in\n" << doctor.out;
  }
}

TEST(Doctor, FindsTheDriverVgpumemDriverNames) {
  auto env = doctor_environment();
  env["VGPUMEM_DRIVER"] = simulated_driver();
  const ProcessResult doctor = run_process({command(), "doctor"}, env);
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("GPU 0         vgpusim simulated device 0"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("no cap"), std::string::npos) << doctor.out;
}

// A trace destination that cannot be written is refused before the program
// starts, not found missing after a long run.
TEST(Run, RefusesATraceItCouldNotWriteBeforeTheProgramStarts) {
  for (const std::string& trace : {temp_path("no-such-dir/trace.json"), std::string(VGPUMEM_TEST_TMP_DIR)}) {
    const ProcessResult run =
        run_process({command(), "run", "--simulated", "--trace", trace, "--", program("plain_program")},
                    doctor_environment());
    EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
    EXPECT_EQ(run.out.find("main ran"), std::string::npos) << "the program started";
    EXPECT_EQ(run.err.rfind("vgpumem run: invalid --trace \"" + trace + "\": ", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

TEST(Run, RefusesACapBelowTheAllocationGranularity) {
  const ProcessResult run =
      run_process({command(), "run", "--simulated", "--limit", "50", "--", program("plain_program")}, doctor_environment());
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("vgpumem run: invalid --limit \"50\": "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("did you mean 50%?"), std::string::npos) << run.err;
}

// The device indices a process sees start at 0 after CUDA_VISIBLE_DEVICES:
// a cap on a device beyond them would be silently ignored.
TEST(Run, RefusesACapOnADeviceTheProgramDoesNotSee) {
  auto env = doctor_environment();
  env["VGPUSIM_DEVICES"] = "2";
  for (const bool from_environment : {false, true}) {
    std::vector<std::string> args{command(), "run", "--simulated"};
    auto run_env = env;
    if (from_environment) {
      run_env["VGPUMEM_LIMIT_5"] = "1GiB";
    } else {
      args.insert(args.end(), {"--limit-device", "5=1GiB"});
    }
    args.insert(args.end(), {"--", program("plain_program")});
    const ProcessResult run = run_process(args, run_env);
    EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
    EXPECT_EQ(run.out.find("main ran"), std::string::npos);
    EXPECT_NE(run.err.find("VGPUMEM_LIMIT_5"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("sees 2 devices"), std::string::npos) << run.err;
  }
}

// What is on the command line is what the user meant just now: it wins over
// the environment, and the command says so once.
TEST(Run, ItsOptionsWinOverTheEnvironmentAndSaySo) {
  auto env = doctor_environment();
  env["VGPUMEM_LIMIT_0"] = "64MiB";
  const std::string trace = temp_path("run-options-win.json");
  const ProcessResult run = run_process({command(), "run", "--simulated=1GiB", "--limit", "512MiB", "--trace", trace,
                                         "--", program("mlp_trainer"), "--steps", "1"},
                                        env);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.err.find("vgpumem run: --limit 512MiB replaces VGPUMEM_LIMIT_0=64MiB from the environment"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  std::ifstream in(trace);
  ASSERT_TRUE(in.good());
  const nlohmann::json summary = nlohmann::json::parse(in).at("vgpumem");
  EXPECT_EQ(summary.at("devices").at(0).at("cap").get<std::uint64_t>(), std::uint64_t{512} << 20) << summary.dump();
}

TEST(Doctor, ReportsABadSettingAsTheShimDoes) {
  auto env = doctor_environment();
  env["VGPUMEM_LIMIT"] = "8GB";
  auto preloaded = shim_environment();
  preloaded["VGPUMEM_LIMIT"] = "8GB";
  const ProcessResult shim = run_process({program("plain_program")}, preloaded);
  ASSERT_NE(shim.exit_code, 0);
  const std::string message = shim.err.substr(0, shim.err.find('\n'));
  ASSERT_NE(message.find("VGPUMEM_LIMIT"), std::string::npos) << shim.err;

  const ProcessResult doctor = run_process({command(), "doctor", "--simulated"}, env);
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("problem: " + message), std::string::npos) << message << "\n" << doctor.out;
  // The bad setting is the one problem: the simulated driver asked for is still found.
  EXPECT_NE(doctor.out.find("GPU 0         vgpusim simulated device 0"), std::string::npos) << doctor.out;
  EXPECT_EQ(doctor.out.find("`vgpumem doctor --simulated` checks"), std::string::npos) << doctor.out;

  // HAMi's variable is not ours: said, with ours.
  env["VGPUMEM_LIMIT"] = std::nullopt;
  env["CUDA_DEVICE_MEMORY_LIMIT"] = "4g";
  const ProcessResult hami = run_process({command(), "doctor", "--simulated"}, env);
  EXPECT_NE(hami.out.find("CUDA_DEVICE_MEMORY_LIMIT is HAMi's"), std::string::npos) << hami.out;
}

TEST(Doctor, SeesTheShimPreloadedInTheShell) {
  auto env = shim_environment();
  const ProcessResult doctor = run_process({command(), "doctor"}, env);
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("preloaded     yes"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("GPU 0         vgpusim simulated device 0"), std::string::npos) << doctor.out;
}

TEST(Doctor, AMissingPreloadedLibraryIsAProblem) {
  auto env = doctor_environment();
  env["LD_PRELOAD"] = "/nonexistent/libvgpumem.so";
  const ProcessResult doctor = run_process({command(), "doctor", "--simulated"}, env);
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("problem: LD_PRELOAD names /nonexistent/libvgpumem.so, which does not exist"),
            std::string::npos)
      << doctor.out;
}

}  // namespace
}  // namespace vgpumem::test
