#include "paged_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace vgpumem::test {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  return nlohmann::json::parse(in);
}

std::string scratch(const std::string& tag, const std::string& what) {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : test) c = c == '/' ? '_' : c;  // a parameterised test's name
  const std::string path = temp_path("paging-" + test + "-" + tag + "-" + what + ".json");
  std::remove(path.c_str());  // never read a previous run's file
  return path;
}

PagedRun run_paged(const std::string& tag, const std::vector<std::string>& argv, const std::string& limit,
                   const std::map<std::string, std::string>& extra_env) {
  const std::string report = scratch(tag, "sim"), trace = scratch(tag, "trace");
  auto env = shim_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUSIM_REPORT"] = report;
  env["VGPUMEM_LIMIT"] = limit;
  env["VGPUMEM_TRACE"] = trace;
  for (const auto& [name, value] : extra_env) env[name] = value;
  PagedRun run;
  run.process = run_process(argv, env);
  run.simulator = read_json(report);
  run.trace = read_json(trace);
  return run;
}

void expect_clean_probe_run(const PagedRun& run, const std::string& ok_line, std::uint64_t cap_bytes) {
  ASSERT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
  EXPECT_NE(run.process.out.find(ok_line), std::string::npos) << run.process.out;
  ASSERT_FALSE(run.simulator.is_null());
  EXPECT_EQ(run.simulator["illegal_accesses"].get<int>(), 0) << run.simulator.dump();
  EXPECT_LE(run.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), cap_bytes);
  ASSERT_FALSE(run.trace.is_null());
}

}  // namespace vgpumem::test
