// Per-process memory caps, end to end: every allocating API refused beyond
// the cap (the bypass table in docs/caps-bypass.md), cuMemGetInfo reporting
// the cap, percentage and per-device caps, and many threads never together
// exceeding it -- checked against the simulated driver's own report.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kCap = 64 * kMiB;

// The strict cap (VGPUMEM_POLICY=off): nothing is paged, so every API is
// refused beyond it. Paging is tested in paging_test.cpp.
std::map<std::string, std::optional<std::string>> capped(const std::string& limit) {
  auto env = shim_environment();
  env["VGPUMEM_LIMIT"] = limit;
  env["VGPUMEM_POLICY"] = "off";
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  return env;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  return nlohmann::json::parse(in);
}

TEST(CapBypass, EveryAllocatingApiIsRefusedBeyondTheCap) {
  const ProcessResult result =
      run_process({program("cap_probe"), "bypass", std::to_string(kCap)}, capped("64MiB"));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto rows = lines_starting_with(result.out, "bypass ");
  ASSERT_GE(rows.size(), 12u) << result.out;
  for (const std::string& row : rows) {
    if (row.rfind("bypass after-free", 0) == 0) {
      EXPECT_NE(row.find("first=CUDA_SUCCESS"), std::string::npos) << row;
      continue;
    }
    EXPECT_NE(row.find("first=CUDA_SUCCESS"), std::string::npos) << row;
    EXPECT_NE(row.find("second=CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << row;
  }
}

TEST(CapBypass, WithoutTheShimTheSameAllocationsSucceed) {
  // The control: the simulated device has room, so only the shim refuses.
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult result = run_process({program("cap_probe"), "bypass", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  for (const std::string& row : lines_starting_with(result.out, "bypass ")) {
    EXPECT_EQ(row.find("OUT_OF_MEMORY"), std::string::npos) << row;
  }
}

TEST(CapBypass, RefusalsAreCountedInTheTrace) {
  const std::string trace = temp_path("cap-trace.json");
  auto env = capped("64MiB");
  env["VGPUMEM_TRACE"] = trace;
  const ProcessResult result = run_process({program("cap_probe"), "bypass", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json doc = read_json(trace);
  ASSERT_FALSE(doc.is_null());
  const auto& summary = doc.at("vgpumem");
  EXPECT_GE(summary.at("ooms_returned").get<int>(), 11);
  EXPECT_EQ(summary.at("devices").at(0).at("cap").get<std::uint64_t>(), kCap);
  EXPECT_LE(summary.at("devices").at(0).at("peak").get<std::uint64_t>(), kCap);
  EXPECT_EQ(summary.at("devices").at(0).at("counted_at_exit").get<std::uint64_t>(), 0u);
  bool saw_counter = false, saw_oom = false;
  for (const auto& event : doc.at("traceEvents")) {
    if (event.value("ph", "") == "C") saw_counter = true;
    if (event.value("cat", "") == "oom") saw_oom = true;
  }
  EXPECT_TRUE(saw_counter);
  EXPECT_TRUE(saw_oom);
}

TEST(CapMemInfo, ReportsTheCapAsTotalAndWhatIsLeftAsFree) {
  const ProcessResult result = run_process({program("cap_probe"), "meminfo", std::to_string(kCap)}, capped("64MiB"));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "meminfo empty"), "free=" + std::to_string(kCap) + " total=" + std::to_string(kCap));
  EXPECT_EQ(field(result.out, "meminfo half"),
            "free=" + std::to_string(kCap / 2) + " total=" + std::to_string(kCap));
  EXPECT_EQ(field(result.out, "meminfo null-free"), "CUDA_SUCCESS");
  EXPECT_EQ(field(result.out, "meminfo null-total"), "CUDA_SUCCESS");
  EXPECT_EQ(field(result.out, "meminfo null-both"), "CUDA_SUCCESS");
  EXPECT_EQ(field(result.out, "meminfo device-total"), std::to_string(kCap));
}

TEST(CapMemInfo, PercentOfTheDevice) {
  auto env = shim_environment();
  env["VGPUMEM_LIMIT"] = "25%";
  env["VGPUSIM_DEVICE_MEMORY"] = "256MiB";
  const ProcessResult result = run_process({program("cap_probe"), "meminfo", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "meminfo empty"), "free=" + std::to_string(kCap) + " total=" + std::to_string(kCap));
}

TEST(CapMemInfo, PerDeviceLimitOverridesTheGlobalOne) {
  auto env = capped("512MiB");
  env["VGPUMEM_LIMIT_0"] = "64MiB";
  const ProcessResult result = run_process({program("cap_probe"), "bypass", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(field(result.out, "bypass cuMemAlloc_v2"), "") << result.out;
  EXPECT_NE(field(result.out, "bypass cuMemAlloc_v2").find("second=CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
}

TEST(CapMemInfo, CapAboveTheDeviceReportsTheDevice) {
  const ProcessResult result = run_process({program("cap_probe"), "meminfo", std::to_string(kCap)}, capped("4GiB"));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "meminfo device-total"), std::to_string(1024 * kMiB));
}

TEST(CapConcurrency, ManyThreadsNeverTogetherExceedTheCap) {
  const std::string report = temp_path("cap-threads-sim.json");
  auto env = capped("64MiB");
  env["VGPUSIM_REPORT"] = report;
  const ProcessResult result = run_process({program("cap_probe"), "threads", std::to_string(kCap)}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::string row = field(result.out, "threads");
  ASSERT_NE(row, "") << result.out;
  long long max_live = 0;
  int refused = 0;
  std::size_t cap = 0;
  ASSERT_EQ(std::sscanf(row.c_str(), "max_live=%lld cap=%zu refused=%d", &max_live, &cap, &refused), 3) << row;
  EXPECT_LE(static_cast<std::uint64_t>(max_live), kCap);
  EXPECT_GT(refused, 0) << "the test never reached the cap, so it proves nothing";
  // The simulated driver's own truth, independent of the shim.
  const nlohmann::json sim = read_json(report);
  ASSERT_FALSE(sim.is_null()) << "no simulator report at " << report;
  EXPECT_LE(sim.at("devices").at(0).at("physical_bytes_peak").get<std::uint64_t>(), kCap);
}

}  // namespace
}  // namespace vgpumem::test
