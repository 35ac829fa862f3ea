// Runs a program as a fresh process with a chosen environment and captures
// what it printed: every e2e test starts its own process, so the shim is
// loaded exactly as in production (LD_PRELOAD) each time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vgpumem::test {

struct ProcessResult {
  int exit_code = -1;      // -1 if killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// `env` entries replace or add to the current environment; an entry whose
// value is nullopt removes the variable.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::optional<std::string>>& env);

// The environment that preloads the shim over the simulated driver
// (LD_PRELOAD, LD_LIBRARY_PATH), as `vgpumem run --simulated` sets it.
std::map<std::string, std::optional<std::string>> shim_environment();
// The simulated driver alone, no shim.
std::map<std::string, std::optional<std::string>> simulator_environment();

// Paths of build products, baked in by CMake.
std::string shim_library();
std::string program(const std::string& name);
std::string temp_path(const std::string& name);

// Lines of `text` starting with `prefix`.
std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix);
// The value of "<key> <value...>" (first line whose first word is key), or "".
std::string field(const std::string& text, const std::string& key);
// A trainer's "RESULT ... key=<n> ..." number, 0 if absent.
std::uint64_t result_number(const std::string& out, const std::string& key);

}  // namespace vgpumem::test
