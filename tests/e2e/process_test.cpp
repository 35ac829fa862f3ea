// The shim in processes that never touch CUDA, and configuration that is
// wrong: it must be invisible in the first case and stop the program before
// its main() with one clear message in the second.
#include <gtest/gtest.h>

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
                      BadValue{"VGPUMEM_LIMT", "8GiB"}),
    [](const ::testing::TestParamInfo<BadValue>& param) {
      std::string name = std::string(param.param.variable) + "_" + std::to_string(param.index);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

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
