// The shim in processes that never touch CUDA, and configuration that is
// wrong: it must be invisible in the first case and stop the program before
// its main() with one clear message in the second.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {
namespace {

TEST(NonCudaProcess, RunsUnchangedWithTheShimPreloaded) {
  const ProcessResult plain = run_process({program("plain_program"), "a", "b"}, simulator_environment());
  auto env = shim_environment();
  env["VGPUMEM_LIMIT"] = "1GiB";
  env["VGPUMEM_TRACE"] = temp_path("never-written-%p.json");
  const ProcessResult preloaded = run_process({program("plain_program"), "a", "b"}, env);
  EXPECT_EQ(preloaded.exit_code, 0);
  EXPECT_EQ(preloaded.out, plain.out);
  EXPECT_EQ(preloaded.err, "");
  const ProcessResult failing = run_process({program("plain_program"), "fail"}, env);
  EXPECT_EQ(failing.exit_code, 7) << "the program's own exit status must come through";
}

TEST(NonCudaProcess, NoTraceIsWrittenWhenCudaWasNeverUsed) {
  auto env = shim_environment();
  const std::string trace = temp_path("no-cuda-trace.json");
  env["VGPUMEM_TRACE"] = trace;
  const ProcessResult result = run_process({program("plain_program")}, env);
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_NE(access(trace.c_str(), F_OK), 0) << "a process that never used CUDA wrote " << trace;
}

struct BadValue {
  const char* variable;
  const char* value;
};

class BadConfiguration : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadConfiguration, StopsBeforeMainNamingVariableAndValue) {
  auto env = shim_environment();
  env[GetParam().variable] = GetParam().value;
  const ProcessResult result = run_process({program("plain_program")}, env);
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_EQ(result.out.find("main ran"), std::string::npos) << "main() ran despite a bad configuration";
  EXPECT_NE(result.err.find(GetParam().variable), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(std::string("\"") + GetParam().value + "\""), std::string::npos) << result.err;
  // One message, one line.
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

INSTANTIATE_TEST_SUITE_P(
    EveryVariable, BadConfiguration,
    ::testing::Values(BadValue{"VGPUMEM_LIMIT", "8GB1"}, BadValue{"VGPUMEM_LIMIT", "-3G"},
                      BadValue{"VGPUMEM_LIMIT", "0x10"}, BadValue{"VGPUMEM_LIMIT", "150%"},
                      BadValue{"VGPUMEM_LIMIT", ""}, BadValue{"VGPUMEM_LIMIT", "8GB"},
                      BadValue{"VGPUMEM_LIMIT_0", "lots"}, BadValue{"VGPUMEM_LIMIT_1", "0%"},
                      BadValue{"VGPUMEM_LOG_LEVEL", "loud"}, BadValue{"VGPUMEM_TRACE", ""},
                      BadValue{"VGPUMEM_TRACE_MAX_EVENTS", "-1"}, BadValue{"VGPUMEM_HOST_LIMIT", "50%"},
                      BadValue{"VGPUMEM_POLICY", "fastest"}, BadValue{"VGPUMEM_DRIVER", ""},
                      BadValue{"VGPUMEM_LIMT", "8GiB"}, BadValue{"VGPUMEM_TRACE", "/nonexistent-dir/trace.json"},
                      BadValue{"VGPUMEM_TRACE", VGPUMEM_TEST_TMP_DIR}),
    [](const ::testing::TestParamInfo<BadValue>& param) {
      std::string name = std::string(param.param.variable) + "_" + std::to_string(param.index);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

// The trainer under the shim, its trace asked for in `directory`, which a
// shell removes once the shim has loaded the driver into it: the trace can
// no longer go where it was asked. The trainer's log lands in `log`, emptied
// first: the background job's redirection may come after the first look, and
// an earlier run's log says the driver was loaded already. Batch 8: long
// enough for the shell to look (300 steps), short under the sanitizers.
std::vector<std::string> trainer_losing_its_trace_directory(const std::string& directory, const std::string& log) {
  const std::string script =
      ": >\"$1\"; \"$0\" --batch 8 --steps 300 2>>\"$1\" & pid=$!; "
      "until grep -q 'loaded CUDA driver' \"$1\"; do sleep 0.01; done; "
      "rm -rf \"$2\"; wait $pid";
  return {"/bin/sh", "-c", script, program("mlp_trainer"), log, directory};
}

TEST(TraceAtExit, GoesToTheTemporaryDirectoryWhenItsOwnHasGone) {
  const std::string directory = temp_path("vanishing-trace-dir");
  std::filesystem::create_directories(directory);
  const std::string log = temp_path("vanishing-trace-dir.log");
  auto env = shim_environment();
  env["VGPUMEM_TRACE"] = directory + "/trace.json";
  env["VGPUMEM_LOG_LEVEL"] = "debug";
  env["TMPDIR"] = VGPUMEM_TEST_TMP_DIR;
  const ProcessResult result = run_process(trainer_losing_its_trace_directory(directory, log), env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  std::ostringstream text;
  text << std::ifstream(log).rdbuf();
  const std::string err = text.str();
  const std::vector<std::string> lines = lines_starting_with(err, "[vgpumem ");
  const auto said = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("cannot write the trace to") != std::string::npos;
  });
  ASSERT_NE(said, lines.end()) << err;
  const std::string marker = "; wrote it to ";
  const std::size_t at = said->find(marker);
  ASSERT_NE(at, std::string::npos) << *said;
  const std::string fallback = said->substr(at + marker.size(), said->find(" instead") - at - marker.size());
  EXPECT_EQ(fallback.rfind(std::string(VGPUMEM_TEST_TMP_DIR) + "/trace.json.", 0), 0u) << *said;
  std::ifstream written(fallback);
  ASSERT_TRUE(written.good()) << "no trace at " << fallback;
  EXPECT_TRUE(nlohmann::json::parse(written).contains("vgpumem"));
  std::filesystem::remove(fallback);
}

// `vgpumem run --trace` is asked for a file: a run that ends without it
// there must not look like a success.
TEST(TraceAtExit, VgpumemRunFailsWhenTheTraceIsNotWhereItWasAsked) {
  const std::string directory = temp_path("vanishing-run-trace-dir");
  std::filesystem::create_directories(directory);
  const std::string trace = directory + "/run-trace.json";
  std::vector<std::string> args{VGPUMEM_TEST_CLI, "run", "--simulated", "--log-level", "debug", "--trace", trace, "--"};
  for (const std::string& arg : trainer_losing_its_trace_directory(directory, temp_path("vanishing-run.log"))) {
    args.push_back(arg);
  }
  auto env = simulator_environment();
  env["TMPDIR"] = VGPUMEM_TEST_TMP_DIR;
  const ProcessResult result = run_process(args, env);
  EXPECT_EQ(result.signal, 0);
  EXPECT_NE(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("vgpumem run: the trace is not at " + trace + ": "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(std::string(VGPUMEM_TEST_TMP_DIR) + "/run-trace.json."), std::string::npos)
      << "names where it went: " << result.err;
  for (const auto& entry : std::filesystem::directory_iterator(VGPUMEM_TEST_TMP_DIR)) {
    if (entry.path().filename().string().rfind("run-trace.json.", 0) == 0) std::filesystem::remove(entry.path());
  }

  // A program that never used CUDA writes no trace: said, and not a success either.
  const std::string unused = temp_path("never-written-by-run.json");
  std::filesystem::remove(unused);
  const ProcessResult plain =
      run_process({VGPUMEM_TEST_CLI, "run", "--simulated", "--trace", unused, "--", program("plain_program")}, env);
  EXPECT_EQ(plain.exit_code, 1) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("main ran"), std::string::npos);
  EXPECT_NE(plain.err.find("vgpumem run: no trace at " + unused + ": "), std::string::npos) << plain.err;
  // The program's own failure status comes through unchanged.
  const ProcessResult failing = run_process(
      {VGPUMEM_TEST_CLI, "run", "--simulated", "--trace", unused, "--", program("plain_program"), "fail"}, env);
  EXPECT_EQ(failing.exit_code, 7) << failing.err;
}

// Settings the shim cannot apply as written are said once, not ignored.
TEST(SettingsThatCannotApply, AreSaidOnce) {
  auto env = shim_environment();
  env["VGPUSIM_DEVICES"] = "1";
  env["VGPUMEM_LIMIT_3"] = "1GiB";
  env["CUDA_DEVICE_MEMORY_LIMIT"] = "4g";
  const ProcessResult result = run_process({program("mlp_trainer"), "--steps", "2"}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::vector<std::string> device = lines_starting_with(result.err, "[vgpumem ");
  const auto count = [&](const std::string& part) {
    return std::count_if(device.begin(), device.end(),
                         [&](const std::string& line) { return line.find(part) != std::string::npos; });
  };
  EXPECT_EQ(count("VGPUMEM_LIMIT_3 names device 3, but this process sees 1 device"), 1) << result.err;
  EXPECT_EQ(count("CUDA_DEVICE_MEMORY_LIMIT is HAMi's setting"), 1) << result.err;
}

TEST(BadConfigurationMessage, UnknownNameSuggestsTheKnownOne) {
  // Also guards load order: the table of known variables must be usable from
  // the load-time constructor, before any dynamic initialiser has run.
  auto env = shim_environment();
  env["VGPUMEM_LIMT"] = "8GiB";
  const ProcessResult result = run_process({program("plain_program")}, env);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("did you mean VGPUMEM_LIMIT?"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("known: VGPUMEM_LIMIT, "), std::string::npos) << result.err;
}

}  // namespace
}  // namespace vgpumem::test
