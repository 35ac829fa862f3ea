// `vgpumem run` options, validated with the shim's own parsers, and the
// environment they turn into. The environment logic exists once, here: `run`
// execs with it and `demo` spawns with it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vgpumem::cli {

struct RunOptions {
  std::optional<std::string> limit;                    // --limit SIZE
  std::map<int, std::string> device_limits;            // --limit-device I=SIZE
  std::optional<std::string> trace;                    // --trace FILE
  std::optional<std::string> log_level;                // --log-level L
  bool simulated = false;                              // --simulated[=DEVICE_SIZE]
  std::optional<std::string> simulated_device_memory;
  std::vector<std::string> program;                    // after --
  bool preload_shim = true;                            // false: the simulated driver alone (demo baseline)
};

struct ParseOutcome {
  std::optional<RunOptions> options;
  std::string error;  // set when options is empty
};

// Parses the arguments after "run". Errors name the option, the value and what is accepted.
ParseOutcome parse_run_options(const std::vector<std::string>& args);

// Variables to set (value) or leave alone; LD_PRELOAD and LD_LIBRARY_PATH are
// prepended to what `current` holds.
std::map<std::string, std::string> run_environment(const RunOptions& options,
                                                   const std::map<std::string, std::string>& current);

std::map<std::string, std::string> current_environment();

// One line for standard error when the options replace settings the
// environment holds (the options win: they are what was asked just now), or
// empty. `--limit` replaces every VGPUMEM_LIMIT_<i> too.
std::string overridden_by_options(const RunOptions& options, const std::map<std::string, std::string>& current);

// One line when a VGPUMEM_LIMIT_<i> in `environment` names a device the
// program would not see (asked of the driver it would load, in this
// environment), or empty; empty too when no driver answers.
std::string absent_device_problem(const std::map<std::string, std::string>& environment);

// NULL-terminated char* arrays for exec/spawn, owning their strings.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings);
  static CStringArray from_environment(const std::map<std::string, std::string>& environment);
  char* const* data() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

// Replaces this process with the program under `environment`; returns only on failure.
int exec_program(const std::vector<std::string>& program, const std::map<std::string, std::string>& environment);

}  // namespace vgpumem::cli
