// A probe program run under the shim with a cap (paging, the default
// policy), with what the simulated driver and the shim reported: shared by
// the paging e2e test files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {

// The file's JSON, or null if it cannot be read.
nlohmann::json read_json(const std::string& path);

// A scratch file for the running test: tests run in parallel, each in its
// own process, and must never share one.
std::string scratch(const std::string& tag, const std::string& what);

struct PagedRun {
  ProcessResult process;
  nlohmann::json simulator;  // the simulated driver's report
  nlohmann::json trace;      // the shim's trace
};

// Runs `argv` under the shim with VGPUMEM_LIMIT=`limit` on a 1 GiB simulated
// device; `extra_env` adds to or overrides the environment.
PagedRun run_paged(const std::string& tag, const std::vector<std::string>& argv, const std::string& limit,
                   const std::map<std::string, std::string>& extra_env = {});

// A probe's paged run ended as it must: exit 0 printing `ok_line`, no
// illegal access, the simulator's own physical peak within `cap_bytes`, and a
// trace written. Call through ASSERT_NO_FATAL_FAILURE.
void expect_clean_probe_run(const PagedRun& run, const std::string& ok_line, std::uint64_t cap_bytes);

}  // namespace vgpumem::test
